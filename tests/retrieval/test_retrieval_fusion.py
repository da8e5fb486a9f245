"""RRF: Σ 1/(k + rank), order-independent, monotone, deterministic ties."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.errors import ValidationError
from grimoire.retrieval.fusion import (
    convex,
    normalise,
    normalise_anchored,
    ranked,
    rrf,
    rrf_from_candidates,
    rrf_from_ranks,
)
from tests.retrieval.retrieval_support import make_candidate

IDS = st.sampled_from([f"d{i}" for i in range(12)])
LISTS = st.dictionaries(
    st.sampled_from(["vector", "bm25", "graph", "extra"]),
    st.lists(IDS, unique=True, max_size=10),
    max_size=4,
)


def test_rrf_sums_reciprocal_ranks() -> None:
    """Rank is the 1-based position; each backend adds 1/(k + rank)."""
    scores = rrf({"vector": ["a", "b"], "bm25": ["b", "c"]}, k=60)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 62)


def test_repeated_id_in_one_list_counts_once_at_best_rank() -> None:
    """A backend that repeats an id must not double its vote."""
    assert rrf({"vector": ["a", "b", "a"]})["a"] == pytest.approx(1 / 61)
    assert rrf({"vector": ["a", "b", "a"]})["b"] == pytest.approx(1 / 62)


def test_bad_k_is_refused() -> None:
    with pytest.raises(ValidationError, match="rrf_k"):
        rrf({"vector": ["a"]}, k=-1)


@settings(max_examples=50, deadline=None)
@given(LISTS, st.randoms())
def test_backend_order_does_not_matter(lists: dict[str, list[str]], rnd: object) -> None:
    """Permuting the backends gives the same scores (up to float summation order)."""
    keys = list(lists)
    rnd.shuffle(keys)  # type: ignore[attr-defined]
    shuffled = {key: lists[key] for key in keys}
    a, b = rrf(lists), rrf(shuffled)
    assert a.keys() == b.keys()
    for item in a:
        assert math.isclose(a[item], b[item], rel_tol=1e-12)


@settings(max_examples=50, deadline=None)
@given(LISTS, IDS, st.sampled_from(["vector", "bm25", "graph", "new"]), st.integers(0, 10))
def test_adding_an_item_to_another_list_never_lowers_its_score(
    lists: dict[str, list[str]], item: str, backend: str, position: int
) -> None:
    """Item gets one more vote: its score strictly grows (never falls)."""
    target = [x for x in lists.get(backend, []) if x != item]
    if item in lists.get(backend, []):
        return  # already in that list: "adding" it is not this property
    before = rrf(lists).get(item, 0.0)
    grown = dict(lists)
    grown[backend] = [*target[:position], item, *target[position:]]
    assert rrf(grown)[item] > before


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(IDS, st.sampled_from([0.1, 0.2, 0.3]), min_size=1))
def test_ranked_breaks_ties_by_id(scores: dict[str, float]) -> None:
    order = ranked(scores)
    assert sorted(order) == sorted(scores)
    for first, second in itertools.pairwise(order):
        assert (scores[first] > scores[second]) or (
            scores[first] == scores[second] and first < second
        )


@settings(max_examples=50, deadline=None)
@given(LISTS)
def test_rrf_from_candidate_ranks_matches_lists(lists: dict[str, list[str]]) -> None:
    """Candidates carrying their per-backend ranks fuse to the same scores."""
    ranks: dict[str, dict[str, int]] = {}
    for backend, ids in lists.items():
        for position, item in enumerate(ids, start=1):
            ranks.setdefault(item, {})[backend] = position
    candidates = [make_candidate(item, ranks=r) for item, r in ranks.items()]
    from_lists, from_ranks = rrf(lists), rrf_from_candidates(candidates)
    assert from_lists.keys() == from_ranks.keys()
    for item in from_lists:
        assert math.isclose(from_lists[item], from_ranks[item], rel_tol=1e-12)
    assert rrf_from_ranks(ranks) == from_ranks  # what the pipeline calls


def test_candidate_without_ranks_fuses_to_zero() -> None:
    assert rrf_from_candidates([make_candidate("ancestor")]) == {"ancestor": 0.0}


def test_normalise_is_min_max_over_ranked_ids() -> None:
    """Best → 1, worst ranked → 0, unranked ids stay 0 and do not move the scale."""
    scores = {"a": 0.04, "b": 0.03, "c": 0.02, "ancestor": 0.0}
    norm = normalise(scores)
    assert norm == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0, "ancestor": 0.0})


def test_normalise_equal_scores_are_all_one() -> None:
    assert normalise({"a": 0.02, "b": 0.02}) == {"a": 1.0, "b": 1.0}
    assert normalise({"a": 0.0}) == {"a": 0.0}
    assert normalise({}) == {}


def test_anchored_normalisation_keeps_a_full_pool_and_small_near_ties() -> None:
    """The pipeline's normalisation: a full pool (a last-place item present) spreads over
    [0, 1] exactly like min-max; in a small pool two items one rank apart stay close
    instead of becoming 1 and 0; unranked ids get 0."""
    k, depth = 60, 20
    full = rrf({"vector": [f"i{n}" for n in range(depth)]}, k)
    anchored = normalise_anchored(full, full, k, depth)
    assert anchored == pytest.approx(normalise(full))
    small = rrf({"vector": ["a", "b"]}, k)
    near = normalise_anchored(small, [*small, "ancestor"], k, depth)
    assert near["a"] == 1.0 and 0.9 < near["b"] < 1.0 and near["ancestor"] == 0.0
    assert normalise(small) == {"a": 1.0, "b": 0.0}  # what plain min-max would do
    last = {"x": 1 / (k + depth), "y": 1 / (k + depth)}
    assert normalise_anchored(last, [*last, "z"], k, depth) == {"x": 1.0, "y": 1.0, "z": 0.0}
    with pytest.raises(ValidationError, match="rrf_k"):
        normalise_anchored(small, small, -1, depth)


def test_convex_keeps_the_score_gap_rrf_throws_away() -> None:
    """BM25 finds ``a`` far ahead (a rare word) while the vector backend barely prefers
    ``b``: equal-weight RRF ranks ``b`` first (two near-top ranks beat one first place),
    the score-aware convex fusion ranks ``a`` first."""
    lists = {"bm25.episode": ["a", "b", "c"], "vector.episode": ["b", "c", "a"]}
    scores = {"bm25.episode": {"a": 9.0, "b": 1.1, "c": 1.0},
              "vector.episode": {"b": 0.52, "c": 0.51, "a": 0.50}}
    assert ranked(rrf(lists, k=60))[0] == "b"
    fused = convex(lists, scores, {"bm25": 0.55, "vector": 0.45})
    assert ranked(fused)[0] == "a"
    assert fused["a"] == pytest.approx(0.55)


def test_convex_weights_per_backend_and_rank_fallback() -> None:
    """A backend at weight 0 adds nothing (its ids stay, at 0); a list without scores (the
    graph backend) is scored by rank; weights say how far each backend is trusted."""
    lists = {"vector.episode": ["a", "b"], "graph.episode": ["c", "a"]}
    scores = {"vector.episode": {"a": 0.9, "b": 0.1}}
    off = convex(lists, scores, {"vector": 1.0, "graph": 0.0})
    assert off == {"a": 1.0, "b": 0.0, "c": 0.0}
    on = convex(lists, scores, {"vector": 0.5, "graph": 0.5})
    assert on["c"] == pytest.approx(0.5)  # graph rank 1 of 2
    assert on["a"] == pytest.approx(0.5 + 0.25)  # vector best, graph rank 2 of 2
    with pytest.raises(ValidationError):
        convex(lists, scores, {"vector": -1.0})


def test_convex_short_list_keeps_near_ties_near() -> None:
    """A list shorter than the depth asked for is normalised from the score's zero: two
    near-equal cosines stay near-equal (min-max would make them 1 and 0)."""
    lists = {"vector.episode": ["a", "b"]}
    scores = {"vector.episode": {"a": 0.50, "b": 0.49}}
    assert convex(lists, scores, {"vector": 1.0}, depth=2)["b"] == 0.0
    assert convex(lists, scores, {"vector": 1.0}, depth=20)["b"] == pytest.approx(0.98)
