"""Hedge weights: move toward factors behind good outcomes, stay bounded, persist, freeze."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError
from grimoire.retrieval.rerank import FACTORS
from grimoire.retrieval.weights import HedgeWeights

CFG = RetrievalConfig()


def item(**high: float) -> dict[str, float]:
    """Factor values: 0.5 everywhere except the named ones."""
    return {name: high.get(name, 0.5) for name in FACTORS}


def test_starts_from_config() -> None:
    hw = HedgeWeights.from_config(CFG)
    assert hw.weights == pytest.approx(CFG.weights)
    assert (hw.floor, hw.eta, hw.frozen) == (0.02, 0.1, False)
    assert HedgeWeights.from_config(RetrievalConfig(learn_weights=False)).frozen


def test_positive_outcome_raises_the_factor_high_on_used_items() -> None:
    hw = HedgeWeights.from_config(CFG)
    after = hw.update([item(regime=1.0), item(regime=0.9)], +1)
    assert after.weights["regime"] > hw.weights["regime"]
    assert after.weights["rrf"] < hw.weights["rrf"]
    assert sum(after.weights.values()) == pytest.approx(1.0)
    assert after.updates == 1 and hw.updates == 0  # immutable: a new value


def test_negative_outcome_lowers_it() -> None:
    hw = HedgeWeights.from_config(CFG)
    after = hw.update([item(confidence=1.0)], -1)
    assert after.weights["confidence"] < hw.weights["confidence"]


def test_baseline_credits_what_was_higher_than_offered() -> None:
    """Used items had recency 0.6 vs a pool mean of 0.2: recency gains even though
    quality was higher in absolute terms (0.9) but no higher than the pool's (0.9)."""
    hw = HedgeWeights.from_config(CFG)
    used = [item(recency=0.6, quality=0.9)]
    baseline = item(recency=0.2, quality=0.9)
    after = hw.update(used, +1, baseline=baseline)
    assert after.weights["recency"] > hw.weights["recency"]
    assert after.weights["quality"] < hw.weights["quality"]


def test_neutral_empty_and_frozen_do_nothing() -> None:
    hw = HedgeWeights.from_config(CFG)
    assert hw.update([item(rrf=1.0)], 0) is hw
    assert hw.update([], +1) is hw
    frozen = hw.freeze()
    assert frozen.update([item(rrf=1.0)], +1) is frozen
    assert frozen.freeze(False).update([item(rrf=1.0)], +1).weights != hw.weights


def test_a_weight_at_the_floor_can_recover() -> None:
    hw = HedgeWeights({"rrf": 0.3, "confidence": 0.25, "quality": 0.2, "recency": 0.15,
                       "regime": 0.1}, eta=2.0)
    for _ in range(30):
        hw = hw.update([item(regime=0.0)], +1)
    assert hw.weights["regime"] == pytest.approx(0.02)
    for _ in range(30):
        hw = hw.update([item(regime=1.0)], +1)
    assert hw.weights["regime"] > 0.3


@settings(max_examples=60, deadline=None)
@given(st.lists(
    st.tuples(
        st.lists(st.fixed_dictionaries({n: st.floats(0, 1) for n in FACTORS}), min_size=1,
                 max_size=3),
        st.sampled_from([-1, 0, 1]),
    ),
    max_size=25,
), st.floats(0.01, 3.0))
def test_bounds_hold_under_any_feedback(
    reports: list[tuple[list[dict[str, float]], int]], eta: float
) -> None:
    hw = HedgeWeights.from_config(CFG)
    for used, outcome in reports:
        hw = hw.update(used, outcome, eta=eta)
        assert sum(hw.weights.values()) == pytest.approx(1.0)
        assert min(hw.weights.values()) >= 0.02 - 1e-12


def test_round_trip_and_bad_state() -> None:
    hw = HedgeWeights.from_config(CFG).update([item(rrf=1.0)], +1)
    again = HedgeWeights.from_dict(hw.to_dict())
    assert again == hw
    with pytest.raises(ValidationError) as info:
        HedgeWeights.from_dict({**hw.to_dict(), "weights": {"rrf": "high"}})
    assert info.value.field == "weights.rrf"
    with pytest.raises(ValidationError) as info:
        HedgeWeights.from_dict({**hw.to_dict(), "frozen": "yes"})
    assert info.value.field == "frozen"
    with pytest.raises(ValidationError) as info:
        HedgeWeights(weights=dict.fromkeys(FACTORS, 0.2), floor=0.3)
    assert info.value.field == "floor"
    with pytest.raises(ValidationError, match="outcome"):
        hw.update([item()], 2)
