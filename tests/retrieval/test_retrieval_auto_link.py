"""Inferred predecessors: 0.5·temporal + 0.5·semantic ≥ 0.3 inside the window."""

from __future__ import annotations

import math

import pytest

from grimoire.errors import ValidationError
from grimoire.retrieval.auto_link import Event, predecessors, predecessors_of
from tests.retrieval.retrieval_support import HOUR, NOW, axis, unit

WINDOW = HOUR


def test_weight_is_half_temporal_half_semantic() -> None:
    new = Event("new", NOW, axis(0))
    earlier = Event("old", NOW - WINDOW // 4, unit(0.8, 0.6))
    ((cause, weight),) = predecessors(new, [earlier], WINDOW)
    assert cause == "old"
    assert weight == round(0.5 * math.exp(-2.4 * 0.25) + 0.5 * 0.8, 3)


def test_window_threshold_and_order() -> None:
    new = Event("new", NOW, axis(0))
    events = [
        Event("close_related", NOW - 60_000, unit(0.9, 0.436)),
        Event("far_related", NOW - WINDOW + 1, unit(0.9, 0.436)),
        Event("outside", NOW - WINDOW - 1, axis(0)),
        Event("later", NOW + 1, axis(0)),
        Event("same_time", NOW, axis(0)),
        Event("weak", NOW - WINDOW + 1, unit(0.5, 0.866)),  # 0.5·0.09 + 0.5·0.5 < 0.3
    ]
    out = predecessors(new, events, WINDOW)
    assert [c for c, _ in out] == ["close_related", "far_related"]
    assert out[0][1] > out[1][1]


def test_semantic_gate_and_the_seed_ungated_form() -> None:
    """Unrelated but recent: linked only when the gate is off (seed 000's behaviour)."""
    new = Event("new", NOW, axis(0))
    unrelated = Event("noise", NOW - 60_000, axis(7))
    assert predecessors(new, [unrelated], WINDOW) == []
    ((cause, weight),) = predecessors(new, [unrelated], WINDOW, min_similarity=0.0)
    assert cause == "noise" and weight == pytest.approx(0.5 * math.exp(-2.4 / 60), abs=1e-3)
    assert predecessors(new, [Event("novec", NOW - 60_000)], WINDOW, min_similarity=0.0)


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValidationError, match="window_ms"):
        predecessors(Event("n", NOW), [], 0)


def test_the_array_form_proposes_what_the_event_form_does() -> None:
    """The write path's ``predecessors_of`` (one matrix product over the store's rows) is
    ``predecessors`` exactly: same causes, weights, rounding and order."""
    import numpy as np



    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(0, 40))
        vectors = rng.normal(size=(n + 1, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors[1:n // 2 + 1] = vectors[0] + 0.3 * vectors[1:n // 2 + 1]  # some similar ones
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        times = NOW - rng.integers(-HOUR // 4, 2 * HOUR, size=n)
        ids = [f"e{trial}-{i}" for i in range(n)]
        events = [Event(ids[i], int(times[i]), vectors[i + 1]) for i in range(n)]
        expected = predecessors(Event("new", NOW, vectors[0]), events, HOUR, 0.3, 0.2)
        assert predecessors_of(NOW, vectors[0], ids, times.astype(np.int64), vectors[1:],
                               HOUR, 0.3, 0.2) == expected
        if expected:
            first = expected[0][0]
            assert first not in dict(predecessors_of(
                NOW, vectors[0], ids, times.astype(np.int64), vectors[1:], HOUR, 0.3, 0.2,
                skip=frozenset({first})))


def test_an_episode_far_in_the_future_raises_no_overflow_warning() -> None:
    import warnings

    import numpy as np

    vector = np.array([1.0, 0.0], dtype=np.float32)
    times = np.array([0, 10**15], dtype=np.int64)  # the second is ages after the event
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would print on the host's stderr
        found = predecessors_of(1_000, vector, ["a", "b"], times,
                                np.stack([vector, vector]), window_ms=60_000)
    assert [i for i, _ in found] == ["a"]
