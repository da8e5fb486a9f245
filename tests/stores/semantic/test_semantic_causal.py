"""Causal edges: upsert semantics, validation, and BFS against a reference walk."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire.errors import ValidationError
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.semantic.types import CausalEdge, EdgeKind
from tests.stores.semantic.test_semantic_support import clock, dump, store

__all__ = ["clock", "store"]  # fixtures


def test_upsert_replaces_values_keeping_created_at_and_what_was_said(
        store: SemanticStore) -> None:
    first = store.upsert_edge(CausalEdge("ep-1", "ep-2", weight=0.4, relationship="gas spike",
                                         lag_ms=60_000), now=100)
    assert (first.created_at, first.updated_at, first.kind) == (100, 100, EdgeKind.EXPLICIT)
    second = store.upsert_edge(CausalEdge("ep-1", "ep-2", weight=0.7, evidence_count=3),
                               now=200)
    assert (second.created_at, second.updated_at) == (100, 200)
    # Left out, the relationship and lag are kept: re-linking never erases them (issue 13).
    assert (second.weight, second.evidence_count, second.relationship, second.lag_ms) == (
        0.7, 3, "gas spike", 60_000)
    assert store.get_edge("ep-1", "ep-2") == second
    other_kind = store.upsert_edge(CausalEdge("ep-1", "ep-2", EdgeKind.DISCOVERED, 0.2), now=300)
    assert len(store.list_edges()) == 2
    assert store.edges_from("ep-1") == [second, other_kind]  # strongest first
    assert store.edges_to("ep-2", kinds=[EdgeKind.DISCOVERED]) == [other_kind]
    assert store.counts().causal_edges == 2


def test_edges_into_many_effects_is_edges_to_each_in_one_query(store: SemanticStore) -> None:
    edges = [CausalEdge("a", "x", EdgeKind.EXPLICIT, 0.9), CausalEdge("b", "x", EdgeKind.KG, 0.5),
             CausalEdge("c", "y", EdgeKind.AUTO, 0.4), CausalEdge("a", "y", EdgeKind.EXPLICIT, 0.3),
             CausalEdge("d", "z", EdgeKind.EXPLICIT, 1.0)]
    for edge in edges:
        store.upsert_edge(edge, now=1)
    kinds = [EdgeKind.EXPLICIT, EdgeKind.KG]
    many = store.edges_into(["x", "y", "x", "nowhere"], kinds=kinds)
    assert many == store.edges_to("x", kinds=kinds) + store.edges_to("y", kinds=kinds)
    assert {(e.cause_id, e.effect_id) for e in many} == {("a", "x"), ("b", "x"), ("a", "y")}
    assert store.edges_into([]) == []
    with pytest.raises(ValidationError, match="node_ids"):
        store.edges_into([3])  # type: ignore[list-item]


def test_irrelevant_outcome_edges_are_kept_but_not_walked(store: SemanticStore) -> None:
    store.upsert_edge(CausalEdge("entry-1", "ep-9", EdgeKind.IRRELEVANT, 0.5))
    store.upsert_edge(CausalEdge("entry-2", "ep-9", EdgeKind.CAUSED_FAILURE, 0.8))
    assert [h.node_id for h in store.causal_bfs("ep-9")] == ["entry-2"]
    assert {h.node_id for h in store.causal_bfs("ep-9", kinds=list(EdgeKind))} == {
        "entry-1", "entry-2"}
    assert store.edges_to("ep-9", kinds=["irrelevant"])[0].cause_id == "entry-1"


@pytest.mark.parametrize(("edge", "field"), [
    (CausalEdge("a", "a"), "effect_id"),
    (CausalEdge("", "b"), "cause_id"),
    (CausalEdge("a", "b", weight=1.5), "weight"),
    (CausalEdge("a", "b", weight=float("nan")), "weight"),
    (CausalEdge("a", "b", kind="maybe"), "kind"),  # type: ignore[arg-type]
    (CausalEdge("a", "b", evidence_count=0), "evidence_count"),
    (CausalEdge("a", "b", lag_ms=-5), "lag_ms"),
])
def test_bad_edges_are_refused_and_nothing_changes(store: SemanticStore, edge: CausalEdge,
                                                   field: str) -> None:
    store.upsert_edge(CausalEdge("x", "y"))
    before = dump(store._db.path)
    with pytest.raises(ValidationError) as info:
        store.upsert_edge(edge)
    assert info.value.field == field
    assert dump(store._db.path) == before


def test_bfs_backward_and_forward_with_depth_and_path_weight(store: SemanticStore) -> None:
    # root -> mid -> leaf, plus a weak shortcut root -> leaf and a cycle leaf -> root.
    with store.transaction():
        store.upsert_edge(CausalEdge("root", "mid", weight=0.5, relationship="caused"))
        store.upsert_edge(CausalEdge("mid", "leaf", weight=0.8))
        store.upsert_edge(CausalEdge("pre", "root", weight=0.9))
        store.upsert_edge(CausalEdge("leaf", "pre", weight=0.1))  # cycle
    back = store.causal_bfs("leaf", direction="backward", max_depth=4)
    assert [(h.node_id, h.depth) for h in back] == [("mid", 1), ("root", 2), ("pre", 3)]
    assert back[1].path_weight == pytest.approx(0.8 * 0.5)
    assert back[1].edge.relationship == "caused"
    assert [h.node_id for h in store.causal_bfs("leaf", max_depth=1)] == ["mid"]
    fwd = store.causal_bfs("root", direction="forward", max_depth=4)
    assert [(h.node_id, h.depth) for h in fwd] == [("mid", 1), ("leaf", 2), ("pre", 3)]
    assert store.causal_bfs("nowhere") == []
    with pytest.raises(ValidationError, match="max_depth"):
        store.causal_bfs("leaf", max_depth=0)
    with pytest.raises(ValidationError, match="direction"):
        store.causal_bfs("leaf", direction="sideways")  # type: ignore[arg-type]


def _reference_bfs(edges: dict[tuple[str, str], float], start: str,
                   depth: int) -> dict[str, tuple[int, float]]:
    """Plain BFS over (cause, effect) -> weight, backward: node -> (depth, best path weight)."""
    preds: dict[str, list[tuple[str, float]]] = {}
    for (cause, effect), w in edges.items():
        preds.setdefault(effect, []).append((cause, w))
    best: dict[str, tuple[int, float]] = {start: (0, 1.0)}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        d, w = best[node]
        if d == depth:
            continue
        for cause, ew in preds.get(node, []):
            if cause not in best:
                best[cause] = (d + 1, w * ew)
                queue.append(cause)
            elif best[cause][0] == d + 1 and w * ew > best[cause][1]:
                best[cause] = (d + 1, w * ew)
    best.pop(start)
    return best


_GRAPHS = st.dictionaries(
    st.tuples(st.sampled_from("abcdefghij"), st.sampled_from("abcdefghij")).filter(
        lambda p: p[0] != p[1]),
    st.sampled_from([0.1, 0.25, 0.5, 0.75, 1.0]),
    max_size=30,
)


_graph_counter = iter(range(10**9))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edges=_GRAPHS, start=st.sampled_from("abcdefghij"), depth=st.integers(1, 5))
def test_bfs_matches_a_reference_walk(store: SemanticStore, edges: dict[tuple[str, str], float],
                                      start: str, depth: int) -> None:
    """Invariant: each reachable node once, at its shortest depth, with the strongest
    path weight among shortest paths."""
    # One store for all examples: each example's graph gets its own node names.
    p = f"g{next(_graph_counter)}-"
    edges = {(p + c, p + e): w for (c, e), w in edges.items()}
    start = p + start
    with store.transaction():
        for (cause, effect), w in edges.items():
            store.upsert_edge(CausalEdge(cause, effect, weight=w))
    hops = store.causal_bfs(start, max_depth=depth)
    expected = _reference_bfs(edges, start, depth)
    got: dict[str, Any] = {h.node_id: (h.depth, h.path_weight) for h in hops}
    assert set(got) == set(expected)
    for node, (d, w) in expected.items():
        assert got[node][0] == d
        assert got[node][1] == pytest.approx(w)
    assert [h.depth for h in hops] == sorted(h.depth for h in hops)
    for h in hops:  # the reported edge really links the hop to the previous level
        assert h.edge.cause_id == h.node_id
        prev = got.get(h.edge.effect_id, (0, 1.0))
        assert prev[0] == h.depth - 1


_INFERRED = (EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)


_runs = iter(range(10**9))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(
    st.integers(0, 11), st.sampled_from(["x", "y"]),
    st.sampled_from([*_INFERRED, EdgeKind.EXPLICIT]),
    st.floats(0.01, 1.0)), min_size=1, max_size=10), min_size=1, max_size=5),
    bound=st.integers(1, 4))
def test_fan_in_keeps_the_strongest_inferred_causes_and_every_explicit_one(
        store: SemanticStore, batches: list[list[tuple[int, str, EdgeKind, float]]],
        bound: int) -> None:
    run = next(_runs)  # the fixture's store is shared by the examples: fresh ids each
    live: dict[tuple[str, str, EdgeKind], float] = {}
    for now, batch in enumerate(batches, start=1):
        touched = set()
        for cause, effect, kind, weight in batch:
            key = (f"c{cause}", f"{effect}{run}", kind)
            live[key] = round(weight, 3)
            store.upsert_edge(CausalEdge(*key, live[key]), now=now)
            touched.add(key[1])
        store.bound_fan_in(touched, bound)
        for effect in touched:
            kept = {(e.cause_id, e.effect_id, e.kind): e.weight
                    for e in store.edges_to(effect, kinds=_INFERRED)}
            offered = {k: w for k, w in live.items() if k[1] == effect and k[2] in _INFERRED}
            assert len(kept) == min(bound, len(offered))
            assert kept.items() <= offered.items()
            dropped = [w for k, w in offered.items() if k not in kept]
            assert not dropped or max(dropped) <= min(kept.values())
            for key in set(offered) - set(kept):
                del live[key]
    for (cause, effect, kind), weight in live.items():  # explicit ones all survive
        stored = store.get_edge(cause, effect, kind)
        assert stored is not None and stored.weight == weight


def test_fan_in_drops_the_weakest_first(store: SemanticStore) -> None:
    for i, weight in enumerate((0.9, 0.2, 0.5, 0.7, 0.1)):
        store.upsert_edge(CausalEdge(f"a{i}", "e", EdgeKind.AUTO, weight), now=1)
    store.upsert_edge(CausalEdge("b", "e", EdgeKind.EXPLICIT, 0.05), now=1)
    assert store.bound_fan_in(["e"], 3) == 2
    kept = store.edges_to("e")
    assert [(e.cause_id, e.weight) for e in kept] == [
        ("a0", 0.9), ("a3", 0.7), ("a2", 0.5), ("b", 0.05)]
    with pytest.raises(ValidationError, match="causal_max_fan_in"):
        store.bound_fan_in(["e"], 0)


def test_delete_edges_removes_only_the_named_pairs_of_that_kind(store: SemanticStore) -> None:
    for cause in ("d0", "d1", "d2"):
        store.upsert_edge(CausalEdge(cause, "de", EdgeKind.AUTO, 0.5), now=1)
    store.upsert_edge(CausalEdge("d0", "de", EdgeKind.EXPLICIT, 1.0), now=1)
    assert store.delete_edges([("d0", "de"), ("d2", "de"), ("nope", "de")], EdgeKind.AUTO) == 2
    assert {(e.cause_id, e.kind) for e in store.edges_to("de")} == {
        ("d1", EdgeKind.AUTO), ("d0", EdgeKind.EXPLICIT)}
    assert store.delete_edges([], EdgeKind.AUTO) == 0
    with pytest.raises(ValidationError):
        store.delete_edges([("only-one",)], EdgeKind.AUTO)  # type: ignore[list-item]
