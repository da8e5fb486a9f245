"""Agreement and contradiction heuristics behind the admission gate's factual confidence."""

from __future__ import annotations

import pytest

from grimoire.gate.agreement import TextSignature, claim_relation, same_scope, text_relation
from grimoire.records import Claim


def make_claim(direction: str = "lower", **overrides: object) -> Claim:
    values: dict[str, object] = {"condition": {"hour_window": [2, 4], "regime": "bull"},
                                 "target": "metric:gas_gwei", "direction": direction,
                                 "effect": 8.0, "baseline": 24.0, "support": 12}
    values.update(overrides)
    return Claim(**values)  # type: ignore[arg-type]


def test_claims_with_the_same_scope_agree_or_contradict_by_direction() -> None:
    assert claim_relation(make_claim("lower"), make_claim("lower", effect=9.5)) == "agree"
    assert claim_relation(make_claim("lower"), make_claim("higher")) == "contradict"


def test_condition_key_order_does_not_matter_but_values_do() -> None:
    reordered = make_claim(condition={"regime": "bull", "hour_window": [2, 4]})
    assert same_scope(make_claim(), reordered)
    assert not same_scope(make_claim(), make_claim(condition={"hour_window": [2, 5]}))
    assert not same_scope(make_claim(), make_claim(target="metric:slippage_bps"))
    other_target = make_claim("higher", target="outcome:negative_rate")
    assert claim_relation(make_claim(), other_target) is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Swap when gas is low", "Don't swap when gas is low", "contradict"),
        ("Swap when gas is low", "Do not swap when gas is low", "contradict"),
        ("Avoid bridging at night", "Never bridge at night", "agree"),
        ("Gas is higher at 03:00", "Gas is lower at 03:00", "contradict"),
        ("Gas is higher at 03:00", "Gas isn't lower at 03:00", "agree"),  # two flips cancel
        ("Gas is higher at 03:00", "Gas is lower at 14:00", None),  # another window
        ("Never swap above 80 gwei: 7 of 9 reverted", "Swap above 80 gwei", "contradict"),
        ("Gas rises and falls with volume", "Gas falls with volume", "agree"),
        ("Fees increase on Mondays", "Fees decreased on Mondays", "contradict"),
    ],
)
def test_text_relation(a: str, b: str, expected: str | None) -> None:
    assert text_relation(TextSignature.of(a), TextSignature.of(b)) == expected
    assert text_relation(TextSignature.of(b), TextSignature.of(a)) == expected  # symmetric


def test_signature_reads_numbers_with_thousands_separators() -> None:
    assert TextSignature.of("block 19,000,000 at 2.5 gwei").numbers == {19_000_000.0, 2.5}
