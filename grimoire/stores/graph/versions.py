"""Triple versions in LMDB: load the current one or the one known at a time, write new ones.

Owns the mechanics of versioning inside a transaction the caller opened: a
new triple is written with every index entry that points at it; a changed
triple keeps its previous version in ``history`` (keyed by id and ``seq``)
and, when its valid interval changed, has its index entries moved. Each
``by_object`` entry it puts or deletes is also handed to ``queue`` as an
``EdgeChange``, which the store applies to its in-memory adjacency after
the transaction commits. It must
not decide which triple to close or reinforce (the temporal rules are
``graph.py``'s), open transactions, or import other stores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from grimoire.errors import StoreError
from grimoire.records.graph import TemporalTriple
from grimoire.stores.graph import codec
from grimoire.stores.graph.codec import Stored

__all__ = ["EdgeChange", "Versions"]


class EdgeChange(NamedTuple):
    """An entity edge put into (``added``) or deleted from ``by_object``, as stored there."""

    added: bool
    object_key: bytes
    value: bytes


class Versions:
    """Reads and writes triple versions through the sub-databases ``dbs``."""

    def __init__(self, dbs: dict[str, Any], path: Path,
                 queue: Callable[[EdgeChange], None]) -> None:
        self._db, self._path, self._queue = dbs, path, queue

    def load(self, txn: Any, raw_id: bytes) -> Stored | None:
        """The current version of a triple, or None if there is no such triple."""
        raw = txn.get(raw_id, db=self._db["triples"])
        return None if raw is None else codec.decode_record(raw)

    def must_load(self, txn: Any, raw_id: bytes) -> Stored:
        """The current version of a triple an index points at (missing: damaged store)."""
        stored = self.load(txn, raw_id)
        if stored is None:
            raise StoreError(f"graph store {self._path}: index points at missing triple "
                             f"{codec.id_str(raw_id)}")
        return stored

    def at(self, txn: Any, raw_id: bytes, time: int) -> TemporalTriple | None:
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

    def put_new(self, txn: Any, triple: TemporalTriple, now: int) -> None:
        """Write the first version of ``triple`` and its index entries."""
        txn.put(codec.id_bytes(triple.id), codec.encode_record(triple, 0, now),
                db=self._db["triples"])
        self._put_entries(txn, triple)

    def put_version(self, txn: Any, old: Stored, new: TemporalTriple, now: int) -> None:
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
                if entry.db == "by_object":
                    self._queue(EdgeChange(False, entry.key, entry.value))
            self._put_entries(txn, new)

    def _put_entries(self, txn: Any, triple: TemporalTriple) -> None:
        for entry in codec.index_entries(triple):
            txn.put(entry.key, entry.value, db=self._db[entry.db])
            if entry.db == "by_object":
                self._queue(EdgeChange(True, entry.key, entry.value))
