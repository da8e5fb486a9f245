"""The graph store's in-memory adjacency against LMDB, its source of truth (real LMDB in tmp).

The stated invariant: a walk answered from memory returns exactly what the
same walk over the LMDB indexes returns (``GraphStore._walk(index=False)``,
kept as the reference), after any sequence of asserts, rolled-back batches,
invalidations and reopenings, with or without a memory bound; and the
adjacency kept up to date after each commit equals one rebuilt from LMDB.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from structlog.testing import capture_logs

from grimoire.clock import FrozenClock
from grimoire.errors import StoreError, ValidationError
from grimoire.records.graph import EntityKind, EntityRef, Fact, Neighbor, ObjectValue
from grimoire.stores.graph import codec
from grimoire.stores.graph.adjacency import Adjacency
from grimoire.stores.graph.store import GraphStore

T0 = 1_767_225_600_000
DIRECTIONS = ("out", "in", "both")
ENTITIES = [EntityRef(EntityKind.POOL, "p"), EntityRef(EntityKind.ORACLE, "o"),
            EntityRef(EntityKind.TOKEN, "t"), EntityRef(EntityKind.VAULT, "v"),
            EntityRef(EntityKind.CONTRACT, "c")]
PREDICATES = ["oracle_dependency", "token_flow"]
OBJECTS = [ObjectValue.entity(e) for e in ENTITIES] + [ObjectValue.number(1.0)]


def open_store(path: Path, clock: FrozenClock | None = None, **kwargs: Any) -> GraphStore:
    return GraphStore.open(path / "graph", clock=clock or FrozenClock(T0), **kwargs)


def index_of(store: GraphStore) -> Adjacency:
    index = store._index
    assert index is not None
    return index


def rebuilt(store: GraphStore) -> Adjacency:
    """The adjacency read afresh from LMDB, at the floor the live one has reached."""
    index = index_of(store)
    with store._env.txn() as txn:
        return Adjacency.build(txn, store._env.db, index.max_edges, floor=index.floor)


def as_neighbors(found: list[Any]) -> list[Neighbor]:
    return [Neighbor(codec.decode_entity_key(k), h, p, w) for k, h, p, w in found]


def assert_matches_lmdb(store: GraphStore, blocks: list[int]) -> int:
    """Every walk from every entity equals the LMDB walk; returns how many memory answered."""
    index = index_of(store)
    answered = 0
    for block in blocks:
        for subject in ENTITIES:
            start = [codec.entity_key(subject)]
            for direction in DIRECTIONS:
                reference = store._walk(start, 3, block, direction, index=False)
                from_memory = index.walk(start, 3, block, direction)
                if from_memory is None:  # only below the floor or when switched off
                    assert index.disabled or block < index.floor
                else:
                    answered += 1
                    assert from_memory == reference
            assert store.k_hop_neighbors(subject, 3, block, "both") == as_neighbors(reference)
    for block in {blocks[len(blocks) // 2], blocks[-1]}:  # walks that stop at a goal
        for source in ENTITIES:
            start = [codec.entity_key(source)]
            for target in ENTITIES:
                goal = codec.entity_key(target)
                assert store._walk(start, 2, block, "both", goal) == (
                    store._walk(start, 2, block, "both", goal, index=False))
    return answered


def assert_equals_rebuild(store: GraphStore) -> None:
    index = index_of(store)
    if index.disabled:  # it stays off until reopened, holding nothing
        assert index.nodes() == ({}, {})
        return
    fresh = rebuilt(store)
    assert index.nodes() == fresh.nodes()
    assert (index.open_edges, index.closed_edges) == (fresh.open_edges, fresh.closed_edges)
    assert len(index) <= index.max_edges or index.disabled


class AdjacencyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="grimoire-adj-"))
        self.clock = FrozenClock(T0)
        self.cap = 0
        self.store: GraphStore | None = None
        self.ids: list[str] = []

    @initialize(cap=st.sampled_from([3, 8, 1_000]))
    def open(self, cap: int) -> None:
        """Caps of 3 and 8 make the adjacency prune closed edges, 3 sometimes switch off."""
        self.cap = cap
        self.store = open_store(self.dir, self.clock, map_size=1 << 20,
                                adjacency_max_edges=cap)

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def graph(self) -> GraphStore:
        assert self.store is not None
        return self.store

    @rule(subject=st.sampled_from(ENTITIES), predicate=st.sampled_from(PREDICATES),
          obj=st.sampled_from(OBJECTS), valid_from=st.integers(0, 30))
    def assert_fact(self, subject: EntityRef, predicate: str, obj: ObjectValue,
                    valid_from: int) -> None:
        try:
            result = self.graph.assert_fact(subject, predicate, obj, valid_from)
        except ValidationError:
            return
        self.ids.append(result.id)

    @rule(batch=st.lists(st.tuples(st.sampled_from(ENTITIES), st.sampled_from(PREDICATES),
                                   st.sampled_from(OBJECTS), st.integers(0, 30)),
                         min_size=1, max_size=5))
    def assert_many(self, batch: list[tuple[EntityRef, str, ObjectValue, int]]) -> None:
        """A batch whose later fact is refused rolls back the edges its earlier facts made."""
        try:
            results = self.graph.assert_many([Fact(*item) for item in batch])
        except ValidationError:
            return
        self.ids.extend(r.id for r in results)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), at_block=st.integers(0, 31))
    def invalidate(self, data: st.DataObject, at_block: int) -> None:
        try:
            self.graph.invalidate(data.draw(st.sampled_from(self.ids)), at_block)
        except ValidationError:
            return

    @rule(ms=st.integers(0, 2))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def reopen(self) -> None:
        """A reopened store builds its adjacency from LMDB, picking its own floor."""
        self.graph.close()
        self.store = open_store(self.dir, self.clock, map_size=1 << 20,
                                adjacency_max_edges=self.cap)

    @invariant()
    def memory_walks_equal_lmdb_walks(self) -> None:
        if self.store is None:
            return
        index = self.graph._index
        blocks = sorted({0, 31, index.floor if index else 0}
                        | {b for t in self.graph.range_scan(0, 10**6)
                           for e in (t.valid_from, t.valid_to) if e is not None
                           for b in (e - 1, e) if b >= 0})
        assert_matches_lmdb(self.graph, blocks)

    @invariant()
    def adjacency_equals_a_rebuild_from_lmdb(self) -> None:
        if self.store is not None:
            assert_equals_rebuild(self.graph)


AdjacencyMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAdjacencyMachine = AdjacencyMachine.TestCase


# -- unit tests ------------------------------------------------------------------------------------

P, ORACLE, T, V, C = ENTITIES


def chain(graph: GraphStore) -> None:
    graph.assert_many([
        Fact(P, "oracle_dependency", ObjectValue.entity(ORACLE), 10),
        Fact(ORACLE, "token_flow", ObjectValue.entity(T), 10),
        Fact(T, "token_flow", ObjectValue.entity(V), 20),
    ])


def test_walks_at_a_block_are_answered_from_memory(tmp_path: Path) -> None:
    """With the graph settled, the walk reads memory and sees exactly LMDB's answer."""
    with open_store(tmp_path) as graph:
        chain(graph)
        assert [(n.entity, n.hops) for n in graph.k_hop_neighbors(P, 3, 25)] == [
            (ORACLE, 1), (T, 2), (V, 3)]
        assert index_of(graph).walk([codec.entity_key(P)], 3, 25, "out") is not None
        assert assert_matches_lmdb(graph, [0, 9, 10, 15, 20, 25]) > 0
        assert graph.topology_distance(P, V, 25) == 3
        assert graph.topology_distance(P, V, 15) is None


