"""Additive causal fusion: witnesses of the causes surface, and "why" puts the root first."""

from __future__ import annotations

from pathlib import Path

from grimoire.clock import FrozenClock
from grimoire.retrieval.causal_additive import asks_why
from tests.retrieval.retrieve_support import HOUR, ids, open_grimoire

ROOT = "severe drought dried every reservoir near the valley"
MIDDLE = "council imposed strict grain rationing for the valley"
CRISIS = "food riots engulfed the valley market and shops were looted"
WITNESS = "Bram watched the severe drought dry every reservoir, cracked and empty"
LOUD = ("everyone talked about the food riots and the looted shops in the market",
        "a letter described how food riots looted the market shops",
        "the riots in the market, looted shops, food everywhere on the ground")


def _run(tmp_path: Path, fusion: str, **overrides: object,
         ) -> tuple[list[str], list[str], dict[str, str]]:
    clock = FrozenClock()
    t = clock.now - 10 * 24 * HOUR
    with open_grimoire(tmp_path, clock, **{"retrieval.causal_fusion": fusion,
                                           **overrides}) as g:  # type: ignore[arg-type]
        root = g.episode_write(text=ROOT, timestamp=t)["id"]
        witness = g.episode_write(text=WITNESS, timestamp=t + HOUR)["id"]
        middle = g.episode_write(text=MIDDLE, timestamp=t + 6 * HOUR)["id"]
        crisis = g.episode_write(text=CRISIS, timestamp=t + 12 * HOUR)["id"]
        for i, text in enumerate(LOUD):
            g.episode_write(text=text, timestamp=t + 12 * HOUR + i)
        for i in range(30):
            g.episode_write(text=f"routine note {i} about the weather and the harvest",
                            timestamp=t - (i + 1) * 24 * HOUR)
        g.causal_link(cause_id=root, effect_id=middle, weight=1.0)
        g.causal_link(cause_id=middle, effect_id=crisis, weight=1.0)
        events = {root, middle, crisis}
        plain = g.retrieve(query=CRISIS, event_id=crisis, kinds=["episode"], k=10,
                           mode="browse")
        memories = [i for i in ids(plain) if i not in events][:3]
        why = g.retrieve(query=f"Why did this happen: {CRISIS}?", event_id=crisis,
                         kinds=["episode"], k=10, mode="browse")
        anchored = g.retrieve(query=CRISIS, event_id=crisis, kinds=["episode"], k=10,
                              mode="browse")
        return memories, ids(why), {"root": root, "witness": witness, "crisis": crisis,
                                    "anchored_first": ids(anchored)[0]}


def test_the_witness_of_a_cause_surfaces_only_with_additive_fusion(tmp_path: Path) -> None:
    memories, _, named = _run(tmp_path / "add", "additive")
    assert named["witness"] in memories
    memories, _, named = _run(tmp_path / "mul", "multiplicative")
    assert named["witness"] not in memories


def test_a_why_question_puts_the_root_cause_first(tmp_path: Path) -> None:
    _, why, named = _run(tmp_path / "add", "additive")
    assert why[0] == named["root"]
    _, why, named = _run(tmp_path / "mul", "multiplicative")
    assert why[0] != named["root"]


def test_a_question_anchored_on_an_event_puts_its_root_cause_first(tmp_path: Path) -> None:
    # No "why" wording: the event_id says the question is about that event's causes.
    _, _, named = _run(tmp_path / "add", "additive")
    assert named["anchored_first"] == named["root"]


def test_a_cause_no_backend_finds_joins_the_pool_through_the_chain(tmp_path: Path) -> None:
    # Each backend lists 3: the root (worded unlike the question) is pooled only as the
    # event's ancestor, of the item kinds asked for (once the walk's edge kinds took their
    # place, and no ancestor joined: bench_causal's root MRR fell from 1.000 to 0.767).
    _, why, named = _run(tmp_path / "add", "additive", **{"retrieval.candidates": 3})
    assert why[0] == named["root"]
    assert named["anchored_first"] == named["root"]


def test_anchored_reach_leads_with_the_root_but_keeps_near_causes_lifted() -> None:
    from grimoire.retrieval.causal_additive import _reach
    anchored = [_reach(d, 3, 4, why=False, anchored=True) for d in (1, 2, 3)]
    ordinary = [_reach(d, 3, 4, why=False, anchored=False) for d in (1, 2, 3)]
    assert anchored == sorted(anchored) and anchored[-1] == 1.0 and anchored[0] > 0.5
    assert ordinary == sorted(ordinary, reverse=True)


def test_asks_why() -> None:
    assert asks_why("Why did the riots start?")
    assert asks_why("what caused the outage")
    assert not asks_why("riots in the market")


def test_witnesses_join_the_pool_only_on_a_chain_walk(tmp_path: Path) -> None:
    """Outside a walk the gate keeps an item only the causal stream found below every
    relevant one: pooling the causes' witnesses there cost the search, not the answer."""
    clock = FrozenClock()
    t = clock.now - 10 * 24 * HOUR
    # Two per backend: the loud restatements fill the backends' lists, so the witness can
    # only come in through the chain.
    with open_grimoire(tmp_path, clock, **{"retrieval.candidates": 2}) as g:  # type: ignore[arg-type]
        root = g.episode_write(text=ROOT, timestamp=t)["id"]
        witness = g.episode_write(text=WITNESS, timestamp=t + HOUR)["id"]
        crisis = g.episode_write(text=CRISIS, timestamp=t + 12 * HOUR)["id"]
        for i, text in enumerate(LOUD):
            g.episode_write(text=text, timestamp=t + 12 * HOUR + i)
        g.causal_link(cause_id=root, effect_id=crisis, weight=1.0)

        def unranked(**params: object) -> set[str]:
            """Pooled by no backend: the event's ancestors and the witnesses."""
            items = g.retrieve(kinds=["episode"], k=10, mode="browse", explain=True,
                               **params)["items"]
            return {i["id"] for i in items if not i.get("backend_ranks")} - {root, crisis}

        assert unranked(query=f"Why did this happen: {CRISIS}?") == {witness}
        assert unranked(query=CRISIS, event_id=crisis) == {witness}
        assert unranked(query=CRISIS) == set()
