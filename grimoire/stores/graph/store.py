"""The bi-temporal knowledge graph store (SPEC §10) on LMDB: ``GraphStore``, its public API.

Owns what the graph holds: triples, their superseded versions, the
per-(subject, predicate) heads and the indexes by subject, object entity,
predicate and block bucket, each written in the same write transaction as the
triple. It validates every argument and applies the temporal rules: an
assertion closes the open triple with the same subject and predicate and
another object, or reinforces the one with the same object; nothing is ever
deleted or updated without keeping the version it replaces, so "what did I
know at time T" has an exact answer.

It must not import other stores, read the environment or the wall clock (time
comes from the injected clock), nor hold a transaction across calls:
every call opens a short one, so readers on any thread never block the writer.
Its parts: the LMDB environment (schema, transactions, map growth) is
``graph_env.py``, version reads and writes ``graph_versions.py``, the byte
layout ``graph_codec.py``, the walks ``graph_traverse.py`` and the in-memory
copy of the entity edges they read ``graph_adjacency.py``.

Invariants the methods keep:

- per (subject, predicate) at most one open triple, and the valid intervals
  of its triples never overlap (a new fact may not start before the head's
  ``frontier``: the open triple's start or the last close);
- transaction time never goes backwards in the store, even if the clock does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import takewhile
from types import TracebackType
from typing import Any, TypeVar

from grimoire.clock import Clock
from grimoire.errors import NotFoundError, ValidationError
from grimoire.ids import new_id
from grimoire.logs import get_logger
from grimoire.records.graph import (
    DEFAULT_CONFIDENCE,
    AssertResult,
    Direction,
    EntityRef,
    Fact,
    Neighbor,
    ObjectValue,
    TemporalTriple,
    parse_block,
    parse_direction,
    parse_entity_ref,
    parse_fact,
    parse_hops,
    parse_limit,
    parse_predicate,
    parse_time,
    parse_triple_id,
)
from grimoire.stores.graph import codec, erase
from grimoire.stores.graph.adjacency import DEFAULT_MAX_EDGES, Adjacency
from grimoire.stores.graph.codec import Stored
from grimoire.stores.graph.env import (
    DEFAULT_MAP_SIZE,
    DEFAULT_MAX_MAP_SIZE,
    SCHEMA_VERSION,
    GraphEnv,
)
from grimoire.stores.graph.traverse import (
    Reached,
    bfs_lmdb,
    collect,
    topology_curiosity_modifier,
)
from grimoire.stores.graph.versions import Versions

__all__ = ["DEFAULT_MAP_SIZE", "SCHEMA_VERSION", "GraphStore", "topology_curiosity_modifier"]

log = get_logger(__name__)
T = TypeVar("T")

_OPEN_BIN = codec.bucket_key(0, None)


class GraphStore:
    """Bi-temporal triples on LMDB. Open with ``GraphStore.open(path, clock=...)``."""

    def __init__(self, env: GraphEnv, adjacency_max_edges: int) -> None:
        """Use ``GraphStore.open``."""
        self._env, self._db, self._path = env, env.db, env.path
        self._versions = Versions(env.db, env.path, env.queue)
        self._index: Adjacency | None = None
        if adjacency_max_edges:
            with env.txn() as txn:
                self._index = Adjacency.build(txn, env.db, adjacency_max_edges)
            env.on_commit = self._index.apply

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock,
             map_size: int = DEFAULT_MAP_SIZE, max_map_size: int = DEFAULT_MAX_MAP_SIZE,
             adjacency_max_edges: int = DEFAULT_MAX_EDGES,
             read_only: bool = False) -> GraphStore:
        """Open or create the store in directory ``path``; the map doubles when full.

        Walks (``k_hop_neighbors``, ``topology_distance``) read an in-memory
        copy of up to ``adjacency_max_edges`` entity edges (0: walk LMDB only).

        ``read_only=True`` reads an existing store beside its writer (a daemon) or
        without one: every read sees the last commit, writes raise
        NotAvailableError, and walks read LMDB (an in-memory copy would miss the
        writer's commits).
        """
        if (isinstance(adjacency_max_edges, bool) or not isinstance(adjacency_max_edges, int)
                or adjacency_max_edges < 0):
            raise ValidationError("must be an integer >= 0", field="adjacency_max_edges")
        env = GraphEnv.open(path, clock=clock, map_size=map_size, max_map_size=max_map_size,
                            read_only=read_only)
        if read_only:
            adjacency_max_edges = 0
        try:
            store = cls(env, adjacency_max_edges)
            index = store._index
            log.info("graph.open", path=str(env.path), schema_version=SCHEMA_VERSION,
                     triples=store.count(), map_size=env.map_size,
                     adjacency_edges=None if index is None else len(index),
                     adjacency_floor=None if index is None else index.floor)
        except BaseException:
            env.close()
            raise
        return store

    @property
    def read_only(self) -> bool:
        return self._env.read_only

    def close(self) -> None:
        """Close the environment once no call is using it. Idempotent."""
        if self._env.close():
            self._index = None
            log.info("graph.close", path=str(self._path))

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- writes ------------------------------------------------------------------------------

    def assert_fact(self, subject: EntityRef, predicate: str, object: ObjectValue,
                    valid_from: int, *, source_episode: str | None = None,
                    confidence: float = DEFAULT_CONFIDENCE) -> AssertResult:
        """Assert one fact in its own durable transaction (see ``assert_many`` for the rules)."""
        fact = Fact(subject, predicate, object, valid_from, source_episode, confidence)
        return self.assert_many([fact])[0]

    def assert_many(self, facts: Iterable[Fact | Mapping[str, Any]]) -> list[AssertResult]:
        """Assert facts in order, in one transaction: all are written or none.

        For each fact, the open triple with the same subject and predicate is
        reinforced if it has the same object (confidence combined as
        independent evidence, evidence_count + 1); otherwise it is closed at
        ``valid_from`` and a new triple is opened. A reinforcement keeps the
        triple's valid_from and first source_episode. A fact may not start
        before the subject and predicate's last start or close (ValidationError).
        """
        checked = [parse_fact(fact, f"facts[{i}].") for i, fact in enumerate(facts)]
        return self._write(lambda txn, now: [self._assert_one(txn, now, fact, f"facts[{i}].")
                                             for i, fact in enumerate(checked)])

    def invalidate(self, triple_id: str, at_block: int) -> TemporalTriple:
        """Close an open triple at ``at_block``; returns it as closed. Nothing is deleted."""
        raw_id = codec.id_bytes(parse_triple_id(triple_id, "id"))
        at = parse_block(at_block, "at_block")

        def run(txn: Any, now: int) -> TemporalTriple:
            current = self._versions.load(txn, raw_id)
            if current is None:
                raise NotFoundError(f"no triple {triple_id}")
            triple = current.triple
            if triple.valid_to is not None:
                raise ValidationError(f"triple is already closed at block {triple.valid_to} "
                                      f"(recorded at {triple.superseded_at})", field="id")
            if at < triple.valid_from:
                raise ValidationError(f"{at} is before the triple's valid_from "
                                      f"{triple.valid_from}", field="at_block")
            closed = self._close(txn, current, at, now)
            head = codec.head_key(codec.entity_key(triple.subject), triple.predicate)
            txn.put(head, codec.encode_head(None, at), db=self._db["heads"])
            return closed

        return self._write(run)

    def _assert_one(self, txn: Any, now: int, fact: Fact, where: str) -> AssertResult:
        head_key = codec.head_key(codec.entity_key(fact.subject), fact.predicate)
        raw_head = txn.get(head_key, db=self._db["heads"])
        active_id, frontier = codec.decode_head(raw_head) if raw_head else (None, 0)
        active = None if active_id is None else self._versions.must_load(txn, active_id)
        if active is not None and active.triple.object == fact.object:
            reinforced = _reinforced(active.triple, fact.confidence)
            self._versions.put_version(txn, active, reinforced, now)
            return AssertResult(active.triple.id, reinforced=True)
        if fact.valid_from < frontier:
            raise ValidationError(
                f"{fact.valid_from} is before block {frontier}, where the history of this "
                "subject and predicate has reached; assert from that block on",
                field=f"{where}valid_from")
        closed: tuple[str, ...] = ()
        if active is not None:
            self._close(txn, active, fact.valid_from, now)
            closed = (active.triple.id,)
        triple = TemporalTriple(
            id=new_id(now), subject=fact.subject, predicate=fact.predicate,
            object=fact.object, valid_from=fact.valid_from, valid_to=None, recorded_at=now,
            superseded_at=None, source_episode=fact.source_episode, confidence=fact.confidence,
            evidence_count=1)
        self._versions.put_new(txn, triple, now)
        txn.put(head_key, codec.encode_head(codec.id_bytes(triple.id), fact.valid_from),
                db=self._db["heads"])
        return AssertResult(triple.id, closed)

    def _close(self, txn: Any, current: Stored, at: int, now: int) -> TemporalTriple:
        closed = replace(current.triple, valid_to=at, superseded_at=now)
        self._versions.put_version(txn, current, closed, now)
        return closed

    # -- forget (grimoire.forget) ---------------------------------------------------------------

    def triples_about(self, *, entities: Iterable[EntityRef] = (), needles: Iterable[str] = (),
                      source_episodes: Iterable[str] = ()) -> list[str]:
        """Ids of the triples about a forgotten subject (``graph.erase.triples_about``)."""
        with self._env.txn() as txn:
            return erase.triples_about(txn, self._db, entities=set(entities),
                                       needles=list(needles),
                                       source_episodes=set(source_episodes))

    def erase(self, triple_ids: Iterable[str]) -> int:
        """Delete these triples whole (every version, index entry and an emptied head) and
        rewrite the file so that no freed page keeps their bytes. Idempotent."""
        ids = list(triple_ids)
        erased = self._write(lambda txn, _now: erase.erase_triples(
            txn, self._db, ids, self._env.queue))
        self._env.rewrite()
        return erased

    # -- point queries -------------------------------------------------------------------------

    def get(self, triple_id: str, *, known_at: int | None = None) -> TemporalTriple:
        """The triple now, or as it stood at transaction time ``known_at``."""
        raw_id = codec.id_bytes(parse_triple_id(triple_id, "id"))
        time = None if known_at is None else parse_time(known_at, "known_at")
        with self._env.txn() as txn:
            if time is None:
                stored = self._versions.load(txn, raw_id)
                triple = None if stored is None else stored.triple
            else:
                triple = self._versions.at(txn, raw_id, time)
        if triple is None:
            raise NotFoundError(f"no triple {triple_id}"
                                + ("" if time is None else f" recorded by {time}"))
        return triple

    def query_at(self, subject: EntityRef, block: int) -> list[TemporalTriple]:
        """Triples about ``subject`` valid at ``block``, as known now."""
        key = codec.entity_key(parse_entity_ref(subject, "subject"))
        at = codec.block_bytes(parse_block(block, "block"))
        with self._env.txn() as txn:
            values = takewhile(lambda v: v[:8] <= at, self._dups(txn, "by_subject", key))
            ids = [v[16:32] for v in values if at < v[8:16]]
            return _ordered(self._versions.must_load(txn, i).triple for i in ids)

    def query_as_known_at(self, subject: EntityRef, time: int) -> list[TemporalTriple]:
        """Triples about ``subject`` as they stood at transaction time ``time``, closed or not."""
        key = codec.entity_key(parse_entity_ref(subject, "subject"))
        known_at = parse_time(time, "time")
        with self._env.txn() as txn:
            versions = (self._versions.at(txn, v[16:32], known_at)
                        for v in self._dups(txn, "by_subject", key))
            return _ordered(t for t in versions if t is not None)

    def valid_at_known_at(self, subject: EntityRef, block: int, time: int) -> list[TemporalTriple]:
        """Triples valid at ``block`` according to what was known at ``time``."""
        at = parse_block(block, "block")
        return [t for t in self.query_as_known_at(subject, time) if t.valid_at(at)]

    def by_predicate(self, predicate: str, block: int | None = None, *,
                     limit: int | None = None) -> list[TemporalTriple]:
        """Triples with ``predicate`` (valid at ``block`` if given), in valid_from order."""
        key = parse_predicate(predicate).encode()
        at = None if block is None else codec.block_bytes(parse_block(block, "block"))
        cap = parse_limit(limit)
        with self._env.txn() as txn:
            values = self._dups(txn, "by_predicate", key)
            if at is not None:
                values = (v for v in takewhile(lambda v: v[:8] <= at, values) if at < v[8:16])
            ids = [v[16:32] for _, v in zip(range(cap), values, strict=False)]
            return [self._versions.must_load(txn, i).triple for i in ids]

    def range_scan(self, from_block: int, to_block: int, *,
                   limit: int | None = None) -> list[TemporalTriple]:
        """Triples whose valid interval meets ``[from_block, to_block]``, in valid_from order."""
        low, high = parse_block(from_block, "from_block"), parse_block(to_block, "to_block")
        if high < low:
            raise ValidationError(f"{high} is before from_block {low}", field="to_block")
        lo, hi = codec.block_bytes(low), codec.block_bytes(high)
        cap = parse_limit(limit)
        with self._env.txn() as txn:
            cursor = txn.cursor(self._db["by_bucket"])
            hits = []
            for first, last in codec.bucket_ranges(low, high):
                if not cursor.set_range(first):
                    continue
                for key, v in cursor.iternext(keys=True, values=True):
                    if key > last:
                        break
                    if v[:8] <= hi and v[8:16] > lo and v[8:16] > v[:8]:
                        hits.append(v)
            hits.sort()
            return [self._versions.must_load(txn, v[16:32]).triple for v in hits[:cap]]

    # -- traversal -----------------------------------------------------------------------------

    def k_hop_neighbors(self, subject: EntityRef, max_hops: int, block: int,
                        direction: Direction = "out") -> list[Neighbor]:
        """Entities within ``max_hops`` entity edges valid at ``block``, nearest first (BFS)."""
        start = codec.entity_key(parse_entity_ref(subject, "subject"))
        hops, at = parse_hops(max_hops), parse_block(block, "block")
        found = self._walk([start], hops, at, parse_direction(direction))
        index = self._index
        if index is not None:
            return index.neighbors(found)
        return [Neighbor(codec.decode_entity_key(key), hop, predicate, way)
                for key, hop, predicate, way in found]

    def topology_distance(self, source: EntityRef | Iterable[EntityRef], target: EntityRef,
                          block: int, *, max_hops: int = 3,
                          direction: Direction = "both") -> int | None:
        """Hops from ``source`` (or the nearest of several) to ``target``; None if farther."""
        sources = [source] if isinstance(source, EntityRef) else list(source)
        starts = [codec.entity_key(parse_entity_ref(s, "source")) for s in sources]
        goal = codec.entity_key(parse_entity_ref(target, "target"))
        hops, at = parse_hops(max_hops), parse_block(block, "block")
        way = parse_direction(direction)
        if goal in starts:
            return 0
        found = self._walk(starts, hops, at, way, goal)
        return found[-1][1] if found and found[-1][0] == goal else None

    def curiosity_modifier(self, event_entity: EntityRef, positions: Iterable[EntityRef],
                           block: int, *, direction: Direction = "both") -> float:
        """Seed 004's topology modifier for an event, from its distance to the nearest position.

        ``direction`` defaults to both ways, unlike the seed's outgoing-only walk:
        a position is exposed to an oracle it depends on and to a vault that
        depends on it alike.
        """
        held = list(positions)
        if not held:
            return 0.0
        distance = self.topology_distance(held, event_entity, block, max_hops=3,
                                          direction=direction)
        return topology_curiosity_modifier(distance)

    # -- status --------------------------------------------------------------------------------

    def count(self) -> int:
        """Number of triples (open and closed; versions not counted)."""
        with self._env.txn() as txn:
            return int(txn.stat(self._db["triples"])["entries"])

    def stats(self) -> dict[str, int]:
        """Counts and sizes for ``status``."""
        with self._env.txn() as txn:
            triples = txn.stat(self._db["triples"])["entries"]
            cursor = txn.cursor(self._db["by_bucket"])
            open_ = cursor.count() if cursor.set_key(_OPEN_BIN) else 0
            subjects = sum(1 for _ in txn.cursor(self._db["by_subject"]).iternext_nodup())
            return {
                "triples": triples, "open": open_, "closed": triples - open_,
                "versions": txn.stat(self._db["history"])["entries"], "subjects": subjects,
                "last_tx": self._env.last_tx(txn), **self._env.usage(),
                "schema_version": SCHEMA_VERSION,
            }

    # -- helpers -------------------------------------------------------------------------------

    def _walk(self, starts: list[bytes], max_hops: int, block: int, direction: Direction,
              goal: bytes | None = None, *, index: bool = True) -> list[Reached]:
        """BFS (stopping at ``goal``) in the adjacency if it holds ``block``, else in LMDB.

        ``index=False`` walks LMDB, the reference the tests compare the adjacency with.
        """
        adjacency = self._index if index else None
        if adjacency is not None:
            self._env.check_open()
            found = adjacency.walk(starts, max_hops, block, direction, goal)
            if found is not None:
                return found
        with self._env.txn() as txn:
            walk = bfs_lmdb(txn, self._db, starts, max_hops, block, direction)
            return collect(walk, goal)

    def _write(self, action: Callable[[Any, int], T]) -> T:
        return self._env.write(action)

    def _dups(self, txn: Any, db: str, key: bytes) -> Iterator[bytes]:
        cursor = txn.cursor(self._db[db])
        if cursor.set_key(key):
            yield from cursor.iternext_dup(keys=False, values=True)


def _reinforced(triple: TemporalTriple, confidence: float) -> TemporalTriple:
    # Independent evidence combines as a noisy-OR: never lower, never above 1.
    combined = 1.0 - (1.0 - triple.confidence) * (1.0 - confidence)
    return replace(triple, confidence=min(1.0, combined),
                   evidence_count=triple.evidence_count + 1)


def _ordered(triples: Iterable[TemporalTriple]) -> list[TemporalTriple]:
    return sorted(triples, key=lambda t: (t.predicate, t.valid_from, t.recorded_at, t.id))
