"""Lessons first (``grimoire.retrieval.lessons``): a rule the query finds ranks above the
episodes it covers (its structured condition holds for them), within its relevance tier.

Issue 24: a question worded like both a warning and the swaps it was learned from put the
swaps first (their recency and replay lifted them), and the warning fell below the top 3.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.records import Category, Claim
from tests.curator.test_curator_support import episode, grimoire_at, hour, put, swap, write
from tests.methods.advise_support import Rules, fill_rules

QUESTION = "is an eth-dca swap on WETH/USDC in high_vol a bad idea?"


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


@pytest.fixture
def rules(g: Grimoire) -> Rules:
    rules = fill_rules(g)
    write(g, [swap(hour(h), "negative" if h % 3 else "positive") for h in range(1, 10)]
          + [swap(hour(h), "positive", regime="low_vol") for h in range(10, 14)])
    return rules


def _ranked(g: Grimoire, query: str) -> list[dict]:
    return list(g.retrieve(query=query, k=10, explain=True, mode="browse")["items"])


def test_a_rule_ranks_above_the_episodes_it_covers(g: Grimoire, rules: Rules) -> None:
    items = _ranked(g, QUESTION)
    ids = [i["id"] for i in items]
    covered = [i for i in items if i["kind"] == "episode" and "in high_vol" in i["content"]]
    assert rules.swap_warning in ids and covered
    warning = items[ids.index(rules.swap_warning)]
    assert all(ids.index(rules.swap_warning) < ids.index(e["id"]) for e in covered)
    # The lift is the best covered episode's boosted score; the count is of the pooled,
    # relevant episodes the condition holds for: the 9 swaps of eth-dca on WETH/USDC in
    # high_vol (MMR shows two of them, the others repeat their texts), none in low_vol.
    line = warning["factors"]["covers"]
    assert line["value"] == pytest.approx(max(e["factors"]["relevance"]["boosted"]
                                              for e in covered))
    assert line["episodes"] == 9
    # The printed score is the one that ranked.
    scores = [i["score"] for i in items]
    assert scores == sorted(scores, reverse=True)


def test_an_episode_the_query_repeats_stays_first(g: Grimoire, rules: Rules) -> None:
    text = "eth-dca swap on WETH/USDC in high_vol: negative"
    top = _ranked(g, text)[0]
    assert top["kind"] == "episode" and top["content"] == text


def test_a_rule_covering_nothing_pooled_is_not_lifted(g: Grimoire, rules: Rules) -> None:
    # lp_add in low_vol covers no swap: its line is absent wherever it ranks.
    for item in _ranked(g, "lp_add in low_vol after an eth-dca swap on WETH/USDC"):
        if item["id"] == rules.lp_warning:
            assert "covers" not in item["factors"]


def test_a_causal_link_ranks_above_the_occurrences_it_speaks_about(g: Grimoire,
                                                                   rules: Rules) -> None:
    """A link "A is followed by B" is the lesson its events' episodes taught: a question
    that finds the shifts to high_vol it announces finds the link first (issue 24: "What
    warns ahead of a switch to a market where volatility is high?" ranked it 9th, below the
    regime insights)."""
    shifts = [episode(f"Regime shift on WETH/USDC: sideways → high_vol ({n} of 5)",
                      at=hour(20 + n, day=1), type="regime_shift", regime="high_vol",
                      token_pair="WETH/USDC") for n in range(5)]
    other = [episode(f"Regime shift on WETH/USDC: high_vol → sideways ({n} of 5)",
                     at=hour(20 + n, day=1) + 1_800_000, type="regime_shift",
                     regime="sideways", token_pair="WETH/USDC") for n in range(5)]
    write(g, [*shifts, *other])
    link = put(g, category=Category.CAUSAL_LINK, confidence=0.6, content=(
        "A clade alert is followed by a regime shift to high vol within 10 min: 5 of 8 "
        "times (62.5% vs 2.4% for any 10 min window)."), claim=Claim(
        condition={"event": "clade_alert", "within_ms": 600_000},
        target="event:regime_shift_to_high_vol", direction="higher", effect=0.625,
        baseline=0.024, support=8))
    items = _ranked(g, "a regime shift on WETH/USDC to high_vol")
    ids = [i["id"] for i in items]
    announced = [i for i in items if i["kind"] == "episode" and "→ high_vol" in i["content"]]
    assert link.id in ids and announced
    assert all(ids.index(link.id) < ids.index(e["id"]) for e in announced)
    line = items[ids.index(link.id)]["factors"]["covers"]
    assert line["episodes"] == 5  # the shifts to high_vol, not those away from it


def test_a_why_question_is_not_reordered_by_lessons(g: Grimoire, rules: Rules) -> None:
    items = _ranked(g, "why did the eth-dca swap on WETH/USDC in high_vol go negative?")
    assert items and all("covers" not in i["factors"] for i in items)
