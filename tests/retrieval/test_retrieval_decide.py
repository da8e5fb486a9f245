"""mode=auto (Self-RAG heuristic), Mattar–Daw replay utility, contrarian injection."""

from __future__ import annotations

import pytest

from grimoire.errors import ValidationError
from grimoire.records import PAD
from grimoire.retrieval.decide import (
    RetrievalMode,
    contrarian_due,
    contrarian_pick,
    curiosity_from_similarity,
    replay_rank,
    replay_utility,
    should_retrieve,
    valence,
)
from tests.retrieval.retrieval_support import HOUR, NOW, make_candidate


def test_high_curiosity_always_retrieves_fully() -> None:
    d = should_retrieve(curiosity=0.85, coverage=50, arousal=-1.0)
    assert d.mode is RetrievalMode.FULL and d.k == 10 and d.kinds == ("episode", "entry")
    assert "curiosity 0.85" in d.reason


def test_covered_and_familiar_is_semantic_only() -> None:
    d = should_retrieve(curiosity=0.2, coverage=6, arousal=0.9)
    assert d.mode is RetrievalMode.SEMANTIC_ONLY and d.kinds == ("entry",)
    assert "6 known entries" in d.reason
    # exactly 5 known entries is not "more than 5"
    assert should_retrieve(curiosity=0.2, coverage=5).mode is RetrievalMode.LIGHT


def test_high_arousal_retrieves_fully_otherwise_light() -> None:
    assert should_retrieve(curiosity=0.5, coverage=0, arousal=0.75).mode is RetrievalMode.FULL
    light = should_retrieve(curiosity=0.5, coverage=0, arousal=0.2, k=10)
    assert light.mode is RetrievalMode.LIGHT and light.k == 3
    assert should_retrieve(curiosity=0.5, coverage=0, k=2).k == 2


def test_bad_decision_inputs_are_refused() -> None:
    with pytest.raises(ValidationError, match="curiosity"):
        should_retrieve(curiosity=1.5, coverage=0)
    with pytest.raises(ValidationError, match="coverage"):
        should_retrieve(curiosity=0.5, coverage=-1)
    with pytest.raises(ValidationError, match="arousal"):
        should_retrieve(curiosity=0.5, coverage=0, arousal=2.0)


def test_curiosity_is_novelty() -> None:
    assert curiosity_from_similarity(None) == 1.0
    assert curiosity_from_similarity(0.75) == pytest.approx(0.25)
    assert curiosity_from_similarity(-0.2) == 1.0


def test_replay_utility_is_gain_times_need() -> None:
    assert replay_utility(50.0, NOW - 2 * HOUR, NOW, gain_scale=100.0) == pytest.approx(0.25)
    assert replay_utility(500.0, NOW - 10, NOW, gain_scale=100.0) == 1.0  # both capped at 1
    assert replay_utility(-50.0, NOW - 4 * HOUR, NOW, gain_scale=100.0) == pytest.approx(0.125)
    assert replay_utility(None, NOW, NOW, gain_scale=100.0) == 0.0
    assert replay_utility(10.0, NOW, NOW, gain_scale=0.0) == 0.0


def test_replay_rank_orders_episodes_by_utility() -> None:
    big_old = make_candidate("big_old", kind="episode", gain=-100.0, timestamp=NOW - 10 * HOUR)
    big_new = make_candidate("big_new", kind="episode", gain=80.0, timestamp=NOW - HOUR)
    small = make_candidate("small", kind="episode", gain=5.0, timestamp=NOW - HOUR)
    entry = make_candidate("entry")
    ranked = replay_rank([big_old, small, big_new, entry], {"big_old": NOW - 2 * HOUR}, NOW)
    assert [r[0] for r in ranked] == ["big_new", "big_old", "small"]
    assert ranked[0][1] == pytest.approx(0.8) and ranked[1][1] == pytest.approx(0.5)


def test_contrarian_every_hundred_ticks() -> None:
    assert [t for t in range(0, 401) if contrarian_due(t)] == [100, 200, 300, 400]
    assert not contrarian_due(100, every=0)


def test_valence_sources() -> None:
    assert valence(make_candidate(emotion=PAD(0.4, 0.0, 0.0))) == 0.4
    assert valence(make_candidate(category="warning")) == -1.0
    assert valence(make_candidate(kind="episode", gain=-3.0)) == -1.0
    assert valence(make_candidate()) is None


def test_contrarian_pick_opposes_the_mood() -> None:
    """Anxious → confident moments; overconfident → warnings and losses; neutral → none."""
    confident = make_candidate("confident", emotion=PAD(0.8, 0.3, 0.7))
    warning = make_candidate("warning", category="warning")
    loss = make_candidate("loss", kind="episode", gain=-40.0)
    neutral = make_candidate("neutral")
    items = [confident, warning, loss, neutral]
    scores = {"confident": 0.3, "warning": 0.5, "loss": 0.4, "neutral": 0.9}
    assert contrarian_pick(items, scores, PAD(-0.7, 0.8, -0.5)) == ["confident"]
    assert contrarian_pick(items, scores, PAD(0.9, 0.5, 0.9), n=2) == ["warning", "loss"]
    assert contrarian_pick(items, scores, PAD(0.9, 0.5, 0.9), exclude={"warning"}) == ["loss"]
    assert contrarian_pick(items, scores, PAD(0.0, 0.9, 0.0)) == []
