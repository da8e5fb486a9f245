"""Factories shared by the curator tests (no tests here): a real Grimoire in tmp_path with a
frozen clock and the hash embedder, entries written straight into the semantic store, and
a hand-started cycle so one phase can run on its own."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from curator.cycle.state import Cycle, CycleState, load_window
from grimoire import Grimoire
from grimoire.clock import MS_PER_HOUR, FrozenClock
from grimoire.config import Config
from grimoire.ids import new_id
from grimoire.models.embedders import HashEmbedder
from grimoire.records import (
    Category,
    Claim,
    DecayClass,
    EntryStatus,
    GrimoireEntry,
    Provenance,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z, the FrozenClock default

GAS_CLAIM = Claim(condition={"hour_window": [2, 4]}, target="metric:gas_gwei",
                  direction="lower", effect=6.0, baseline=24.0, support=40)
SWAP_CLAIM = Claim(condition={"action": "swap", "regime": "high_vol"},
                   target="outcome:negative_rate", direction="higher", effect=0.8,
                   baseline=0.35, support=20, strategy="eth-dca")


def curator_config(**changes: Any) -> Config:
    """The default config with the heartbeat's own cycles off and small write batches."""
    base = {"curator.every_ticks": 1_000_000, "curator.write_batch": 8}
    base.update(changes)
    return Config().replace(**base)


def open_grimoire(path: Path, clock: FrozenClock, **changes: Any) -> Grimoire:
    return Grimoire.open(path, config=curator_config(**changes), clock=clock,
                         embedder=HashEmbedder(dim=384))


def grimoire_at(tmp_path: Path, clock: FrozenClock, **changes: Any) -> Iterator[Grimoire]:
    """Body of a ``g`` fixture (``tests/curator/conftest.py`` and modules elsewhere)."""
    with open_grimoire(tmp_path / "data", clock, **changes) as g:
        yield g


def put(g: Grimoire, **fields: Any) -> GrimoireEntry:
    """Insert an entry directly (no gate); fields override an active self-learned insight."""
    ctx = g.context
    now = ctx.now()
    base = GrimoireEntry(
        id=new_id(now), category=Category.INSIGHT,
        content=fields.pop("content", f"note {new_id(now)[-6:]} about gas and swaps"),
        confidence=0.6, quality_score=0.5, decay_class=DecayClass.TACTICAL,
        provenance=Provenance.SELF_LEARNED, created_at=now, last_accessed_at=now,
        status=EntryStatus.ACTIVE, updated_at=now)
    entry = dataclasses.replace(base, **fields)
    vector = ctx.embedder.embed([entry.content])[0]
    ctx.writer.call(functools.partial(ctx.semantic.insert_entry, entry, vector))
    return entry


def get(g: Grimoire, entry_id: str) -> GrimoireEntry:
    found = g.context.semantic.get_entry(entry_id)
    assert found is not None
    return found


def episode(text: str = "observation", *, at: int, **fields: Any) -> dict[str, Any]:
    return {"text": text, "timestamp": at, **fields}


def gas_obs(at: int, gas: float, regime: str = "sideways") -> dict[str, Any]:
    return episode(f"WETH/USDC gas {gas:.1f} gwei regime {regime}", at=at, type="observation",
                   regime=regime, token_pair="WETH/USDC", metrics={"gas_gwei": gas})


def swap(at: int, outcome: str, regime: str = "high_vol", pair: str = "WETH/USDC",
         ) -> dict[str, Any]:
    return episode(f"eth-dca swap on {pair} in {regime}: {outcome}", at=at, type="action",
                   regime=regime, token_pair=pair, strategy="eth-dca", actions=["swap"],
                   tool="uniswap_v3", outcome=outcome, gain=5.0 if outcome == "positive" else -5.0)


def write(g: Grimoire, episodes: Sequence[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = g.episode_write_batch(list(episodes))["ids"]
    return ids


def hour(h: float, day: int = 0) -> int:
    return T0 + day * 24 * MS_PER_HOUR + int(h * MS_PER_HOUR)


def start_cycle(g: Grimoire, now: int | None = None) -> Cycle:
    """A cycle set up exactly as ``run_cycle`` sets it up, to run single phases."""
    ctx = g.context
    previous = CycleState.load(ctx)
    window = load_window(ctx, previous.watermark, ctx.config.curator.window_episodes)
    return Cycle(ctx=ctx, now=ctx.now() if now is None else now, number=previous.cycle + 1,
                 previous=previous, window=window)


def finish_cycle(cy: Cycle) -> None:
    """Advance the stored cycle state as ``run_cycle`` would (without the other phases)."""
    state = CycleState(cycle=cy.number, last_now=cy.now, watermark=cy.watermark,
                       last_l2_at=cy.notes.get("last_l2_at", cy.previous.last_l2_at))
    cy.ctx.writer.call(functools.partial(cy.ctx.semantic.set_meta, "curator_state",
                                         state.to_dict()))


def deltas(g: Grimoire, entry_id: str) -> list[str]:
    return [d.op for d in g.context.semantic.list_curator_deltas(entry_id=entry_id)]
