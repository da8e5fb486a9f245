"""TCMF causal boost and the backward BFS over a callable."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError
from grimoire.retrieval.causal_boost import Ancestor, apply, backward_bfs, with_vectors
from tests.retrieval.retrieval_support import axis, make_candidate, unit

CFG = RetrievalConfig()


def graph(edges: Mapping[str, Sequence[tuple[str, float]]]):  # type: ignore[no-untyped-def]
    """edges[effect] = [(cause, weight)]: the callable shape the store will offer."""
    return lambda node: list(edges.get(node, []))


def test_bfs_reports_each_ancestor_at_its_depth_up_to_max() -> None:
    """e ← d ← c ← b ← a: from e, depth 4 reaches b, not a."""
    edges = graph({"e": [("d", 1.0)], "d": [("c", 1.0)], "c": [("b", 1.0)], "b": [("a", 1.0)]})
    found = backward_bfs(["e"], edges, max_depth=4)
    assert [(a.id, a.depth) for a in found] == [("d", 1), ("c", 2), ("b", 3), ("a", 4)]
    assert [a.id for a in backward_bfs(["e"], edges, max_depth=2)] == ["d", "c"]
    assert backward_bfs(["e"], edges, max_depth=0) == []


def test_bfs_path_weight_is_the_product_and_the_strongest_path_wins() -> None:
    """Two depth-2 paths to r: the stronger product (0.9·0.8) is kept; depth is the shortest."""
    edges = graph({
        "q": [("x", 0.9), ("y", 0.5), ("r", 0.1)],
        "x": [("r", 0.8)], "y": [("r", 1.0), ("z", 0.5)],
    })
    found = {a.id: a for a in backward_bfs(["q"], edges)}
    assert found["r"] == Ancestor("r", 1, 0.1)  # a direct edge: shortest depth wins
    assert found["z"].depth == 2 and found["z"].weight == pytest.approx(0.25)
    edges2 = graph({"q": [("x", 0.9), ("y", 0.5)], "x": [("r", 0.8)], "y": [("r", 1.0)]})
    assert {a.id: a for a in backward_bfs(["q"], edges2)}["r"].weight == pytest.approx(0.72)


def test_bfs_survives_cycles_and_never_lists_a_start_node() -> None:
    edges = graph({"a": [("b", 1.0)], "b": [("c", 1.0)], "c": [("a", 1.0), ("b", 1.0)]})
    found = backward_bfs(["a"], edges, max_depth=10)
    assert [a.id for a in found] == ["b", "c"]


def test_bfs_caps_nodes_and_rejects_bad_weights() -> None:
    fan = graph({"q": [(f"n{i:02d}", 0.5) for i in range(50)]})
    assert len(backward_bfs(["q"], fan, max_nodes=7)) == 7
    with pytest.raises(ValidationError, match="edge_weight"):
        backward_bfs(["q"], graph({"q": [("x", 1.5)]}))


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(
    st.sampled_from("abcdefgh"),
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0.0, 1.0)), max_size=4),
))
def test_bfs_properties_on_random_graphs(edges: dict[str, list[tuple[str, float]]]) -> None:
    """Unique ids, depths within bound and non-decreasing, weights in [0, 1], start excluded."""
    found = backward_bfs(["a"], graph(edges), max_depth=3)
    ids = [f.id for f in found]
    assert len(ids) == len(set(ids)) and "a" not in ids
    assert all(1 <= f.depth <= 3 and 0.0 <= f.weight <= 1.0 for f in found)
    assert [f.depth for f in found] == sorted(f.depth for f in found)


def test_boost_follows_the_tcmf_formula() -> None:
    """boost = sim × (1 − (depth − 1)/max_depth) × weight; score × (1 + 0.6·boost)."""
    item = make_candidate("m", vector=unit(0.8, 0.6))
    ancestor = ("cause", 2, 0.9, axis(0))  # cos(item, ancestor) = 0.8
    scores, factors = apply({"m": 0.5}, [item], [ancestor], CFG)
    boost = 0.8 * (1 - 1 / 4) * 0.9
    assert scores["m"] == pytest.approx(0.5 * (1 + 0.6 * boost))
    assert factors["m"]["causal"]["value"] == pytest.approx(boost)
    assert factors["m"]["causal"]["depth"] == 2.0
    assert factors["m"]["causal"]["similarity"] == pytest.approx(0.8)


def test_boost_takes_the_best_ancestor_and_respects_the_threshold() -> None:
    item = make_candidate("m", vector=unit(0.8, 0.6))
    weak = ("near_but_deep", 4, 1.0, axis(0))  # 0.8 × 0.25 = 0.2
    strong = ("direct", 1, 0.5, axis(1))  # 0.6 × 1 × 0.5 = 0.3
    unlike = ("unlike", 1, 1.0, unit(0.44, 0.0, 0.898))  # cos ≈ 0.35 < 0.45: ignored
    _, factors = apply({"m": 1.0}, [item], [weak, strong, unlike], CFG)
    assert factors["m"]["causal"]["value"] == pytest.approx(0.3)
    scores, factors = apply({"m": 1.0}, [item], [unlike], CFG)
    assert scores == {"m": 1.0} and "causal" not in factors.get("m", {})


def test_ancestor_among_candidates_is_boosted_with_similarity_one() -> None:
    root = make_candidate("root", vector=axis(5))
    scores, factors = apply({"root": 0.4}, [root], [("root", 1, 1.0, axis(5))], CFG)
    assert scores["root"] == pytest.approx(0.4 * 1.6)
    assert factors["root"]["causal"]["similarity"] == 1.0


def test_bloodstain_entries_get_the_premium_and_inputs_are_not_modified() -> None:
    stained = make_candidate("w", is_bloodstain=True)
    plain = make_candidate("p")
    scores_in = {"w": 0.5, "p": 0.5}
    factors_in = {"w": {"rrf": {"value": 1.0, "weight": 0.3, "contribution": 0.3}}}
    scores, factors = apply(scores_in, [stained, plain], [], CFG, factors_in)
    assert scores == pytest.approx({"w": 0.6, "p": 0.5})
    assert factors["w"]["bloodstain"]["multiplier"] == 1.2
    assert factors["w"]["rrf"]["value"] == 1.0
    assert scores_in == {"w": 0.5, "p": 0.5} and "bloodstain" not in factors_in["w"]


def test_lambda_zero_and_out_of_range_depths_do_nothing() -> None:
    item = make_candidate("m")
    off = RetrievalConfig(causal_lambda=0.0)
    assert apply({"m": 1.0}, [item], [("a", 1, 1.0, axis(0))], off)[0] == {"m": 1.0}
    assert apply({"m": 1.0}, [item], [("a", 5, 1.0, axis(0))], CFG)[0] == {"m": 1.0}
    with pytest.raises(ValidationError, match="depth"):
        apply({"m": 1.0}, [item], [("a", 0, 1.0, axis(0))], CFG)


def test_ancestor_vectors_are_normalised_and_checked() -> None:
    item = make_candidate("m", vector=axis(0))
    scores, _ = apply({"m": 1.0}, [item], [("a", 1, 1.0, 3.0 * axis(0))], CFG)
    assert scores["m"] == pytest.approx(1.6)
    with pytest.raises(ValidationError, match="dimension"):
        apply({"m": 1.0}, [item], [("a", 1, 1.0, np.ones(3, dtype=np.float32))], CFG)


def test_with_vectors_drops_ancestors_without_one() -> None:
    vectors = {"a": axis(0)}
    out = with_vectors([Ancestor("a", 1, 0.5), Ancestor("b", 2, 0.5)], vectors.get)
    assert [(a[0], a[1], a[2]) for a in out] == [("a", 1, 0.5)]
    assert math.isclose(float(out[0][3][0]), 1.0)