def test_a_rolled_back_batch_leaves_the_adjacency_unchanged(tmp_path: Path) -> None:
    """Edges queued by a batch that then fails inside its transaction are never applied."""
    with open_store(tmp_path) as graph:
        chain(graph)
        before = index_of(graph).nodes()
        with pytest.raises(ValidationError):
            graph.assert_many([Fact(C, "token_flow", ObjectValue.entity(P), 30),
                               Fact(P, "oracle_dependency", ObjectValue.entity(T), 30),
                               Fact(T, "token_flow", ObjectValue.entity(P), 5)])  # before 20
        assert index_of(graph).nodes() == before
        assert graph.k_hop_neighbors(P, 1, 40, "in") == []
        assert_equals_rebuild(graph)


def test_a_write_retried_after_a_full_map_applies_its_edges_once(tmp_path: Path) -> None:
    facts = [Fact(EntityRef(EntityKind.TOKEN, f"t{i}"), "token_flow", ObjectValue.entity(P), i)
             for i in range(3000)]
    with open_store(tmp_path, map_size=1 << 16) as graph:
        graph.assert_many(facts)
        assert graph.stats()["map_size"] > 1 << 16
        assert index_of(graph).open_edges == 3000
        assert_equals_rebuild(graph)
        assert len(graph.k_hop_neighbors(P, 1, 10**6, "in")) == 3000


