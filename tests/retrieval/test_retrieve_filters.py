"""Retrieval filters read decayed confidence, ``at`` decays as of then, backends stop at 20."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.records import DecayClass
from tests.retrieval.retrieve_support import ids, open_grimoire, put_entry


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_grimoire(tmp_path / "d", clock) as opened:
        yield opened


def test_min_confidence_reads_the_decayed_confidence(g: Grimoire, clock: FrozenClock) -> None:
    """An insight stored at 0.8 (tactical: 7-day half-life) passes min_confidence 0.6 today
    and not a week later, when it is worth 0.4; min_confidence 0.3 still lets it through."""
    entry = put_entry(g, "gas is cheap before dawn, swap then", confidence=0.8,
                      decay_class=DecayClass.TACTICAL)
    query = {"query": "gas swap dawn", "kinds": ["entry"], "mode": "browse"}
    assert ids(g.retrieve(**query, min_confidence=0.6)) == [entry.id]
    clock.advance(7 * MS_PER_DAY)
    (item,) = g.retrieve(**query)["items"]
    assert item["confidence"] == pytest.approx(0.4, abs=1e-3)
    assert g.retrieve(**query, min_confidence=0.6)["items"] == []
    assert ids(g.retrieve(**query, min_confidence=0.3)) == [entry.id]


def test_at_evaluates_decay_as_of_then(g: Grimoire, clock: FrozenClock) -> None:
    """Asked as of one day after it was stored, the entry is worth 0.8 × 2^(-1/7), not
    what two weeks of decay left of it today (0.8 × 2^(-2) = 0.2)."""
    stored_at = clock.now
    put_entry(g, "gas is cheap before dawn, swap then", confidence=0.8,
              decay_class=DecayClass.TACTICAL)
    clock.advance(14 * MS_PER_DAY)
    query = {"query": "gas swap dawn", "kinds": ["entry"], "mode": "browse"}
    (then,) = g.retrieve(**query, at=stored_at + MS_PER_DAY)["items"]
    (now,) = g.retrieve(**query)["items"]
    assert then["confidence"] == pytest.approx(0.8 * 2 ** (-1 / 7), abs=1e-3)
    assert now["confidence"] == pytest.approx(0.2, abs=1e-3)


def test_each_backend_contributes_at_most_its_top_twenty(g: Grimoire, clock: FrozenClock
                                                         ) -> None:
    """30 episodes and 30 entries all match the query's words: every backend list stops at
    retrieval.candidates (20), so the pool holds at most 20 per backend and kind."""
    for i in range(30):
        g.episode_write(text=f"gas spike {i} during the swap on WETH/USDC")
        put_entry(g, f"gas spike note {i}: swap WETH/USDC later")
        clock.advance(60_000)
    result = g.retrieve(query="gas spike swap WETH/USDC", k=50, mode="browse")
    backends = result["trace"]["backends"]
    assert g.context.config.retrieval.candidates == 20
    for name in ("vector.episode", "vector.entry", "bm25.episode", "bm25.entry"):
        assert backends[name] == 20, (name, backends)
    assert all(count <= 20 for count in backends.values()), backends


def test_replay_utility_lifts_the_episodes_with_more_at_stake(g: Grimoire, clock: FrozenClock
                                                              ) -> None:
    """Mattar-Daw replay through the facade: of two equally relevant swaps, the one with the
    larger P&L carries the larger replay utility and multiplier; an episode without a P&L
    gets no replay factor."""
    big = g.episode_write(text="swap WETH for USDC on uniswap", type="action",
                          outcome="negative", gain=-480.0)["id"]
    small = g.episode_write(text="swap WETH for USDC on uniswap again", type="action",
                            outcome="positive", gain=12.0)["id"]
    plain = g.episode_write(text="swap WETH for USDC on uniswap, noted")["id"]
    clock.advance(60_000)
    items = {i["id"]: i for i in g.retrieve(query="swap WETH USDC uniswap", kinds=["episode"],
                                            mode="browse")["items"]}
    assert {big, small, plain} <= set(items)
    replay = {i: items[i]["factors"].get("replay") for i in (big, small, plain)}
    assert replay[plain] is None
    assert replay[big] is not None and replay[small] is not None
    assert replay[big]["value"] > replay[small]["value"] > 0.0
    assert replay[big]["multiplier"] > replay[small]["multiplier"] > 1.0
