"""Property tests of the graph store (hypothesis), on real LMDB in temporary directories.

The stated invariants: random asserts and invalidations never leave two
triples of one subject and predicate valid at the same block; what was known
at time T does not change when later writes happen; a reopened store answers
every query as before. Index-backed answers are also checked against answers
computed from the records themselves.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.records.graph import (
    MAX_BLOCK,
    EntityKind,
    EntityRef,
    ObjectValue,
    TemporalTriple,
)
from grimoire.stores.graph import codec
from grimoire.stores.graph.store import GraphStore

T0 = 1_767_225_600_000
FAR_FUTURE = 2**62
BLOCKS = range(0, 52)

SUBJECTS = [EntityRef(EntityKind.POOL, "p"), EntityRef(EntityKind.ORACLE, "o"),
            EntityRef(EntityKind.TOKEN, "0x" + "ab" * 20)]
PREDICATES = ["oracle_dependency", "custom:fee_tier"]
# Entities make a graph to walk; 1.0, true and block 1 must stay three different objects.
OBJECTS = [ObjectValue.entity(s) for s in SUBJECTS] + [
    ObjectValue.number(1.0), ObjectValue.boolean(True), ObjectValue.block(1)]


def scan_order(triple: TemporalTriple) -> tuple[int, int, str]:
    return (triple.valid_from, 2**64 if triple.valid_to is None else triple.valid_to, triple.id)


def assert_no_overlap(triples: list[TemporalTriple]) -> None:
    """Per predicate: at most one open triple and pairwise disjoint non-empty intervals."""
    for predicate in {t.predicate for t in triples}:
        group = sorted((t for t in triples if t.predicate == predicate), key=scan_order)
        assert sum(t.valid_to is None for t in group) <= 1
        spans = [(t.valid_from, t.valid_to) for t in group if t.valid_to != t.valid_from]
        for (_, end), (start, _) in pairwise(spans):
            assert end is not None and end <= start, spans


def boundaries(triples: list[TemporalTriple]) -> list[int]:
    """The blocks where answers can change: each interval's ends and the blocks before them."""
    ends = {0, BLOCKS[-1]}
    for t in triples:
        ends.update(b for b in (t.valid_from, t.valid_to) if b is not None)
    return sorted({b for end in ends for b in (end - 1, end) if b >= 0})


class GraphMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="grimoire-kg-"))
        self.clock = FrozenClock(T0)
        self.store = GraphStore.open(self.dir / "graph", clock=self.clock, map_size=1 << 20)
        self.ids: list[str] = []
        self.snapshots: list[tuple[int, list[list[TemporalTriple]]]] = []

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules -----------------------------------------------------------------------------

    @rule(subject=st.sampled_from(SUBJECTS), predicate=st.sampled_from(PREDICATES),
          obj=st.sampled_from(OBJECTS), valid_from=st.integers(0, 50),
          confidence=st.floats(0, 1))
    def assert_fact(self, subject: EntityRef, predicate: str, obj: ObjectValue,
                    valid_from: int, confidence: float) -> None:
        try:
            result = self.store.assert_fact(subject, predicate, obj, valid_from,
                                            confidence=confidence)
        except ValidationError as exc:
            assert exc.field == "facts[0].valid_from"  # the only state-dependent refusal
            return
        if not result.reinforced:
            self.ids.append(result.id)

    @rule(batch=st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES),
                                   st.sampled_from(OBJECTS), st.integers(0, 50)),
                         min_size=1, max_size=6))
    def assert_many(self, batch: list[tuple[EntityRef, str, ObjectValue, int]]) -> None:
        from grimoire.records.graph import Fact

        before = self.current()
        try:
            results = self.store.assert_many([Fact(*item) for item in batch])
        except ValidationError:
            assert self.current() == before  # all or nothing
            return
        self.ids.extend(r.id for r in results if not r.reinforced)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), at_block=st.integers(0, 51))
    def invalidate(self, data: st.DataObject, at_block: int) -> None:
        triple_id = data.draw(st.sampled_from(self.ids))
        try:
            closed = self.store.invalidate(triple_id, at_block)
        except ValidationError:
            return
        assert (closed.valid_to, closed.superseded_at) == (at_block, self.store.stats()["last_tx"])

    @rule(ms=st.integers(0, 3))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def remember_what_is_known_now(self) -> None:
        """Take the answers at T, then move past T: later writes are recorded after it."""
        now = self.clock.now
        self.snapshots.append((now, self.known(now)))
        self.clock.advance(1)

    @rule()
    def reopen(self) -> None:
        before = self.everything()
        self.store.close()
        self.store = GraphStore.open(self.dir / "graph", clock=self.clock, map_size=1 << 20)
        assert self.everything() == before

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def never_two_valid_triples_per_subject_and_predicate(self) -> None:
        for subject, triples in zip(SUBJECTS, self.current(), strict=True):
            assert_no_overlap(triples)
            for block in boundaries(triples):
                valid = self.store.query_at(subject, block)
                assert max(Counter(t.predicate for t in valid).values(), default=0) <= 1
                assert valid == [t for t in triples if t.valid_at(block)]

    @invariant()
    def what_was_known_at_t_never_changes(self) -> None:
        for time, answers in self.snapshots:
            known = self.known(time)
            assert known == answers, time
            for triples in known:
                assert_no_overlap(triples)

    @invariant()
    def range_scan_matches_the_records(self) -> None:
        every = sorted((t for ts in self.current() for t in ts), key=scan_order)
        for low, high in [(0, 0), (0, 51), (10, 20), (25, 25), (50, MAX_BLOCK)]:
            assert self.store.range_scan(low, high) == [t for t in every
                                                        if t.overlaps(low, high)]

    @invariant()
    def k_hop_matches_a_walk_over_query_at(self) -> None:
        for block in (0, 25, 51):
            expected: dict[EntityRef, int] = {}
            frontier, seen = [SUBJECTS[0]], {SUBJECTS[0]}
            for hop in (1, 2, 3):
                reached = []
                for node in frontier:
                    for triple in self.store.query_at(node, block):
                        target = triple.object.as_entity
                        if target is not None and target not in seen:
                            seen.add(target)
                            reached.append(target)
                            expected[target] = hop
                frontier = reached
            found = self.store.k_hop_neighbors(SUBJECTS[0], 3, block)
            assert {n.entity: n.hops for n in found} == expected

    # -- helpers -----------------------------------------------------------------------------

    def current(self) -> list[list[TemporalTriple]]:
        return self.known(FAR_FUTURE)

    def known(self, time: int) -> list[list[TemporalTriple]]:
        return [self.store.query_as_known_at(s, time) for s in SUBJECTS]

    def everything(self) -> dict[str, Any]:
        """Every query's answer over the small universe of this machine."""
        times = sorted({t for t, _ in self.snapshots} | {T0 - 1, self.clock.now})
        blocks = boundaries([t for ts in self.current() for t in ts])
        return {
            "at": [self.store.query_at(s, b) for s in SUBJECTS for b in blocks],
            "known": [self.known(t) for t in times],
            "both": [self.store.valid_at_known_at(s, b, t)
                     for s in SUBJECTS for b in (0, 25, 51) for t in times],
            "hops": [self.store.k_hop_neighbors(s, 3, b, direction=d)
                     for s in SUBJECTS for b in (0, 25, 51) for d in ("out", "in", "both")],
            "predicate": [self.store.by_predicate(p, b) for p in PREDICATES for b in (None, 25)],
            "scan": self.store.range_scan(0, MAX_BLOCK),
            "get": [self.store.get(i) for i in self.ids],
            "count": self.store.count(),
            "stats": self.store.stats(),
        }


GraphMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGraphMachine = GraphMachine.TestCase


# -- pure properties of the byte layout ------------------------------------------------------------

blocks = st.one_of(st.integers(0, 5_000), st.integers(0, 2**40), st.integers(0, MAX_BLOCK))


@given(start=blocks, length=st.one_of(st.none(), st.integers(0, 2**40)),
       low=blocks, span=st.integers(0, 2**40))
def test_bucket_ranges_cover_every_overlapping_interval(start: int, length: int | None,
                                                        low: int, span: int) -> None:
    """An interval meeting [low, high] sits in one of the bins a scan of [low, high] reads."""
    end = None if length is None else min(start + length, MAX_BLOCK)
    high = min(low + span, MAX_BLOCK)
    meets = start <= high and (end is None or (end > low and end > start))
    key = codec.bucket_key(start, end)
    read = any(first <= key <= last for first, last in codec.bucket_ranges(low, high))
    assert read or not meets


entity_ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1,
                     max_size=40).filter(str.strip)
entities = st.builds(EntityRef, st.sampled_from(list(EntityKind)), entity_ids)
objects = st.one_of(
    entities.map(ObjectValue.entity), st.text(max_size=50).map(ObjectValue.string),
    st.floats(allow_nan=False, allow_infinity=False).map(ObjectValue.number),
    st.booleans().map(ObjectValue.boolean), st.integers(0, MAX_BLOCK).map(ObjectValue.block))


@st.composite
def triples(draw: st.DrawFn) -> TemporalTriple:
    valid_from = draw(st.integers(0, MAX_BLOCK))
    closed = draw(st.booleans())
    recorded_at = draw(st.integers(0, 2**62))
    return TemporalTriple(
        id=str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))), subject=draw(entities),
        predicate=draw(st.sampled_from(["token_flow", "custom:a.b-c_d"])),
        object=draw(objects), valid_from=valid_from,
        valid_to=draw(st.integers(valid_from, MAX_BLOCK)) if closed else None,
        recorded_at=recorded_at,
        superseded_at=draw(st.integers(recorded_at, 2**62)) if closed else None,
        source_episode=draw(st.one_of(st.none(), entity_ids)),
        confidence=draw(st.floats(0, 1)), evidence_count=draw(st.integers(1, 2**31)),
    )


@given(triple=triples(), seq=st.integers(0, 2**32 - 1), since=st.integers(0, 2**63))
def test_record_codec_round_trips(triple: TemporalTriple, seq: int, since: int) -> None:
    stored = codec.decode_record(codec.encode_record(triple, seq, since))
    assert (stored.seq, stored.since, stored.triple) == (seq, since, triple)


@given(triple=triples())
def test_triple_dict_round_trips(triple: TemporalTriple) -> None:
    assert TemporalTriple.from_dict(triple.to_dict()) == triple
