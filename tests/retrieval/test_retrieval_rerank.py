"""Rerank: the SPEC formula, its factor breakdown, recency scales, regime and mood."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError
from grimoire.records import PAD
from grimoire.retrieval.rerank import (
    FACTORS,
    effective_weights,
    factor_values,
    pad_affinity,
    recency,
    regime_match,
    score,
    score_all,
)
from tests.retrieval.retrieval_support import DAY, HOUR, NOW, make_candidate

CFG = RetrievalConfig()
W = CFG.weights


def test_score_is_the_spec_weighted_sum() -> None:
    """0.30·rrf + 0.25·confidence + 0.20·quality + 0.15·recency + 0.10·regime."""
    c = make_candidate(confidence=0.8, quality=0.6, timestamp=NOW - 14 * DAY, regime="bull")
    total, factors = score(c, 0.5, NOW, "bull", W, cfg=CFG)
    expected = 0.30 * 0.5 + 0.25 * 0.8 + 0.20 * 0.6 + 0.15 * 0.5 + 0.10 * 1.0
    assert total == pytest.approx(expected)
    assert set(factors) == set(FACTORS)
    for name, part in factors.items():
        assert part["contribution"] == pytest.approx(part["value"] * part["weight"]), name
    assert sum(p["contribution"] for p in factors.values()) == pytest.approx(total)
    assert factors["recency"]["value"] == pytest.approx(0.5)  # one entry half-life old
    assert factor_values(factors) == {n: factors[n]["value"] for n in FACTORS}


def test_recency_scales() -> None:
    """Episodes halve every 48 h; entries on their own half-life; timeless and future = 1."""
    assert recency(NOW - 48 * HOUR, 48 * HOUR, NOW) == pytest.approx(0.5)
    assert recency(NOW - 96 * HOUR, 48 * HOUR, NOW) == pytest.approx(0.25)
    assert recency(NOW - 7 * DAY, 28 * DAY, NOW) == pytest.approx(2 ** -0.25)
    assert recency(NOW - 400 * DAY, None, NOW) == 1.0
    assert recency(NOW + HOUR, 48 * HOUR, NOW) == 1.0


def test_regime_match_values() -> None:
    assert regime_match("bull", "bull") == 1.0
    assert regime_match("bull", "bear") == 0.0
    assert regime_match(None, "bear") == 0.5
    assert regime_match("bull", None) == 0.5


def test_mood_adds_emotion_and_renormalises() -> None:
    """With a mood: emotion at 0.15, then every weight / 1.15; still sums to 1."""
    applied = effective_weights(W, PAD(0.1, 0.2, 0.3), CFG)
    assert sum(applied.values()) == pytest.approx(1.0)
    assert applied["emotion"] == pytest.approx(0.15 / 1.15)
    assert applied["rrf"] == pytest.approx(0.30 / 1.15)
    assert "emotion" not in effective_weights(W, None, CFG)


def test_pad_affinity_maps_cosine_to_unit_interval() -> None:
    mood = PAD(-0.6, 0.8, -0.4)
    assert pad_affinity(PAD(-0.6, 0.8, -0.4), mood) == pytest.approx(1.0)
    assert pad_affinity(PAD(0.6, -0.8, 0.4), mood) == pytest.approx(0.0)
    assert pad_affinity(None, mood) == 0.5
    assert pad_affinity(PAD(0.0, 0.0, 0.0), mood) == 0.5


def test_mood_congruent_item_scores_higher() -> None:
    """Same item twice, one tagged with the current mood, one with its opposite."""
    mood = PAD(-0.7, 0.6, -0.5)
    congruent = make_candidate("a", emotion=PAD(-0.7, 0.6, -0.5))
    opposite = make_candidate("b", emotion=PAD(0.7, -0.6, 0.5))
    a, fa = score(congruent, 0.5, NOW, None, W, mood=mood, cfg=CFG)
    b, _ = score(opposite, 0.5, NOW, None, W, mood=mood, cfg=CFG)
    assert a > b
    assert fa["emotion"]["value"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("weights", "field"),
    [
        ({**W, "rrf": -0.1}, "weights.rrf"),
        ({k: v for k, v in W.items() if k != "quality"}, "weights.quality"),
        ({**W, "recency": float("nan")}, "weights.recency"),
        (dict.fromkeys(W, 0.0), "weights"),
    ],
)
def test_bad_weights_are_refused(weights: dict[str, float], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        score(make_candidate(), 0.5, NOW, None, weights, cfg=CFG)
    assert info.value.field == field


def test_rrf_norm_out_of_range_is_refused() -> None:
    with pytest.raises(ValidationError, match="rrf_norm"):
        score(make_candidate(), 1.5, NOW, None, W, cfg=CFG)


@settings(max_examples=50, deadline=None)
@given(
    st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.integers(0, 100 * DAY),
    st.sampled_from([None, "bull", "bear"]),
)
def test_score_stays_in_unit_interval(
    rrf: float, conf: float, quality: float, age: int, regime: str | None
) -> None:
    c = make_candidate(confidence=conf, quality=quality, timestamp=NOW - age, regime=regime)
    total, _ = score(c, rrf, NOW, "bull", W, mood=PAD(0.3, 0.3, 0.3), cfg=CFG)
    assert 0.0 <= total <= 1.0 + 1e-12


def test_score_all_matches_score_and_keeps_first_duplicate() -> None:
    items = [make_candidate("a", confidence=0.9), make_candidate("b"),
             make_candidate("a", confidence=0.1)]
    scores, breakdowns = score_all(items, {"a": 1.0, "b": 0.2}, NOW, None, W, cfg=CFG)
    assert scores["a"] == pytest.approx(score(items[0], 1.0, NOW, None, W, cfg=CFG)[0])
    assert scores["b"] == pytest.approx(score(items[1], 0.2, NOW, None, W, cfg=CFG)[0])
    assert breakdowns["a"]["confidence"]["value"] == 0.9
    assert score_all([make_candidate("z")], {}, NOW, None, W)[1]["z"]["rrf"]["value"] == 0.0
