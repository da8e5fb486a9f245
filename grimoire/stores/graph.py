"""The bi-temporal knowledge graph store (SPEC §10) on LMDB.

Owns the graph's LMDB environment: triples, their superseded versions, the
per-(subject, predicate) heads and the indexes by subject, object entity,
predicate and block bucket, each written in the same write transaction as the
triple. It applies the temporal rules: an assertion closes the open triple
with the same subject and predicate and another object, or reinforces the
one with the same object; nothing is ever deleted or updated without keeping
the version it replaces, so "what did I know at time T" has an exact answer.

It must not import other stores, read the environment or the wall clock (time
comes from the injected clock), nor hold a transaction across calls:
every call opens a short one, so readers on any thread never block the writer.

Invariants the methods keep:

- per (subject, predicate) at most one open triple, and the valid intervals
  of its triples never overlap (a new fact may not start before the head's
  ``frontier``: the open triple's start or the last close);
- transaction time never goes backwards in the store, even if the clock does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from itertools import takewhile
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias, TypeVar

import lmdb
import structlog

from grimoire.clock import Clock
from grimoire.errors import NotFoundError, SchemaVersionError, StoreError, ValidationError
from grimoire.ids import new_id
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
from grimoire.stores import graph_codec as codec
from grimoire.stores.graph_codec import Stored

__all__ = ["DEFAULT_MAP_SIZE", "SCHEMA_VERSION", "GraphStore", "topology_curiosity_modifier"]

log = structlog.get_logger()
T = TypeVar("T")
Way: TypeAlias = Literal["out", "in"]

SCHEMA_VERSION = 1
DEFAULT_MAP_SIZE = 256 << 20  # address space only: the file grows with its data
DEFAULT_MAX_MAP_SIZE = 1 << 40
_SCHEMA_KEY = b"schema_version"
_LAST_TX_KEY = b"last_tx"
_DB_FLAGS: dict[str, dict[str, bool]] = {
    "triples": {}, "history": {}, "heads": {},
    "by_subject": {"dupsort": True}, "by_object": {"dupsort": True},
    "by_predicate": {"dupsort": True, "dupfixed": True},
    "by_bucket": {"dupsort": True, "dupfixed": True},
}
_OPEN_BIN = codec.bucket_key(0, None)
_CURIOSITY = {0: 1.0, 1: 1.0, 2: 0.5, 3: 0.25}  # seed 004, "Feeding the Curiosity Scorer"


def topology_curiosity_modifier(distance: int | None) -> float:
    """Curiosity weight of an event at ``distance`` hops from a position (None: unconnected)."""
    return 0.0 if distance is None else _CURIOSITY.get(distance, 0.0)


class _Gate:
    """Counts live transactions, so the map is resized or the env closed only when there are none.

    LMDB forbids ``set_mapsize`` while any transaction of the process is live.
    Transactions never wait for each other here; only resize and close wait.
    """

    def __init__(self) -> None:
        # A plain Lock under the Condition: every call takes it twice, so keep that cheap.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._live = 0
        self._exclusive = False
        self.closed = False

    def enter(self) -> None:
        with self._lock:
            while self._exclusive:
                self._cond.wait()
            if self.closed:
                raise StoreError("graph store is closed")
            self._live += 1

    def leave(self) -> None:
        with self._lock:
            self._live -= 1
            if not self._live and self._exclusive:
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._live:
                self._cond.wait()
        try:
            yield
        finally:
            with self._lock:
                self._exclusive = False
                self._cond.notify_all()


class GraphStore:
    """Bi-temporal triples on LMDB. Open with ``GraphStore.open(path, clock=...)``."""

    def __init__(self, env: Any, dbs: dict[str, Any], path: Path, clock: Clock,
                 max_map_size: int) -> None:
        self._env, self._db, self._path, self._clock = env, dbs, path, clock
        self._max_map_size = max_map_size
        self._map_size: int = env.info()["map_size"]
        self._gate = _Gate()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock,
             map_size: int = DEFAULT_MAP_SIZE,
             max_map_size: int = DEFAULT_MAX_MAP_SIZE) -> GraphStore:
        """Open or create the store in directory ``path``; the map doubles when full."""
        if not 1 << 16 <= map_size <= max_map_size:
            raise ValidationError(f"must be in [65536, max_map_size={max_map_size}]",
                                  field="map_size")
        root = Path(path)
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            env = lmdb.open(str(root), map_size=map_size, max_dbs=len(_DB_FLAGS) + 8,
                            lock=True, subdir=True, readahead=False, mode=0o600)
        except (OSError, lmdb.Error) as exc:
            raise StoreError(f"cannot open graph store at {root}: {exc}") from exc
        try:
            store = cls(env, _prepare(env, root), root, clock, max_map_size)
            log.info("graph.open", path=str(root), schema_version=SCHEMA_VERSION,
                     triples=store.count(), map_size=store._map_size)
        except BaseException:
            env.close()
            raise
        return store

    def close(self) -> None:
        """Close the environment once no call is using it. Idempotent."""
        if self._gate.closed:
            return
        with self._gate.exclusive():
            if self._gate.closed:
                return  # closed by another thread while we waited
            self._gate.closed = True
            self._env.close()
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
            current = self._load(txn, raw_id)
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
        active = None if active_id is None else self._must_load(txn, active_id)
        if active is not None and active.triple.object == fact.object:
            self._put_version(txn, active, _reinforced(active.triple, fact.confidence), now)
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
        raw_id = codec.id_bytes(triple.id)
        txn.put(raw_id, codec.encode_record(triple, 0, now), db=self._db["triples"])
        for entry in codec.index_entries(triple):
            txn.put(entry.key, entry.value, db=self._db[entry.db])
        txn.put(head_key, codec.encode_head(raw_id, fact.valid_from), db=self._db["heads"])
        return AssertResult(triple.id, closed)

    def _close(self, txn: Any, current: Stored, at: int, now: int) -> TemporalTriple:
        closed = replace(current.triple, valid_to=at, superseded_at=now)
        self._put_version(txn, current, closed, now)
        return closed

    def _put_version(self, txn: Any, old: Stored, new: TemporalTriple, now: int) -> None:
        """Keep ``old`` in history, make ``new`` current from ``now``; move its index entries."""
        raw_id = codec.id_bytes(new.id)
        txn.put(codec.history_key(raw_id, old.seq),
                codec.encode_record(old.triple, old.seq, old.since), db=self._db["history"])
        txn.put(raw_id, codec.encode_record(new, old.seq + 1, now), db=self._db["triples"])
        if new.valid_to != old.triple.valid_to:
            for entry in codec.index_entries(old.triple):
                if not txn.delete(entry.key, entry.value, db=self._db[entry.db]):
                    raise StoreError(f"graph store {self._path}: {entry.db} lacks the entry "
                                     f"of triple {new.id}; the indexes are damaged")
            for entry in codec.index_entries(new):
                txn.put(entry.key, entry.value, db=self._db[entry.db])

    # -- point queries -------------------------------------------------------------------------

    def get(self, triple_id: str, *, known_at: int | None = None) -> TemporalTriple:
        """The triple now, or as it stood at transaction time ``known_at``."""
        raw_id = codec.id_bytes(parse_triple_id(triple_id, "id"))
        time = None if known_at is None else parse_time(known_at, "known_at")
        with self._txn() as txn:
            if time is None:
                stored = self._load(txn, raw_id)
                triple = None if stored is None else stored.triple
            else:
                triple = self._version_at(txn, raw_id, time)
        if triple is None:
            raise NotFoundError(f"no triple {triple_id}"
                                + ("" if time is None else f" recorded by {time}"))
        return triple

    def query_at(self, subject: EntityRef, block: int) -> list[TemporalTriple]:
        """Triples about ``subject`` valid at ``block``, as known now."""
        key = codec.entity_key(parse_entity_ref(subject, "subject"))
        at = codec.block_bytes(parse_block(block, "block"))
        with self._txn() as txn:
            values = takewhile(lambda v: v[:8] <= at, self._dups(txn, "by_subject", key))
            ids = [v[16:32] for v in values if at < v[8:16]]
            return _ordered(self._must_load(txn, i).triple for i in ids)

    def query_as_known_at(self, subject: EntityRef, time: int) -> list[TemporalTriple]:
        """Triples about ``subject`` as they stood at transaction time ``time``, closed or not."""
        key = codec.entity_key(parse_entity_ref(subject, "subject"))
        known_at = parse_time(time, "time")
        with self._txn() as txn:
            versions = (self._version_at(txn, v[16:32], known_at)
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
        with self._txn() as txn:
            values = self._dups(txn, "by_predicate", key)
            if at is not None:
                values = (v for v in takewhile(lambda v: v[:8] <= at, values) if at < v[8:16])
            ids = [v[16:32] for _, v in zip(range(cap), values, strict=False)]
            return [self._must_load(txn, i).triple for i in ids]

    def range_scan(self, from_block: int, to_block: int, *,
                   limit: int | None = None) -> list[TemporalTriple]:
        """Triples whose valid interval meets ``[from_block, to_block]``, in valid_from order."""
        low, high = parse_block(from_block, "from_block"), parse_block(to_block, "to_block")
        if high < low:
            raise ValidationError(f"{high} is before from_block {low}", field="to_block")
        lo, hi = codec.block_bytes(low), codec.block_bytes(high)
        cap = parse_limit(limit)
        with self._txn() as txn:
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
            return [self._must_load(txn, v[16:32]).triple for v in hits[:cap]]

    # -- traversal -----------------------------------------------------------------------------

    def k_hop_neighbors(self, subject: EntityRef, max_hops: int, block: int,
                        direction: Direction = "out") -> list[Neighbor]:
        """Entities within ``max_hops`` entity edges valid at ``block``, nearest first (BFS)."""
        start = codec.entity_key(parse_entity_ref(subject, "subject"))
        hops, at = parse_hops(max_hops), parse_block(block, "block")
        way = parse_direction(direction)
        with self._txn() as txn:
            found = list(self._bfs(txn, [start], hops, at, way))
        return [Neighbor(codec.decode_entity_key(key), hop, predicate.decode(), edge_way)
                for key, hop, predicate, edge_way in found]

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
        with self._txn() as txn:
            return next((hop for key, hop, _, _ in self._bfs(txn, starts, hops, at, way)
                         if key == goal), None)

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

    def _bfs(self, txn: Any, starts: list[bytes], max_hops: int, block: int,
             direction: Direction) -> Iterator[tuple[bytes, int, bytes, Way]]:
        """Yield ``(entity key, hop, predicate, way)`` for each entity first reached by BFS."""
        at = codec.block_bytes(block)
        ways: list[tuple[Any, Way]] = []
        if direction != "in":
            ways.append((txn.cursor(self._db["by_subject"]), "out"))
        if direction != "out":
            ways.append((txn.cursor(self._db["by_object"]), "in"))
        visited = set(starts)
        frontier = list(dict.fromkeys(starts))
        for hop in range(1, max_hops + 1):
            reached: list[bytes] = []
            for key in frontier:
                for cursor, way in ways:
                    if not cursor.set_key(key):
                        continue
                    # Values sort by valid_from: stop at the first edge that starts after block.
                    for v in cursor.iternext_dup(keys=False, values=True):
                        if v[:8] > at:
                            break
                        end = 33 + v[32]
                        other = v[end:]
                        if at < v[8:16] and other and other not in visited:
                            visited.add(other)
                            reached.append(other)
                            yield other, hop, v[33:end], way
            if not reached:
                return
            frontier = reached

    # -- status --------------------------------------------------------------------------------

    def count(self) -> int:
        """Number of triples (open and closed; versions not counted)."""
        with self._txn() as txn:
            return int(txn.stat(self._db["triples"])["entries"])

    def stats(self) -> dict[str, int]:
        """Counts and sizes for ``status``."""
        with self._txn() as txn:
            triples = txn.stat(self._db["triples"])["entries"]
            cursor = txn.cursor(self._db["by_bucket"])
            open_ = cursor.count() if cursor.set_key(_OPEN_BIN) else 0
            subjects = sum(1 for _ in txn.cursor(self._db["by_subject"]).iternext_nodup())
            info, psize = self._env.info(), self._env.stat()["psize"]
            return {
                "triples": triples, "open": open_, "closed": triples - open_,
                "versions": txn.stat(self._db["history"])["entries"], "subjects": subjects,
                "last_tx": codec.read_u64(txn.get(_LAST_TX_KEY, db=self._db["meta"])),
                "map_size": info["map_size"], "used_bytes": (info["last_pgno"] + 1) * psize,
                "schema_version": SCHEMA_VERSION,
            }

    # -- transactions ----------------------------------------------------------------------------

    @contextmanager
    def _txn(self, *, write: bool = False) -> Iterator[Any]:
        self._gate.enter()
        try:
            with self._env.begin(write=write) as txn:
                yield txn
        except lmdb.MapFullError:
            raise  # _write grows the map and retries
        except lmdb.Error as exc:
            raise StoreError(f"graph store {self._path}: {exc}") from exc
        finally:
            self._gate.leave()

    def _write(self, action: Callable[[Any, int], T]) -> T:
        """Run ``action(txn, now)`` in one durable write transaction, growing the map as needed."""
        while True:
            seen = self._map_size
            try:
                with self._txn(write=True) as txn:
                    last = codec.read_u64(txn.get(_LAST_TX_KEY, db=self._db["meta"]))
                    now = max(int(self._clock()), last)  # transaction time never goes back
                    result = action(txn, now)
                    txn.put(_LAST_TX_KEY, now.to_bytes(8, "big"), db=self._db["meta"])
                return result
            except lmdb.MapFullError:
                self._grow(seen)

    def _grow(self, seen: int) -> None:
        with self._gate.exclusive():
            if self._map_size > seen:
                return  # another writer grew it while we waited
            new = seen * 2
            if new > self._max_map_size:
                raise StoreError(f"graph store {self._path} is full at map_size {seen} bytes; "
                                 f"max_map_size is {self._max_map_size}: raise it to continue")
            try:
                self._env.set_mapsize(new)
            except lmdb.Error as exc:
                raise StoreError(f"graph store {self._path}: cannot grow map: {exc}") from exc
            self._map_size = new
        log.info("graph.map.grow", path=str(self._path), old=seen, new=new)

    def _dups(self, txn: Any, db: str, key: bytes) -> Iterator[bytes]:
        cursor = txn.cursor(self._db[db])
        if cursor.set_key(key):
            yield from cursor.iternext_dup(keys=False, values=True)

    def _load(self, txn: Any, raw_id: bytes) -> Stored | None:
        raw = txn.get(raw_id, db=self._db["triples"])
        return None if raw is None else codec.decode_record(raw)

    def _must_load(self, txn: Any, raw_id: bytes) -> Stored:
        stored = self._load(txn, raw_id)
        if stored is None:
            raise StoreError(f"graph store {self._path}: index points at missing triple "
                             f"{codec.id_str(raw_id)}")
        return stored

    def _version_at(self, txn: Any, raw_id: bytes, time: int) -> TemporalTriple | None:
        """The version current at transaction time ``time``: binary search over its history."""
        raw = txn.get(raw_id, db=self._db["triples"])
        if raw is None:
            return None
        seq, since, recorded_at = codec.peek_record(raw)
        if time < recorded_at:
            return None
        if since <= time:
            return codec.decode_record(raw).triple
        history = self._db["history"]
        low, high = 0, seq - 1  # version 0 starts at recorded_at <= time, so one qualifies
        while low < high:
            mid = (low + high + 1) // 2
            if codec.peek_record(txn.get(codec.history_key(raw_id, mid), db=history))[1] <= time:
                low = mid
            else:
                high = mid - 1
        return codec.decode_record(txn.get(codec.history_key(raw_id, low), db=history)).triple


def _prepare(env: Any, root: Path) -> dict[str, Any]:
    """Check or write the schema version and open every sub-database, in one transaction."""
    try:
        with env.begin(write=True) as txn:
            meta = env.open_db(b"meta", txn=txn)
            raw = txn.get(_SCHEMA_KEY, db=meta)
            version = None if raw is None else int(raw)
            if version is not None and version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"graph store at {root} has schema version {version}, newer than this "
                    f"Grimoire knows ({SCHEMA_VERSION}); upgrade grimoire-memory to open it "
                    "(the store was left untouched)")
            if version is not None and version < SCHEMA_VERSION:
                raise SchemaVersionError(f"graph store at {root} has schema version {version} "
                                         f"and no migration to {SCHEMA_VERSION} exists")
            dbs = {name: env.open_db(name.encode(), txn=txn, **flags)
                   for name, flags in _DB_FLAGS.items()}
            if version is None:
                txn.put(_SCHEMA_KEY, str(SCHEMA_VERSION).encode(), db=meta)
    except (lmdb.Error, ValueError) as exc:
        raise StoreError(f"cannot prepare graph store at {root}: {exc}") from exc
    return {**dbs, "meta": meta}


def _reinforced(triple: TemporalTriple, confidence: float) -> TemporalTriple:
    # Independent evidence combines as a noisy-OR: never lower, never above 1.
    combined = 1.0 - (1.0 - triple.confidence) * (1.0 - confidence)
    return replace(triple, confidence=min(1.0, combined),
                   evidence_count=triple.evidence_count + 1)


def _ordered(triples: Iterable[TemporalTriple]) -> list[TemporalTriple]:
    return sorted(triples, key=lambda t: (t.predicate, t.valid_from, t.recorded_at, t.id))
