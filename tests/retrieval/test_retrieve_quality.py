"""Quality of the whole pipeline on real stores: what the owner relies on, ranked right.

Deterministic: HashEmbedder (texts sharing words are similar) and a frozen clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.records import Category, DecayClass, Regime
from tests.retrieval.retrieve_support import DAY, HOUR, entry, ids, open_grimoire, put_entry, settle

# Each reads like part of the query and little like the others (MMR keeps them).
SYMPTOMS = [
    "swap reverted on the uniswap router",
    "transaction ran out of gas limit",
    "why is gas so expensive today",
    "bridge transfer reverted unexpectedly",
    "did the approval swap fail",
    "out of funds for the next trade",
]


def _outage(g: Grimoire, clock: FrozenClock) -> tuple[str, str]:
    """Symptoms that read like the query; the root cause shares no word with it."""
    root = g.episode_write(text="NFT mint congested mempool for an hour",
                           type="observation")["id"]
    clock.advance(10 * 60_000)
    for i, text in enumerate(SYMPTOMS):
        g.episode_write(text=text, type="action", outcome="negative", tick_id=i)
        clock.advance(60_000)
    event = g.episode_write(text="swap reverted out of gas during congestion",
                            type="action", outcome="negative")["id"]
    g.causal_link(cause_id=root, effect_id=event, relationship="the mint filled the blocks")
    clock.advance(HOUR)
    return root, event


@pytest.mark.parametrize("lam", [0.6, 0.0])
def test_root_cause_reaches_top_3_only_with_the_causal_boost(
        tmp_path: Path, lam: float) -> None:
    clock = FrozenClock()
    # seed 000's multiplicative form, whose lambda this is (the additive default has its
    # own test: test_retrieval_causal_additive)
    with open_grimoire(tmp_path / "d", clock, **{"retrieval.causal_lambda": lam,
                                                 "retrieval.causal_fusion": "multiplicative"}
                       ) as g:
        root, event = _outage(g, clock)
        result = g.retrieve(query="why did the swap revert out of gas?", k=5, event_id=event)
        ranked = ids(result)
        if lam:
            assert root in ranked[:3]
            item = result["items"][ranked.index(root)]
            assert item["factors"]["causal"]["depth"] == 1.0
            assert item["factors"]["rrf"]["value"] < 0.2  # the backends barely found it
        else:
            assert root not in ranked[:3]


def test_top_episode_hit_is_the_event_when_none_is_given(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        root, event = _outage(g, clock)
        result = g.retrieve(query="swap reverted out of gas during congestion", k=5)
        assert result["trace"]["event_id"] == event
        assert root in ids(result)[:3]
        assert [link["id"] for link in result["causal_chain"]["chain"]] == [root, event]


def test_mmr_drops_near_duplicates(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        copies = [g.episode_write(text="gas spiked to 90 gwei on mainnet")["id"]
                  for _ in range(3)]
        other = g.episode_write(text="gas fell to 8 gwei overnight")["id"]
        ranked = ids(g.retrieve(query="gas spiked gwei", k=5))
        assert len([i for i in ranked if i in copies]) == 1
        assert other in ranked


def test_decayed_entry_ranks_below_a_fresh_one(tmp_path: Path) -> None:
    """Equal similarity; one at the confidence floor after 200 days of tactical decay."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        old = put_entry(g, "gas is cheap at night alpha", decay_class=DecayClass.TACTICAL)
        clock.advance(200 * DAY)
        fresh = put_entry(g, "gas is cheap at night bravo", decay_class=DecayClass.TACTICAL)
        result = g.retrieve(query="gas is cheap at night", kinds=["entry"])
        by_id = {i["id"]: i for i in result["items"]}
        assert by_id[old.id]["confidence"] == pytest.approx(0.05)
        assert ids(result) == [fresh.id, old.id]


@pytest.mark.parametrize(("regime", "winner"), [("high_vol", 0), ("low_vol", 1)])
def test_regime_match_lifts_matching_entries(tmp_path: Path, regime: str, winner: int) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        made = [put_entry(g, "rebalance less often alpha", market_regime=Regime.HIGH_VOL),
                put_entry(g, "rebalance less often bravo", market_regime=Regime.LOW_VOL)]
        result = g.retrieve(query="rebalance less often", kinds=["entry"], regime=regime)
        assert ids(result)[0] == made[winner].id
        top = result["items"][0]["factors"]["regime"]
        assert top["value"] == 1.0


def _feedback_world(g: Grimoire, clock: FrozenClock) -> list[str]:
    made = [put_entry(g, f"when gas is high wait before swapping {word}",
                      category=Category.HEURISTIC, decay_class=DecayClass.REGIME_CONDITIONAL,
                      confidence=0.6).id
            for word in ("alpha", "bravo", "charlie", "delta")]
    clock.advance(10 * DAY)  # all four have decayed alike
    return made


def test_positive_feedback_raises_an_items_rank(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        made = _feedback_world(g, clock)
        first = g.retrieve(query="gas high wait swapping", kinds=["entry"])
        last = ids(first)[-1]
        g.outcome_report(retrieval_id=first["retrieval_id"], outcome="positive",
                         followed_ids=[last])
        assert entry(g, last).strength == 2.0
        second = ids(g.retrieve(query="gas high wait swapping", kinds=["entry"]))
        assert second.index(last) < ids(first).index(last)
        assert set(second) == set(made)


def test_negative_feedback_lowers_an_items_rank(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        _feedback_world(g, clock)
        first = g.retrieve(query="gas high wait swapping", kinds=["entry"])
        top = ids(first)[0]
        g.outcome_report(retrieval_id=first["retrieval_id"], outcome="negative",
                         followed_ids=[top])
        settle(g)
        second = ids(g.retrieve(query="gas high wait swapping", kinds=["entry"]))
        assert second.index(top) > ids(first).index(top)
