"""``retrieve`` with a ``situation``: the rules that apply to it come first, in the items and
as the context block's first part; text-only queries keep working by similarity.

Issue 24: on the README demo's store, "should I swap now while volatility is high?" found
the high_vol swap warnings only when worded like them. Given as fields, the situation is
matched on the rules' conditions, however it is worded (or with no words at all).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from tests.curator.test_curator_support import grimoire_at, hour, swap, write
from tests.methods.advise_support import SWAP_HIGH_VOL, Rules, fill_rules
from tests.retrieval.retrieve_support import settle


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


@pytest.fixture
def rules(g: Grimoire) -> Rules:
    write(g, [swap(hour(h), "negative" if h % 3 else "positive") for h in range(1, 10)])
    return fill_rules(g)


def test_the_rules_that_apply_come_first_in_items_and_in_the_context_block(
        g: Grimoire, rules: Rules) -> None:
    out = g.retrieve(situation=SWAP_HIGH_VOL, k=6, max_tokens=2000, format="context")
    items = out["items"]
    assert [(i["id"], i["rule"]["match"]) for i in items[:3]] == [
        (rules.slippage_warning, "applies"), (rules.swap_warning, "may_apply"),
        (rules.night_heuristic, "may_apply")]
    assert [i["rank"] for i in items] == list(range(1, len(items) + 1))
    assert items[0]["score"] == items[0]["rule"]["weight"] and items[0]["factors"] == {}
    # The evidence after them never repeats a rule, and k counts the rules too.
    rest = items[3:]
    assert rest and len(items) <= 6 and not {i["id"] for i in rest} & {
        rules.slippage_warning, rules.swap_warning, rules.night_heuristic}
    assert all("rule" not in i for i in rest)
    block = out["context"].splitlines()
    assert block[0] == "RULES THAT APPLY NOW (swap · on WETH/USDC · regime high_vol):"
    # The confidence every view prints (entry.get: at the data's time, the newest swap, 9 h
    # after the warning was stored), and weight = confidence × effect size (1/3 here).
    shown = g.entry_get(id=rules.slippage_warning)["effective_confidence"]
    assert round(shown, 2) == 0.88
    assert block[1].startswith(f"1. [warning · applies · confidence {shown:.2f} · weight "
                               f"{shown / 3:.2f}] "
                               "Avoid swap when the regime is high_vol")
    assert block[2].startswith("2. [warning · may apply: needs strategy · ")
    assert block[3].startswith("3. [heuristic · may apply: needs timestamp · ")
    # With no query, the situation in words is the query; the evidence section follows.
    assert block[5] == "QUERY: swap · on WETH/USDC · regime high_vol"
    assert out["situation"] == "swap · on WETH/USDC · regime high_vol"
    evidence = out["context"].split("EVIDENCE (ranked):", 1)[1]
    # (the served warning itself; the candidate "Avoid swap when ...: 7 of 12 were negative"
    # is not a rule and may stand in the evidence: it repeats the situation's words)
    assert "Avoid swap when the regime is high_vol because slippage" not in evidence


def test_the_wording_of_the_question_does_not_decide_what_is_served(
        g: Grimoire, rules: Rules) -> None:
    for query in ("should I swap now while volatility is high?", "lunch menu for Tuesday"):
        out = g.retrieve(query=query, situation=SWAP_HIGH_VOL, k=4)
        assert out["items"][0]["id"] == rules.slippage_warning, query
    text_only = g.retrieve(query="should I swap now while volatility is high?", k=4,
                           format="context")
    assert all("rule" not in i for i in text_only["items"])
    assert text_only["context"].startswith("QUERY: ") and "situation" not in text_only


def test_a_neutral_situation_says_no_rule_applies(g: Grimoire, rules: Rules) -> None:
    out = g.retrieve(situation={"actions": ["lp_add"], "regime": "sideways",
                                "strategy": "eth-dca", "timestamp": hour(12)},
                     format="context")
    assert all("rule" not in i for i in out["items"])
    assert out["context"].splitlines()[1] == "(none)"


def test_k_and_the_budget_go_to_the_rules_first(g: Grimoire, rules: Rules) -> None:
    out = g.retrieve(situation=SWAP_HIGH_VOL, k=1)
    assert [i["id"] for i in out["items"]] == [rules.slippage_warning]
    tight = g.retrieve(situation=SWAP_HIGH_VOL, k=10, max_tokens=5)
    assert [i["id"] for i in tight["items"]] == [rules.slippage_warning]
    assert tight["items"][0]["truncated"] is True and tight["tokens"] <= 5


def test_a_rule_served_can_be_reported_as_followed(g: Grimoire, rules: Rules) -> None:
    out = g.retrieve(situation={**SWAP_HIGH_VOL, "strategy": "eth-dca"}, k=4)
    settle(g)
    answer = g.outcome_report(retrieval_id=out["retrieval_id"], outcome="negative",
                              followed_ids=[rules.swap_warning])
    assert answer["followed_ids"] == [rules.swap_warning]


def test_a_served_rule_is_logged_with_the_condition_it_matched(
        g: Grimoire, rules: Rules) -> None:
    """No retrieval factor put a rule there (its factors are empty): the log keeps what did,
    the condition it matched on the situation, and what it still needs."""
    out = g.retrieve(situation=SWAP_HIGH_VOL, k=6)
    settle(g)
    record = g.context.semantic.get_retrieval(out["retrieval_id"])
    assert record is not None
    served = {i["id"]: i["rule"] for i in out["items"] if "rule" in i}
    logged = {i["id"]: i for i in record.items if i["id"] in served}
    assert set(logged) == set(served)
    for entry_id, item in logged.items():
        assert item["factors"] == {}
        assert item["rule"]["match"] == served[entry_id]["match"]
        assert item["rule"]["condition"] == served[entry_id]["condition"]
        assert item["rule"]["missing"] == served[entry_id]["missing"]
    assert logged[rules.slippage_warning]["rule"]["condition"]
    assert logged[rules.swap_warning]["rule"]["missing"] == ["strategy"]


def test_a_bad_situation_is_refused_naming_the_field(g: Grimoire, rules: Rules) -> None:
    with pytest.raises(ValidationError) as err:
        g.retrieve(query="swap", situation={"regime": "stormy"})
    assert err.value.field == "situation.regime"
    with pytest.raises(ValidationError) as err:
        g.retrieve(query="swap", situation={"pair": "WETH/USDC"})
    assert err.value.field == "situation"
