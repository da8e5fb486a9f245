"""Unit tests of the bi-temporal graph store and its records, on real LMDB in tmp_path."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import lmdb
import pytest
from structlog.testing import capture_logs

from grimoire.clock import FrozenClock
from grimoire.errors import NotFoundError, SchemaVersionError, StoreError, ValidationError
from grimoire.records.graph import (
    AssertResult,
    EntityKind,
    EntityRef,
    Fact,
    ObjectKind,
    ObjectValue,
    Predicate,
    TemporalTriple,
    parse_object,
    parse_predicate,
)
from grimoire.stores.graph.store import GraphStore, topology_curiosity_modifier

T0 = 1_767_225_600_000

AAVE = EntityRef(EntityKind.CONTRACT, "aave-v3")
LINK = EntityRef(EntityKind.ORACLE, "chainlink-eth-usd")
PYTH = EntityRef(EntityKind.ORACLE, "pyth-eth-usd")
UNI = EntityRef(EntityKind.POOL, "univ3-eth-usdc")
LP = EntityRef(EntityKind.ADDRESS_CLUSTER, "golem-lp")
YEARN = EntityRef(EntityKind.VAULT, "yearn-eth")


def open_store(path: Path, clock: FrozenClock | None = None, **kwargs: Any) -> GraphStore:
    return GraphStore.open(path / "graph", clock=clock or FrozenClock(T0), **kwargs)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: FrozenClock) -> Any:
    with open_store(tmp_path, clock) as graph:
        yield graph


def make_fact(**overrides: Any) -> Fact:
    fields: dict[str, Any] = {
        "subject": AAVE, "predicate": Predicate.ORACLE_DEPENDENCY,
        "object": ObjectValue.entity(LINK), "valid_from": 100,
    }
    fields.update(overrides)
    return Fact(**fields)


def snapshot(graph: GraphStore) -> dict[str, Any]:
    """Everything a caller can see, to check that a rejected call wrote nothing."""
    subjects = [AAVE, LINK, PYTH, UNI, LP, YEARN]
    return {
        "stats": {k: v for k, v in graph.stats().items() if k != "last_tx"},
        "known": [graph.query_as_known_at(s, 2**62) for s in subjects],
        "scan": graph.range_scan(0, 10**9),
    }


# -- opening, schema, closing ------------------------------------------------------------------


def test_new_store_records_schema_version_and_reopens(tmp_path: Path) -> None:
    """A new store writes schema version 1 in meta and opens again with its data."""
    with open_store(tmp_path) as graph:
        graph.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    env = lmdb.open(str(tmp_path / "graph"), max_dbs=16)
    with env.begin() as txn:
        assert txn.get(b"schema_version", db=env.open_db(b"meta", txn=txn)) == b"1"
    env.close()
    with open_store(tmp_path) as graph:
        assert graph.count() == 1
        assert graph.stats()["schema_version"] == 1


def test_newer_schema_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """A store written by a newer Grimoire is refused, untouched, with advice to upgrade."""
    open_store(tmp_path).close()
    env = lmdb.open(str(tmp_path / "graph"), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(b"schema_version", b"2", db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(SchemaVersionError, match="upgrade grimoire-memory"):
        open_store(tmp_path)


def test_open_on_a_file_is_a_store_error(tmp_path: Path) -> None:
    """Backend failures surface as StoreError, with the lmdb error chained."""
    (tmp_path / "graph").write_text("not a directory")
    with pytest.raises(StoreError) as info:
        open_store(tmp_path)
    assert info.value.__cause__ is not None


def test_closed_store_refuses_calls_and_close_is_idempotent(tmp_path: Path) -> None:
    graph = open_store(tmp_path)
    graph.close()
    graph.close()
    with pytest.raises(StoreError, match="closed"):
        graph.query_at(AAVE, 1)


def test_map_doubles_when_full_and_keeps_every_write(tmp_path: Path) -> None:
    """A batch that overflows the map grows it (logged) and is retried, not lost."""
    facts = [make_fact(subject=EntityRef(EntityKind.TOKEN, f"t{i}"),
                       object=ObjectValue.string("x" * 200), valid_from=i) for i in range(3000)]
    with capture_logs() as logs, open_store(tmp_path, map_size=1 << 16) as graph:
        results = graph.assert_many(facts)
        assert graph.count() == 3000
    grows = [e for e in logs if e["event"] == "graph.map.grow"]
    assert grows and all(e["new"] == 2 * e["old"] for e in grows)
    with open_store(tmp_path, map_size=1 << 16) as graph:
        assert graph.count() == 3000
        assert graph.get(results[-1].id).valid_from == 2999


def test_map_size_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        open_store(tmp_path, map_size=10)
    assert info.value.field == "map_size"


def test_growth_stops_at_max_map_size(tmp_path: Path) -> None:
    facts = [make_fact(subject=EntityRef(EntityKind.TOKEN, f"t{i}"), valid_from=i)
             for i in range(3000)]
    with open_store(tmp_path, map_size=1 << 16, max_map_size=1 << 17) as graph:
        with pytest.raises(StoreError, match="max_map_size"):
            graph.assert_many(facts)
        assert graph.count() == 0


# -- assert, reinforce, close --------------------------------------------------------------------


def test_assert_records_four_times_and_evidence(store: GraphStore, clock: FrozenClock) -> None:
    result = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100,
                               source_episode="ep-1", confidence=0.7)
    assert result == AssertResult(result.id, (), False)
    triple = store.get(result.id)
    assert (triple.valid_from, triple.valid_to) == (100, None)
    assert (triple.recorded_at, triple.superseded_at) == (clock.now, None)
    assert (triple.source_episode, triple.confidence, triple.evidence_count) == ("ep-1", 0.7, 1)


def test_same_object_reinforces_instead_of_duplicating(store: GraphStore) -> None:
    first = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100,
                              confidence=0.5)
    again = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 120,
                              confidence=0.6)
    assert again == AssertResult(first.id, (), True)
    triple = store.get(first.id)
    assert triple.evidence_count == 2
    assert triple.confidence == pytest.approx(1 - 0.5 * 0.4)
    assert triple.valid_from == 100
    assert store.count() == 1


def test_other_object_closes_the_open_triple(store: GraphStore, clock: FrozenClock) -> None:
    old = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    clock.advance(5_000)
    new = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    assert new.closed == (old.id,)
    closed = store.get(old.id)
    assert (closed.valid_to, closed.superseded_at) == (200, clock.now)
    assert [t.id for t in store.query_at(AAVE, 199)] == [old.id]
    assert [t.id for t in store.query_at(AAVE, 200)] == [new.id]
    assert store.query_at(AAVE, 99) == []
    assert store.count() == 2


def test_objects_of_another_kind_close_rather_than_reinforce(store: GraphStore) -> None:
    """1.0, true and block 1 are equal in Python but are different facts."""
    number = store.assert_fact(AAVE, "custom:flag", ObjectValue.number(1.0), 10)
    flag = store.assert_fact(AAVE, "custom:flag", ObjectValue.boolean(True), 20)
    block = store.assert_fact(AAVE, "custom:flag", ObjectValue.block(1), 30)
    assert (flag.closed, block.closed) == ((number.id,), (flag.id,))
    assert [t.object for t in store.query_at(AAVE, 25)] == [ObjectValue.boolean(True)]


def test_other_predicates_are_independent(store: GraphStore) -> None:
    a = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    b = store.assert_fact(AAVE, "custom:fee_tier", ObjectValue.number(0.05), 150)
    assert b.closed == ()
    assert {t.id for t in store.query_at(AAVE, 160)} == {a.id, b.id}


def test_same_block_contradiction_supersedes_with_an_empty_interval(store: GraphStore) -> None:
    """Two facts at one block: the later discovery wins and the first is kept, never valid."""
    old = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    new = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 100)
    assert new.closed == (old.id,)
    assert store.get(old.id).valid_to == 100
    assert [t.id for t in store.query_at(AAVE, 100)] == [new.id]
    assert store.range_scan(0, 1000)[0].id == new.id


def test_fact_before_the_frontier_is_rejected_and_writes_nothing(store: GraphStore) -> None:
    """Valid intervals of one subject and predicate never overlap: no backdating past history."""
    store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    before = snapshot(store)
    with pytest.raises(ValidationError) as info:
        store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 150)
    assert info.value.field == "facts[0].valid_from"
    assert snapshot(store) == before


def test_fact_may_not_start_inside_a_closed_interval(store: GraphStore) -> None:
    first = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    store.invalidate(first.id, 300)
    with pytest.raises(ValidationError):
        store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    reopened = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 300)
    assert reopened.id != first.id and not reopened.reinforced


def test_assert_many_applies_in_order_in_one_transaction(store: GraphStore) -> None:
    results = store.assert_many([
        make_fact(valid_from=100),
        make_fact(object=ObjectValue.entity(PYTH), valid_from=200),
        {"subject": {"kind": "pool", "id": "univ3-eth-usdc"}, "predicate": "custom:fee_tier",
         "object": {"kind": "number", "value": 5}, "valid_from": 7},
    ])
    assert results[1].closed == (results[0].id,)
    assert store.get(results[2].id).object == ObjectValue.number(5.0)
    assert len({store.get(r.id).recorded_at for r in results}) == 1


def test_assert_many_is_all_or_nothing(store: GraphStore) -> None:
    store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    before = snapshot(store)
    with pytest.raises(ValidationError) as info:
        store.assert_many([make_fact(subject=UNI), make_fact(confidence=1.5)])
    assert info.value.field == "facts[1].confidence"
    with pytest.raises(ValidationError) as info:  # valid alone, rejected by the store's state
        store.assert_many([make_fact(subject=UNI), make_fact(object=ObjectValue.entity(PYTH),
                                                             valid_from=50)])
    assert info.value.field == "facts[1].valid_from"
    assert snapshot(store) == before


# -- invalidate ----------------------------------------------------------------------------------


def test_invalidate_closes_and_records_transaction_time(store: GraphStore,
                                                        clock: FrozenClock) -> None:
    result = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    clock.advance(60_000)
    closed = store.invalidate(result.id, 150)
    assert (closed.valid_to, closed.superseded_at) == (150, clock.now)
    assert store.get(result.id) == closed
    assert store.query_at(AAVE, 150) == []
    assert store.count() == 1


@pytest.mark.parametrize(("triple_id", "at", "error", "field"), [
    ("unknown", 150, NotFoundError, None),
    ("", 150, ValidationError, "id"),
    ("not-a-uuid", 150, ValidationError, "id"),
    ("known", 99, ValidationError, "at_block"),
    ("known", -1, ValidationError, "at_block"),
    ("known", True, ValidationError, "at_block"),
])
def test_invalidate_rejects_bad_calls(store: GraphStore, triple_id: str, at: Any,
                                      error: type[Exception], field: str | None) -> None:
    known = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100).id
    ids = {"known": known, "unknown": "0190a9c2-0000-7000-8000-000000000000"}
    before = snapshot(store)
    with pytest.raises(error) as info:
        store.invalidate(ids.get(triple_id, triple_id), at)
    assert getattr(info.value, "field", None) == field
    assert snapshot(store) == before


def test_invalidate_twice_is_rejected(store: GraphStore) -> None:
    result = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    store.invalidate(result.id, 150)
    before = snapshot(store)
    with pytest.raises(ValidationError, match="already closed at block 150"):
        store.invalidate(result.id, 160)
    assert snapshot(store) == before


# -- transaction time ----------------------------------------------------------------------------


def test_known_at_returns_the_triple_as_it_stood(store: GraphStore, clock: FrozenClock) -> None:
    """A later close and a later reinforcement are invisible to a query at an earlier time."""
    t_learned = clock.now
    old = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100,
                            confidence=0.5)
    t_reinforced = clock.advance(1_000)
    store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 110, confidence=0.5)
    t_closed = clock.advance(1_000)
    new = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)

    assert store.query_as_known_at(AAVE, t_learned - 1) == []
    [at_learned] = store.query_as_known_at(AAVE, t_learned)
    assert (at_learned.valid_to, at_learned.superseded_at, at_learned.evidence_count) == (
        None, None, 1)
    [at_reinforced] = store.query_as_known_at(AAVE, t_reinforced + 999)
    assert (at_reinforced.valid_to, at_reinforced.evidence_count) == (None, 2)
    assert at_reinforced.confidence == pytest.approx(0.75)
    now = store.query_as_known_at(AAVE, t_closed)
    assert [(t.id, t.valid_to) for t in now] == [(old.id, 200), (new.id, None)]
    assert store.get(old.id, known_at=t_learned).valid_to is None
    with pytest.raises(NotFoundError):
        store.get(new.id, known_at=t_reinforced)


def test_valid_at_known_at_combines_both_times(store: GraphStore, clock: FrozenClock) -> None:
    old = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    t_before = clock.now
    clock.advance(10)
    new = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    assert [t.id for t in store.valid_at_known_at(AAVE, 250, t_before)] == [old.id]
    assert [t.id for t in store.valid_at_known_at(AAVE, 250, clock.now)] == [new.id]
    assert store.valid_at_known_at(AAVE, 50, clock.now) == []


def test_transaction_time_never_goes_back(store: GraphStore, clock: FrozenClock) -> None:
    """A clock stepped backwards cannot rewrite what was known at an earlier time."""
    first = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    clock.set(T0 - 60_000)
    second = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    assert store.get(second.id).recorded_at == T0
    assert store.get(first.id).superseded_at == T0


# -- indexes: predicate, buckets -------------------------------------------------------------------


def test_by_predicate_all_or_valid_at_block(store: GraphStore) -> None:
    a = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    b = store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(PYTH), 200)
    c = store.assert_fact(UNI, "oracle_dependency", ObjectValue.entity(LINK), 150)
    store.assert_fact(UNI, "has_position", ObjectValue.entity(LP), 150)
    assert [t.id for t in store.by_predicate("oracle_dependency")] == [a.id, c.id, b.id]
    assert [t.id for t in store.by_predicate(Predicate.ORACLE_DEPENDENCY, 160)] == [a.id, c.id]
    assert len(store.by_predicate("oracle_dependency", limit=2)) == 2
    assert store.by_predicate("custom:nothing") == []


def test_range_scan_finds_every_interval_meeting_the_range(store: GraphStore) -> None:
    """Short, long, open and empty intervals, across bucket levels, against brute force."""
    spans = [(5, 10), (999, 1001), (1500, 2_500_000), (3_000, 3_000), (40_000, None),
             (0, 17_000_000_000), (2_000_000, 2_000_001), (10**12, None)]
    for i, (start, end) in enumerate(spans):
        result = store.assert_fact(EntityRef(EntityKind.TOKEN, f"t{i}"), "token_flow",
                                   ObjectValue.block(start), start)
        if end is not None:
            store.invalidate(result.id, end)
    every = store.range_scan(0, 2**62)
    for low, high in [(0, 0), (9, 9), (10, 10), (1000, 1000), (2_400_000, 2_600_000),
                      (3_000, 3_000), (50_000, 50_000), (17_000_000_000, 2**62), (0, 2**62)]:
        expected = [t for t in every if t.overlaps(low, high)]
        assert store.range_scan(low, high) == expected, (low, high)
    assert len(every) == len(spans) - 1  # the empty interval meets nothing
    assert [t.valid_from for t in every] == sorted(t.valid_from for t in every)
    assert len(store.range_scan(0, 2**62, limit=3)) == 3


def test_range_scan_rejects_a_reversed_range(store: GraphStore) -> None:
    with pytest.raises(ValidationError) as info:
        store.range_scan(10, 5)
    assert info.value.field == "to_block"


# -- traversal -----------------------------------------------------------------------------------


def seed_topology(graph: GraphStore) -> None:
    """Seed 004's example path, plus a scalar fact and an edge closed at block 500."""
    graph.assert_many([
        make_fact(subject=AAVE, object=ObjectValue.entity(LINK), valid_from=100),
        make_fact(subject=LINK, object=ObjectValue.entity(UNI), valid_from=100),
        make_fact(subject=UNI, predicate="has_position", object=ObjectValue.entity(LP),
                  valid_from=100),
        make_fact(subject=LP, predicate="collateral_backing", object=ObjectValue.entity(YEARN),
                  valid_from=100),
        make_fact(subject=AAVE, predicate="custom:tvl_usd", object=ObjectValue.number(1e9),
                  valid_from=100),
    ])
    closing = graph.assert_fact(PYTH, "oracle_dependency", ObjectValue.entity(AAVE), 100)
    graph.invalidate(closing.id, 500)


