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
from tests.curator.test_curator_support import grimoire_at, hour, swap, write
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


def test_a_why_question_is_not_reordered_by_lessons(g: Grimoire, rules: Rules) -> None:
    items = _ranked(g, "why did the eth-dca swap on WETH/USDC in high_vol go negative?")
    assert items and all("covers" not in i["factors"] for i in items)
