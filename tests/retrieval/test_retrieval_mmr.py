"""MMR: relevance balanced with diversity; ids and near-duplicates appear once."""

from __future__ import annotations

import pytest

from grimoire.errors import ValidationError
from grimoire.retrieval.mmr import select
from tests.retrieval.retrieval_support import axis, make_candidate, unit


def test_lambda_one_is_a_plain_sort_by_score() -> None:
    items = [make_candidate(i, vector=axis(n)) for n, i in enumerate("abcd")]
    scores = {"a": 0.2, "b": 0.9, "c": 0.5, "d": 0.5}
    assert select(items, scores, lambda_=1.0) == ["b", "c", "d", "a"]


def test_near_duplicates_are_dropped() -> None:
    """cos ≥ 0.98 with something already chosen: left out entirely."""
    original = make_candidate("orig", vector=axis(0))
    copy = make_candidate("copy", vector=unit(1.0, 0.05))  # cos ≈ 0.9988
    other = make_candidate("other", vector=axis(3))
    order = select([original, copy, other], {"orig": 0.9, "copy": 0.89, "other": 0.3})
    assert order == ["orig", "other"]


def test_similar_but_not_duplicate_is_pushed_below_a_distinct_item() -> None:
    """A 0.9-similar runner-up loses its place to a distinct, slightly weaker item."""
    top = make_candidate("top", vector=axis(0))
    echo = make_candidate("echo", vector=unit(0.9, 0.436))  # cos ≈ 0.9
    fresh = make_candidate("fresh", vector=axis(5))
    scores = {"top": 1.0, "echo": 0.95, "fresh": 0.8}
    assert select([top, echo, fresh], scores, lambda_=1.0) == ["top", "echo", "fresh"]
    assert select([top, echo, fresh], scores, lambda_=0.7) == ["top", "fresh", "echo"]


def test_ids_are_deduplicated_and_unscored_ignored() -> None:
    a1 = make_candidate("a", vector=axis(0))
    a2 = make_candidate("a", vector=axis(1))
    b = make_candidate("b", vector=axis(2))
    ghost = make_candidate("ghost", vector=axis(3))
    assert select([a1, a2, b, ghost], {"a": 0.5, "b": 0.4}) == ["a", "b"]


def test_top_limits_and_backfills_after_drops() -> None:
    """Dropped duplicates free their slot for the next distinct item."""
    dupes = [make_candidate(f"d{i}", vector=unit(1.0, 0.01 * i)) for i in range(5)]
    others = [make_candidate(f"o{i}", vector=axis(i + 2)) for i in range(5)]
    scores = {c.id: 1.0 - 0.01 * n for n, c in enumerate(dupes + others)}
    order = select(dupes + others, scores, top=4)
    assert order[0] == "d0" and len(order) == 4
    assert not any(x.startswith("d") for x in order[1:])
    assert select(dupes, scores, top=0) == [] and select([], {}) == []


def test_equal_values_break_ties_by_id() -> None:
    items = [make_candidate(i, vector=axis(n)) for n, i in enumerate(["z", "m", "a"])]
    assert select(items, dict.fromkeys("zma", 0.5)) == ["a", "m", "z"]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValidationError, match="mmr_lambda"):
        select([], {}, lambda_=1.5)
    with pytest.raises(ValidationError, match="top"):
        select([], {}, top=-1)
