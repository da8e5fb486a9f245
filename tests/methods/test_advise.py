"""``rules.applicable``: the active rules whose structured condition holds for a situation
given as the fields of an action episode, warnings first (issue 24 part 1).

A real Grimoire in tmp_path holding rules as the curator stores them
(``advise_support.fill_rules``); the situation is matched on its fields, not on words.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.service.api import dispatch
from tests.curator.test_curator_support import grimoire_at, hour, swap, write
from tests.methods.advise_support import SWAP_HIGH_VOL, Rules, fill_rules, same_advice_warning
from tests.retrieval.retrieve_support import settle


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


@pytest.fixture
def rules(g: Grimoire) -> Rules:
    return fill_rules(g)


def _found(out: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(r["id"], r["match"], r["missing"]) for r in out["rules"]]


def test_swap_in_high_vol_as_fields_gets_the_high_vol_swap_warnings_first(
        g: Grimoire, rules: Rules) -> None:
    out = g.rules_applicable(situation=SWAP_HIGH_VOL)
    assert _found(out) == [
        (rules.slippage_warning, "applies", []),  # global: holds for every strategy
        (rules.swap_warning, "may_apply", ["strategy"]),  # eth-dca's: no strategy given
        (rules.night_heuristic, "may_apply", ["timestamp"]),  # hours 02-04: no time given
    ]
    assert (out["applies"], out["may_apply"]) == (1, 2)
    first = out["rules"][0]
    assert first["condition"] == {"regime": "high_vol", "action": "swap"}
    assert first["derived_from"] is not None and first["target"] == "metric:slippage_bps"
    assert first["effect_size"] == pytest.approx((21 - 14) / 21, abs=1e-6)
    assert first["weight"] == pytest.approx(first["confidence"] * first["effect_size"],
                                            abs=1e-5)
    # Neither the rule told in words only, nor the candidate, nor another action's rule.
    ids = {r["id"] for r in out["rules"]}
    assert not ids & {rules.told_warning, rules.candidate_warning, rules.lp_warning}


def test_the_strategy_that_owns_a_rule_gets_it_and_another_strategy_does_not(
        g: Grimoire, rules: Rules) -> None:
    mine = g.rules_applicable(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca"},
                              may_apply=False)
    # Both apply; the higher weight first (0.85 x 0.32 against 0.9 x 0.33: close, so check)
    assert {r["id"] for r in mine["rules"]} == {rules.slippage_warning, rules.swap_warning}
    weights = [r["weight"] for r in mine["rules"]]
    assert weights == sorted(weights, reverse=True)
    other = g.rules_applicable(situation={**SWAP_HIGH_VOL, "strategy": "weth-usdc-lp"},
                               may_apply=False)
    assert _found(other) == [(rules.slippage_warning, "applies", [])]


def test_warnings_come_before_heuristics_that_apply(g: Grimoire, rules: Rules) -> None:
    out = g.rules_applicable(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca",
                                        "timestamp": hour(3, day=2)})
    assert [(r["category"], r["match"]) for r in out["rules"]] == [
        ("warning", "applies"), ("warning", "applies"), ("heuristic", "applies")]
    assert out["rules"][2]["id"] == rules.night_heuristic


def test_the_situation_time_not_the_clock_decides_an_hour_window(
        g: Grimoire, rules: Rules, clock: FrozenClock) -> None:
    clock.set(hour(3))  # the injected clock says 03:00: it must not matter
    at_noon = g.rules_applicable(situation={"actions": ["swap"], "timestamp": hour(12)})
    assert rules.night_heuristic not in {r["id"] for r in at_noon["rules"]}
    at_three = g.rules_applicable(situation={"actions": ["swap"], "timestamp": hour(3.5)})
    assert (rules.night_heuristic, "applies", []) in _found(at_three)


def test_a_situation_lacking_a_needed_field_gets_may_apply(g: Grimoire, rules: Rules) -> None:
    out = g.rules_applicable(situation={"regime": "high_vol"})
    found = {r["id"]: r["missing"] for r in out["rules"]}
    assert found[rules.slippage_warning] == ["action"]
    assert found[rules.swap_warning] == ["action", "strategy", "token_pair"]
    assert all(r["match"] == "may_apply" for r in out["rules"])
    assert g.rules_applicable(situation={"regime": "high_vol"}, may_apply=False)["rules"] == []


def test_a_neutral_situation_gets_nothing(g: Grimoire, rules: Rules) -> None:
    out = g.rules_applicable(situation={"actions": ["lp_add"], "token_pair": "WETH/USDC",
                                        "regime": "sideways", "strategy": "eth-dca",
                                        "timestamp": hour(12)})
    assert out["rules"] == [] and out["applies"] == out["may_apply"] == 0


def test_a_tool_alone_names_the_action_as_the_curator_reads_it(g: Grimoire,
                                                               rules: Rules) -> None:
    out = g.rules_applicable(situation={"tool": "lp_add", "regime": "low_vol"})
    assert _found(out) == [(rules.lp_warning, "applies", [])]


def test_insights_are_asked_for(g: Grimoire, rules: Rules) -> None:
    out = g.rules_applicable(situation=SWAP_HIGH_VOL, categories=["insight"])
    assert [(r["category"], r["target"], r["match"]) for r in out["rules"]] == [
        ("insight", "metric:slippage_bps", "applies"),
        ("insight", "metric:gas_gwei", "may_apply")]


@pytest.mark.parametrize(("params", "field"), [
    ({"situation": {"action": "swap"}}, "situation"),  # a typo: actions
    ({"situation": {"regime": "stormy"}}, "situation.regime"),
    ({"situation": {"regime": 5}}, "situation.regime"),
    ({"situation": {"token_pair": ["WETH", "USDC"]}}, "situation.token_pair"),
    ({"situation": {"metrics": {"gas_gwei": "high"}}}, "situation.metrics.gas_gwei"),
    ({"situation": {"actions": "swap"}}, "situation.actions"),
    ({"situation": {"timestamp": "noon"}}, "situation.timestamp"),
    ({"situation": {}}, "situation"),
    ({"situation": "swap in high_vol"}, "situation"),
    ({"situation": {"regime": "high_vol"}, "limit": 0}, "limit"),
    ({"situation": {"regime": "high_vol"}, "categories": ["rumour"]}, "categories"),
    ({"situation": {"regime": "high_vol"}, "may_apply": "yes"}, "may_apply"),
])
def test_bad_input_names_the_field(g: Grimoire, params: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        dispatch(g, "rules.applicable", params)
    assert err.value.field == field, str(err.value)


def test_an_unknown_field_is_named_with_the_fields_a_situation_has(g: Grimoire) -> None:
    with pytest.raises(ValidationError, match=r"unknown field\(s\) action; a situation has "
                       r"tool, actions, token_pair"):
        g.rules_applicable(situation={"action": "swap"})


def test_without_a_time_confidence_is_read_at_the_data_time_as_entry_get_shows_it(
        g: Grimoire, rules: Rules, clock: FrozenClock) -> None:
    """A replayed store: the clock reads weeks after the newest episode. The confidence
    ``rules.applicable`` prints is the one ``entry.get`` prints (the data's own time), not
    one decayed by the clock's weeks."""
    g.episode_write(text="eth-dca swap on WETH/USDC in high_vol: negative", type="action",
                    timestamp=clock.now)
    clock.advance(30 * 86_400_000)  # 30 days
    first = g.rules_applicable(situation=SWAP_HIGH_VOL)["rules"][0]
    shown = dispatch(g, "entry.get", {"id": first["id"]})["effective_confidence"]
    assert first["confidence"] == pytest.approx(shown, abs=1e-3)
    assert first["confidence"] > 0.5  # 30 days on the clock would have decayed it below


def test_a_rule_changed_between_two_calls_is_seen_at_the_second(
        g: Grimoire, rules: Rules, monkeypatch: pytest.MonkeyPatch) -> None:
    # The active rules are kept between calls under the store's read mark: every commit
    # (here an archive, then the rule's new confidence) must show at the next call.
    semantic = g.context.semantic
    reads: list[int] = []
    real = semantic.list_entries
    monkeypatch.setattr(semantic, "list_entries",
                        lambda *a, **k: reads.append(1) or real(*a, **k))
    first = g.rules_applicable(situation=SWAP_HIGH_VOL)
    assert g.rules_applicable(situation=SWAP_HIGH_VOL) == first
    assert len(reads) == 1  # nothing committed in between: the rows were decoded once
    semantic.archive(rules.swap_warning)
    ids = {r["id"] for r in g.rules_applicable(situation=SWAP_HIGH_VOL)["rules"]}
    assert rules.swap_warning not in ids and rules.slippage_warning in ids
    assert len(reads) == 2


def test_a_situational_retrieve_decodes_the_rules_once_between_changes(
        g: Grimoire, rules: Rules, monkeypatch: pytest.MonkeyPatch) -> None:
    # retrieve(situation) reads two lists: the rules that apply (warnings, heuristics) and
    # those its lessons-first step may lift (causal links too; asked whenever the pool
    # holds entries and episodes). Both are kept under one mark: one slot would hold
    # either list, and each call would decode both again.
    write(g, [swap(hour(h), "negative") for h in range(1, 6)])
    semantic = g.context.semantic
    reads: list[int] = []
    real = semantic.list_entries
    monkeypatch.setattr(semantic, "list_entries",
                        lambda *a, **k: reads.append(1) or real(*a, **k))
    ask = {"situation": SWAP_HIGH_VOL, "k": 10,
           "query": "is an eth-dca swap on WETH/USDC in high_vol a bad idea?"}
    first = g.retrieve(**ask)["items"]
    decoded = len(reads)
    for _ in range(3):
        assert [i["id"] for i in g.retrieve(**ask)["items"]] == [i["id"] for i in first]
    assert len(reads) == decoded


def test_rules_of_the_same_advice_take_one_place(g: Grimoire, rules: Rules) -> None:
    """Two warnings with one condition in one strategy (losses more often, wins less often)
    are one piece of advice: one place, the second under ``also``; the global slippage
    warning (another condition) keeps its own place, and ``limit`` counts places."""
    other = same_advice_warning(g)
    out = g.rules_applicable(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca"})
    places = {r["id"]: r for r in out["rules"]}
    assert [r["id"] for r in out["rules"]][2:] == [rules.night_heuristic]
    assert set(places) == {rules.slippage_warning, rules.swap_warning, rules.night_heuristic}
    assert places[rules.slippage_warning]["also"] == []
    folded = places[rules.swap_warning]["also"]
    assert [(a["id"], a["target"], a["also"]) for a in folded] == [
        (other, "outcome:positive_rate", [])]
    assert folded[0]["weight"] <= places[rules.swap_warning]["weight"]
    assert out["applies"] == 2
    top2 = g.rules_applicable(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca"}, limit=2)
    assert {r["id"] for r in top2["rules"]} == {rules.slippage_warning, rules.swap_warning}
    # Without a strategy both may apply (needing it): still one place.
    loose = g.rules_applicable(situation=SWAP_HIGH_VOL)
    assert [(r["id"], [a["id"] for a in r["also"]]) for r in loose["rules"]] == [
        (rules.slippage_warning, []), (rules.swap_warning, [other]),
        (rules.night_heuristic, [])]


def test_a_folded_rule_is_served_in_the_context_block_and_can_be_reported_followed(
        g: Grimoire, rules: Rules) -> None:
    other = same_advice_warning(g)
    write(g, [swap(hour(h), "negative") for h in range(1, 4)])
    out = g.retrieve(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca"}, k=4,
                     max_tokens=2000, format="context")
    served = {i["id"]: i for i in out["items"] if "rule" in i}
    assert {rules.slippage_warning, rules.swap_warning} <= set(served)
    assert other not in {i["id"] for i in out["items"]}
    assert [a["id"] for a in served[rules.swap_warning]["rule"]["also"]] == [other]
    assert len(out["items"]) == 4  # k counts places: the folded rule takes none
    block = out["context"].splitlines()
    rank = served[rules.swap_warning]["rank"]
    at = next(n for n, line in enumerate(block) if line.startswith(f"{rank}. [warning"))
    assert block[at + 1].startswith("   also [warning · confidence ")
    assert block[at + 1].endswith("11 of 43 were positive (25% vs 30% for swap overall).")
    settle(g)
    answer = g.outcome_report(retrieval_id=out["retrieval_id"], outcome="negative",
                              followed_ids=[other])
    assert answer["followed_ids"] == [other]