def test_closed_edges_past_the_bound_are_dropped_and_walked_in_lmdb(tmp_path: Path) -> None:
    """Past max_edges the oldest-ending closed edges go; walks before the floor read LMDB."""
    with open_store(tmp_path, adjacency_max_edges=10) as graph:
        for block in range(1, 41):  # one open edge, 39 closed ones, each ending a block later
            graph.assert_fact(P, "token_flow", ObjectValue.entity(ENTITIES[1 + block % 4]),
                              block)
        index = index_of(graph)
        assert 0 < index.floor < 40
        assert len(index) <= 10 and index.open_edges == 1
        assert index.walk([codec.entity_key(P)], 1, index.floor - 1, "out") is None
        assert index.walk([codec.entity_key(P)], 1, index.floor, "out") is not None
        assert_equals_rebuild(graph)
        assert assert_matches_lmdb(graph, list(range(42))) > 0
    with open_store(tmp_path, adjacency_max_edges=10) as graph:  # reopened: built with a floor
        assert 0 < index_of(graph).floor < 40 and len(index_of(graph)) <= 10
        assert assert_matches_lmdb(graph, list(range(42))) > 0


def test_too_many_open_edges_switch_the_adjacency_off(tmp_path: Path) -> None:
    with open_store(tmp_path, adjacency_max_edges=2) as graph, capture_logs() as logs:
        chain(graph)
        assert index_of(graph).disabled
        assert [n.entity for n in graph.k_hop_neighbors(P, 3, 25)] == [ORACLE, T, V]
    assert any(e["event"] == "graph.adjacency.disabled" for e in logs)
    with capture_logs() as logs, open_store(tmp_path, adjacency_max_edges=2) as graph:
        assert index_of(graph).disabled
        assert graph.topology_distance(V, P, 25, direction="in") == 3
    assert any(e["event"] == "graph.adjacency.disabled" for e in logs)


def test_an_adjacency_that_disagrees_with_lmdb_switches_off(tmp_path: Path) -> None:
    """A commit that cannot be mirrored (here: an edge lost from memory) is logged, and the
    walks go on from LMDB; the write itself stands."""
    with open_store(tmp_path) as graph:
        result = graph.assert_fact(P, "token_flow", ObjectValue.entity(T), 1)
        index = index_of(graph)
        index._out.clear()  # damage the mirror, not the store
        with capture_logs() as logs:
            graph.invalidate(result.id, 5)
        assert index.disabled
        assert [e["event"] for e in logs if e["log_level"] != "info"] == [
            "graph.adjacency.failed", "graph.adjacency.disabled"]
        assert graph.get(result.id).valid_to == 5
        assert [n.entity for n in graph.k_hop_neighbors(P, 1, 3)] == [T]


def test_zero_max_edges_walks_lmdb_only_and_bad_bounds_are_refused(tmp_path: Path) -> None:
    with open_store(tmp_path, adjacency_max_edges=0) as graph:
        chain(graph)
        assert graph._index is None
        assert [n.entity for n in graph.k_hop_neighbors(P, 3, 25)] == [ORACLE, T, V]
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValidationError) as info:
            open_store(tmp_path, adjacency_max_edges=bad)
        assert info.value.field == "adjacency_max_edges"


def test_a_closed_store_refuses_walks(tmp_path: Path) -> None:
    graph = open_store(tmp_path)
    chain(graph)
    graph.close()
    with pytest.raises(StoreError, match="closed"):
        graph.k_hop_neighbors(P, 2, 25)


def test_readers_never_see_half_of_a_commit(tmp_path: Path) -> None:
    """Each batch adds P -> Xi and Xi -> Yi: a walk that sees Xi at hop 1 sees Yi at hop 2."""
    errors: list[BaseException] = []
    seen: list[tuple[int, int]] = []

    def read(graph: GraphStore) -> None:
        try:  # a fixed number of reads rather than a spin: spinning starves the writer of the GIL
            for _ in range(300):
                hops = [n.hops for n in graph.k_hop_neighbors(P, 2, 10**6)]
                seen.append((hops.count(1), hops.count(2)))
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    with open_store(tmp_path) as graph:
        readers = [threading.Thread(target=read, args=(graph,)) for _ in range(2)]
        for thread in readers:
            thread.start()
        try:
            for i in range(150):
                x, y = EntityRef(EntityKind.TOKEN, f"x{i}"), EntityRef(EntityKind.VAULT, f"y{i}")
                graph.assert_many([Fact(P, f"custom:r{i}", ObjectValue.entity(x), 1),
                                   Fact(x, "token_flow", ObjectValue.entity(y), 1)])
        finally:
            for thread in readers:
                thread.join(timeout=60)
        assert not errors
        assert all(first == second for first, second in seen)
        assert graph.k_hop_neighbors(P, 2, 10**6)[-1].hops == 2
