"""Factories for the learning-pipeline tests: a facade on real stores, planted episode streams."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grimoire.clock import MS_PER_HOUR, FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import Embedder
from grimoire.models.llm import LLM
from grimoire.records import EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

MINUTE = 60_000
# A start on a UTC midnight, so that hour-of-day windows line up with the plan.
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def config(tmp_path: Path, **changes: Any) -> Config:
    """Test config: LanceDB flushes rarely (reads see buffered rows), no automatic distilling."""
    base: dict[str, Any] = {"episodes.flush_rows": 4096, "episodes.flush_ms": 10**12,
                            "distiller.every_episodes": 10**9, "curator.every_ticks": 10**9}
    base.update(changes)
    return Config(data_dir=str(tmp_path / "g")).replace(**base)


def open_grimoire(tmp_path: Path, clock: FrozenClock, embedder: Embedder, *,
                  llm: LLM | None = None, changes: Mapping[str, Any] | None = None
                  ) -> Grimoire:
    return Grimoire.open(config=config(tmp_path, **(changes or {})), clock=clock,
                         embedder=embedder, llm=llm)


def stored(g: Grimoire, entry_id: str) -> GrimoireEntry:
    entry = g.context.semantic.get_entry(entry_id)
    assert entry is not None, entry_id
    return entry


def write(g: Grimoire, params: Sequence[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = []
    for start in range(0, len(params), 1000):
        ids.extend(g.episode_write_batch(params[start:start + 1000])["ids"])
    return ids


def gas_observations(seed: int, *, start: int = T0, hours: int = 72, step_min: int = 15,
                     cheap: tuple[int, int] = (2, 4), cheap_mean: float = 6.0,
                     base_mean: float = 24.0) -> list[dict[str, Any]]:
    """Observations every ``step_min`` minutes; gas averages ``cheap_mean`` inside ``cheap``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(hours * 60 // step_min):
        ts = start + i * step_min * MINUTE
        hour = ts // MS_PER_HOUR % 24
        mean = cheap_mean if cheap[0] <= hour < cheap[1] else base_mean
        gas = float(mean * rng.lognormal(-0.03, 0.25))
        out.append({"type": "observation", "text": f"gas {gas:.1f} gwei", "timestamp": ts,
                    "regime": "sideways", "token_pair": "WETH/USDC",
                    "metrics": {"gas_gwei": round(gas, 2),
                                "slippage_bps": round(float(rng.lognormal(2.5, 0.3)), 2)}})
    return out


def alert_stream(seed: int, *, start: int = T0, hours: int = 72, alerts: int = 30,
                 noise: int = 40) -> list[dict[str, Any]]:
    """Clade alerts each followed 3-6 minutes later by a shift to high_vol, plus noise events."""
    rng = np.random.default_rng(seed)
    span = hours * 60 * MINUTE
    out = []
    for t in np.sort(rng.integers(0, span - 20 * MINUTE, alerts)):
        ts = start + int(t)
        out.append({"type": "clade_alert", "text": "Clade alert: whale moved WETH",
                    "timestamp": ts, "importance": "notable"})
        out.append({"type": "regime_shift", "text": "Regime shift to high_vol",
                    "timestamp": ts + int(rng.integers(3, 7)) * MINUTE, "regime": "high_vol"})
    for t in rng.integers(0, span, noise):
        out.append({"type": "replicant_report", "text": "Replicant backtest finished",
                    "timestamp": start + int(t)})
    return sorted(out, key=lambda p: int(p["timestamp"]))


def entries(g: Grimoire, **filters: Any) -> list[GrimoireEntry]:
    statuses = filters.pop("statuses", tuple(s for s in EntryStatus
                                             if s is not EntryStatus.ARCHIVED))
    return g.context.semantic.list_entries(EntryFilter(statuses=statuses, **filters),
                                           order="created_at", limit=None)


def run_sim(g: Grimoire, clock: FrozenClock, scenario: str, seed: int, ticks: int
            ) -> list[dict[str, Any]]:
    """Drive the facade with the simulator, one heartbeat per tick; the tick summaries."""
    feed = SimFeed(load_scenario(scenario), seed)
    step = int((feed.tick_seconds_hint or 180.0) * 1000)
    summaries = []
    for tick in range(1, ticks + 1):
        now = clock.advance(step)
        summaries.append(g.tick(now=now, feed_episodes=feed.poll(tick, now)))
    return summaries


def distilled(summaries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [d for s in summaries for d in s.get("distilled", [])]