def test_k_hop_out_follows_edges_with_hop_distance(store: GraphStore) -> None:
    seed_topology(store)
    found = [(n.entity, n.hops, n.predicate) for n in store.k_hop_neighbors(AAVE, 3, 200)]
    assert found == [(LINK, 1, "oracle_dependency"), (UNI, 2, "oracle_dependency"),
                     (LP, 3, "has_position")]
    assert [n.entity for n in store.k_hop_neighbors(AAVE, 4, 200)][-1] == YEARN
    assert store.k_hop_neighbors(AAVE, 0, 200) == []
    assert store.k_hop_neighbors(AAVE, 3, 99) == []


def test_k_hop_in_and_both_use_reverse_edges(store: GraphStore) -> None:
    seed_topology(store)
    inbound = store.k_hop_neighbors(UNI, 3, 200, direction="in")
    assert [(n.entity, n.hops, n.direction) for n in inbound] == [
        (LINK, 1, "in"), (AAVE, 2, "in"), (PYTH, 3, "in")]
    both = {n.entity: n.hops for n in store.k_hop_neighbors(UNI, 2, 200, direction="both")}
    assert both == {LINK: 1, LP: 1, AAVE: 2, YEARN: 2}


def test_k_hop_skips_edges_not_valid_at_block(store: GraphStore) -> None:
    seed_topology(store)
    assert PYTH in {n.entity for n in store.k_hop_neighbors(AAVE, 1, 499, direction="in")}
    assert store.k_hop_neighbors(AAVE, 1, 500, direction="in") == []


@pytest.mark.parametrize(("distance", "modifier"),
                         [(0, 1.0), (1, 1.0), (2, 0.5), (3, 0.25), (4, 0.0), (None, 0.0)])
def test_topology_curiosity_modifier_table(distance: int | None, modifier: float) -> None:
    assert topology_curiosity_modifier(distance) == modifier


def test_curiosity_modifier_from_graph_distance(store: GraphStore) -> None:
    seed_topology(store)
    assert store.topology_distance(AAVE, UNI, 200) == 2
    assert store.topology_distance(UNI, AAVE, 200, direction="out") is None
    assert store.curiosity_modifier(UNI, [AAVE], 200) == 0.5
    assert store.curiosity_modifier(LINK, [YEARN, AAVE], 200) == 1.0
    assert store.curiosity_modifier(AAVE, [AAVE], 200) == 1.0
    assert store.curiosity_modifier(YEARN, [AAVE], 200) == 0.0  # four hops away
    assert store.curiosity_modifier(LP, [AAVE], 200) == 0.25
    assert store.curiosity_modifier(LP, [], 200) == 0.0


# -- bad input -------------------------------------------------------------------------------------


BAD_FACTS = [
    ({"subject": {"kind": "protocol", "id": "x"}}, "facts[0].subject.kind"),
    ({"subject": {"kind": "pool"}}, "facts[0].subject.id"),
    ({"subject": EntityRef(EntityKind.POOL, "")}, "facts[0].subject.id"),
    ({"subject": EntityRef(EntityKind.POOL, "a\nb")}, "facts[0].subject.id"),
    ({"subject": EntityRef(EntityKind.POOL, "x" * 300)}, "facts[0].subject.id"),
    ({"predicate": "relates_to"}, "facts[0].predicate"),
    ({"predicate": "custom:has space"}, "facts[0].predicate"),
    ({"predicate": ""}, "facts[0].predicate"),
    ({"valid_from": -1}, "facts[0].valid_from"),
    ({"valid_from": 1.5}, "facts[0].valid_from"),
    ({"valid_from": True}, "facts[0].valid_from"),
    ({"valid_from": 2**63}, "facts[0].valid_from"),
    ({"object": ObjectValue(ObjectKind.NUMBER, "12")}, "facts[0].object.value"),
    ({"object": ObjectValue(ObjectKind.NUMBER, math.inf)}, "facts[0].object.value"),
    ({"object": ObjectValue(ObjectKind.BLOCK, -5)}, "facts[0].object.value"),
    ({"object": ObjectValue(ObjectKind.BOOL, 1)}, "facts[0].object.value"),
    ({"object": ObjectValue(ObjectKind.ENTITY, "0xabc")}, "facts[0].object.value"),
    ({"object": {"kind": "date", "value": 1}}, "facts[0].object.kind"),
    ({"object": 5}, "facts[0].object"),
    ({"confidence": math.nan}, "facts[0].confidence"),
    ({"confidence": 1.01}, "facts[0].confidence"),
    ({"confidence": -0.1}, "facts[0].confidence"),
    ({"confidence": "high"}, "facts[0].confidence"),
    ({"source_episode": ""}, "facts[0].source_episode"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_FACTS)
def test_bad_fact_is_rejected_by_field_and_writes_nothing(store: GraphStore,
                                                          overrides: dict[str, Any],
                                                          field: str) -> None:
    store.assert_fact(AAVE, "oracle_dependency", ObjectValue.entity(LINK), 100)
    before = snapshot(store)
    with pytest.raises(ValidationError) as info:
        store.assert_many([make_fact(**overrides)])
    assert info.value.field == field
    assert field in str(info.value)
    assert snapshot(store) == before


@pytest.mark.parametrize(("call", "field"), [
    (lambda g: g.query_at(AAVE, -1), "block"),
    (lambda g: g.query_at({"kind": "pool", "id": ""}, 1), "subject.id"),
    (lambda g: g.query_as_known_at(AAVE, -5), "time"),
    (lambda g: g.query_as_known_at(AAVE, 1.0), "time"),
    (lambda g: g.k_hop_neighbors(AAVE, -1, 1), "max_hops"),
    (lambda g: g.k_hop_neighbors(AAVE, 99, 1), "max_hops"),
    (lambda g: g.k_hop_neighbors(AAVE, 2, 1, direction="up"), "direction"),
    (lambda g: g.by_predicate("custom:"), "predicate"),
    (lambda g: g.by_predicate("token_flow", limit=0), "limit"),
    (lambda g: g.get(""), "id"),
    (lambda g: g.get("0190a9c2-0000-7000-8000-000000000000", known_at=-1), "known_at"),
])
def test_bad_query_arguments_name_the_field(store: GraphStore, call: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        call(store)
    assert info.value.field == field


def test_hex_addresses_are_one_entity_whatever_their_case(store: GraphStore) -> None:
    upper = EntityRef(EntityKind.TOKEN, "0x" + "AB" * 20)
    lower = EntityRef(EntityKind.TOKEN, "0x" + "ab" * 20)
    first = store.assert_fact(upper, "token_flow", ObjectValue.entity(upper), 1)
    again = store.assert_fact(lower, "token_flow", ObjectValue.entity(lower), 2)
    assert again.id == first.id and again.reinforced
    assert store.get(first.id).subject == lower


# -- records ---------------------------------------------------------------------------------------


def test_triple_dict_round_trip_is_json_safe(store: GraphStore) -> None:
    import json

    result = store.assert_fact(AAVE, "custom:paused", ObjectValue.boolean(True), 3,
                               source_episode="ep")
    store.invalidate(result.id, 9)
    triple = store.get(result.id)
    data = json.loads(json.dumps(triple.to_dict()))
    assert data["object"] == {"kind": "bool", "value": True}
    assert TemporalTriple.from_dict(data) == triple


def test_triple_from_dict_checks_time_order() -> None:
    data = {"id": "0190a9c2-0000-7000-8000-000000000000",
            "subject": {"kind": "pool", "id": "p"}, "predicate": "token_flow",
            "object": {"kind": "string", "value": "s"}, "valid_from": 10, "valid_to": 5,
            "recorded_at": 1, "superseded_at": 2, "source_episode": None, "confidence": 0.5,
            "evidence_count": 1}
    with pytest.raises(ValidationError) as info:
        TemporalTriple.from_dict(data)
    assert info.value.field == "valid_to"
    with pytest.raises(ValidationError) as info:
        TemporalTriple.from_dict({**data, "valid_to": None})
    assert info.value.field == "superseded_at"


def test_object_values_keep_their_kind() -> None:
    """1.0, true and block 1 are different objects; an entity may be written bare."""
    assert len({ObjectValue.number(1), ObjectValue.boolean(True), ObjectValue.block(1)}) == 3
    assert parse_object({"kind": "pool", "id": "p"}) == ObjectValue.entity(
        EntityRef(EntityKind.POOL, "p"))
    assert parse_object({"kind": "entity", "value": {"kind": "pool", "id": "p"}}).as_entity == (
        EntityRef(EntityKind.POOL, "p"))
    assert parse_predicate("custom:fee_tier.v2") == "custom:fee_tier.v2"
    assert parse_predicate(Predicate.TOKEN_FLOW) == "token_flow"


# -- concurrency -----------------------------------------------------------------------------------


def test_readers_on_other_threads_run_while_the_map_grows(tmp_path: Path) -> None:
    """Readers in other threads keep working while the writer commits and doubles the map."""
    errors: list[BaseException] = []
    seen: list[int] = []

    def read(graph: GraphStore) -> None:
        try:  # a fixed number of reads rather than a spin: spinning starves the writer of the GIL
            for _ in range(200):
                seen.append(len(graph.k_hop_neighbors(AAVE, 1, 10**6, direction="in")))
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    with open_store(tmp_path, map_size=1 << 16) as graph:
        readers = [threading.Thread(target=read, args=(graph,)) for _ in range(2)]
        for thread in readers:
            thread.start()
        try:
            for batch in range(10):
                graph.assert_many([make_fact(subject=EntityRef(EntityKind.TOKEN, f"{batch}-{i}"),
                                             object=ObjectValue.entity(AAVE), valid_from=i)
                                   for i in range(300)])
        finally:
            for thread in readers:
                thread.join(timeout=60)
        assert all(n % 300 == 0 for n in seen)  # each read saw whole batches: one snapshot
        assert not errors
        assert graph.count() == 3000
        assert graph.stats()["map_size"] > 1 << 16
        assert len(graph.k_hop_neighbors(AAVE, 1, 10**6, direction="in")) == 3000
