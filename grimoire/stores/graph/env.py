"""The graph store's LMDB environment: opening, schema check, transactions, map growth.

Owns the ``lmdb.Environment`` and its sub-databases, the schema version in
``meta``, the transaction-time bookkeeping (``last_tx``: transaction time
never goes backwards in the store, even if the clock does) and the map: a
write that finds it full doubles it, once no transaction of the process is
live, and runs again. Every call opens a short transaction, so readers on
any thread never block the writer.

Writes are serialised by a lock that also covers ``on_commit``: items a
write ``queue``s reach ``on_commit`` only once its transaction has committed,
in commit order, and are dropped if it rolls back or is retried after a full
map. The store uses this to keep in-memory mirrors equal to what is durable.

``GraphEnv.open(read_only=True)`` opens an existing environment with LMDB's
``readonly`` (and ``lock=True``, so this process's read transactions take
reader slots in ``lock.mdb`` as the writer's do: a reader beside a running
daemon sees each of its commits once committed, and the daemon never reuses
pages a live read transaction still sees). Nothing is written: no schema
record, no map growth; when the writer has grown the map past this process's
mapping, a transaction adopts the new size (``set_mapsize(0)``) and retries.

It must not know what a triple is, decide temporal rules or encode records
(``graph.py`` and ``graph_codec.py`` do), nor import other stores.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from grimoire.clock import Clock
from grimoire.errors import NotAvailableError, SchemaVersionError, StoreError, ValidationError
from grimoire.logs import get_logger
from grimoire.stores.fsync import fsync_path
from grimoire.stores.graph.codec import read_u64

__all__ = ["DEFAULT_MAP_SIZE", "DEFAULT_MAX_MAP_SIZE", "SCHEMA_VERSION", "GraphEnv"]

log = get_logger(__name__)
T = TypeVar("T")

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


class GraphEnv:
    """One LMDB environment with the graph's sub-databases (``db[name]``)."""

    def __init__(self, env: Any, dbs: dict[str, Any], path: Path, clock: Clock,
                 max_map_size: int, read_only: bool = False) -> None:
        """Use ``GraphEnv.open``."""
        self.db, self.path = dbs, path
        self.read_only = read_only
        self._env, self._clock = env, clock
        self._max_map_size = max_map_size
        self.map_size: int = env.info()["map_size"]
        self._gate = _Gate()
        self._writer = threading.Lock()
        self._queued: list[Any] | None = None  # a list only while a write runs
        self.on_commit: Callable[[list[Any]], None] | None = None
        self.redo: Any = None  # stores.redo.LmdbRedo of a writable open, set by attach

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock, map_size: int,
             max_map_size: int, read_only: bool = False) -> GraphEnv:
        """Open or create the environment in directory ``path`` and check its schema.

        ``read_only``: open an existing environment without writing (module doc)."""
        if not 1 << 16 <= map_size <= max_map_size:
            raise ValidationError(f"must be in [65536, max_map_size={max_map_size}]",
                                  field="map_size")
        root = Path(path)
        if read_only:
            return cls._open_read_only(root, clock=clock, map_size=map_size,
                                       max_map_size=max_map_size)
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            env = lmdb.open(str(root), map_size=map_size, max_dbs=len(_DB_FLAGS) + 8,
                            lock=True, subdir=True, readahead=False, mode=0o600)
        except (OSError, lmdb.Error) as exc:
            raise StoreError(f"cannot open graph store at {root}: {exc}") from exc
        try:
            return cls(env, _prepare(env, root), root, clock, max_map_size)
        except BaseException:
            env.close()
            raise

    @classmethod
    def _open_read_only(cls, root: Path, *, clock: Clock, map_size: int,
                        max_map_size: int) -> GraphEnv:
        if not (root / "data.mdb").is_file():
            raise StoreError(f"no graph store at {root}: nothing to read (check --data DIR)")
        try:
            # LMDB maps at least what the file holds, whatever map_size says.
            env = lmdb.open(str(root), readonly=True, lock=True, subdir=True, create=False,
                            readahead=False, max_dbs=len(_DB_FLAGS) + 8, map_size=map_size)
        except lmdb.Error as exc:
            raise StoreError(f"cannot open graph store at {root} read-only: {exc}") from exc
        try:
            return cls(env, _check_read_only(env, root), root, clock, max_map_size,
                       read_only=True)
        except BaseException:
            env.close()
            raise

    @property
    def closed(self) -> bool:
        return self._gate.closed

    def close(self) -> bool:
        """Close once no transaction is live; False if it was already closed. Idempotent."""
        if self._gate.closed:
            return False
        with self._gate.exclusive():
            if self._gate.closed:
                return False  # closed by another thread while we waited
            self._gate.closed = True
            self._env.close()
            if self.redo is not None:
                self.redo.close()
        return True

    def check_open(self) -> None:
        """Raise StoreError if the store is closed (for calls that need no transaction)."""
        if self._gate.closed:
            raise StoreError("graph store is closed")

    @contextmanager
    def txn(self, *, write: bool = False) -> Iterator[Any]:
        """A short transaction; lmdb errors become StoreError (MapFullError is left to write)."""
        if write and self.read_only:
            raise NotAvailableError(f"graph store {self.path} was opened read-only: "
                                    "it cannot be written")
        self._gate.enter()
        try:
            with self._begin(write) as txn:
                yield txn
        except lmdb.MapFullError:
            raise  # write grows the map and retries
        except lmdb.Error as exc:
            raise StoreError(f"graph store {self.path}: {exc}") from exc
        finally:
            self._gate.leave()

    def _begin(self, write: bool) -> Any:
        try:
            return self._env.begin(write=write)
        except lmdb.MapResizedError:
            # The writer (another process) grew the map past ours: adopt its size. LMDB
            # allows set_mapsize only with no live transaction in this process; a reader
            # that cannot have it now fails this call with a StoreError and the next one
            # retries.
            self._gate.leave()
            try:
                with self._gate.exclusive():
                    self._env.set_mapsize(0)
                    self.map_size = self._env.info()["map_size"]
            finally:
                self._gate.enter()
            return self._env.begin(write=write)

    def write(self, action: Callable[[Any, int], T]) -> T:
        """Run ``action(txn, now)`` in one durable write transaction, growing the map as needed.

        ``now`` is the transaction time: the clock, but never before the last
        transaction's. ``action`` may run more than once (after a full map),
        so it must not have effects outside ``txn`` except through ``queue``.
        """
        if self.read_only:
            raise NotAvailableError(f"graph store {self.path} was opened read-only: "
                                    "it cannot be written")
        with self._writer:
            while True:
                seen = self.map_size
                self._queued = []
                redo, appended = self.redo, None
                try:
                    with self.txn(write=True) as txn:
                        now = max(int(self._clock()), self.last_tx(txn))
                        # With a redo log, the action's puts and deletes are recorded and
                        # appended (durable) just before the commit (``stores.redo``).
                        target = txn if redo is None else redo.recording(txn)
                        result = action(target, now)
                        target.put(_LAST_TX_KEY, now.to_bytes(8, "big"), db=self.db["meta"])
                        if redo is not None:
                            appended = redo.before_commit(txn)
                    break
                except lmdb.MapFullError:
                    if redo is not None:
                        redo.abort(appended)
                    self._grow(seen)  # the aborted attempt's queue is dropped just below
                except BaseException:
                    if redo is not None:
                        redo.abort(appended)
                    raise
                finally:
                    queued, self._queued = self._queued, None
            if queued and self.on_commit is not None:
                self.on_commit(queued)  # still under the lock: mirrors see commits in order
            return result

    def rewrite(self) -> int:
        """Copy every live record into a fresh file and put it in place of ``data.mdb``
        (``forget``): LMDB keeps deleted records' bytes in its free pages, and its own
        compacting copy crashes on this store's layout with py-lmdb 3.0 (``portable.
        backup``), so the copy is made record by record. The new file is fsync'd, then
        renamed over the old one (atomic: a crash leaves one or the other, whole), and the
        environment reopened. Returns the records copied."""
        if self.read_only:
            raise NotAvailableError(f"graph store {self.path} was opened read-only")
        fresh = self.path.with_name(self.path.name + ".rewrite")
        with self._writer, self._gate.exclusive():
            if fresh.exists():
                shutil.rmtree(fresh)
            copied = 0
            try:
                out = lmdb.open(str(fresh), map_size=self.map_size, max_dbs=len(_DB_FLAGS) + 8,
                                lock=True, subdir=True, readahead=False, mode=0o600)
                try:
                    with self._env.begin() as src, out.begin(write=True) as dst:
                        for name, flags in [("meta", {}), *_DB_FLAGS.items()]:
                            target = out.open_db(name.encode(), txn=dst, **flags)
                            for key, value in src.cursor(self.db[name]):
                                dst.put(key, value, db=target, dupdata=True)
                                copied += 1
                    out.sync(True)
                finally:
                    out.close()
                self._env.close()
                os.replace(fresh / "data.mdb", self.path / "data.mdb")
                fsync_path(self.path)
                self._env = lmdb.open(str(self.path), map_size=self.map_size,
                                      max_dbs=len(_DB_FLAGS) + 8, lock=True, subdir=True,
                                      readahead=False, mode=0o600)
                self.db.clear()
                self.db.update(_prepare(self._env, self.path))
            except (OSError, lmdb.Error) as exc:
                raise StoreError(f"graph store {self.path}: rewrite failed: {exc}") from exc
            finally:
                shutil.rmtree(fresh, ignore_errors=True)
        log.info("graph.rewrite", path=str(self.path), records=copied)
        return copied

    def queue(self, item: Any) -> None:
        """Hand ``item`` to ``on_commit`` if the running write commits (only inside ``write``)."""
        if self._queued is None:
            raise StoreError("graph store: queue() outside a write")
        self._queued.append(item)

    def last_tx(self, txn: Any) -> int:
        """Transaction time of the last write (0 for a new store)."""
        return read_u64(txn.get(_LAST_TX_KEY, db=self.db["meta"]))

    def usage(self) -> dict[str, int]:
        """``map_size`` (address space) and ``used_bytes`` (pages in use)."""
        info, psize = self._env.info(), self._env.stat()["psize"]
        return {"map_size": info["map_size"], "used_bytes": (info["last_pgno"] + 1) * psize}

    def _grow(self, seen: int) -> None:
        with self._gate.exclusive():
            if self.map_size > seen:
                return  # another writer grew it while we waited
            new = seen * 2
            if new > self._max_map_size:
                raise StoreError(f"graph store {self.path} is full at map_size {seen} bytes; "
                                 f"max_map_size is {self._max_map_size}: raise it to continue")
            try:
                self._env.set_mapsize(new)
            except lmdb.Error as exc:
                raise StoreError(f"graph store {self.path}: cannot grow map: {exc}") from exc
            self.map_size = new
        log.info("graph.map.grow", path=str(self.path), old=seen, new=new)


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


def _check_read_only(env: Any, root: Path) -> dict[str, Any]:
    """The read-only open's check: the schema version, then every sub-database, no writes.

    Sub-databases are opened outside any transaction of ours: a handle opened inside a
    read transaction is not valid in the next one (py-lmdb 3, LMDB 0.9: ``mdb_stat``
    then fails with EINVAL)."""
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin(write=False) as txn:
            raw = txn.get(_SCHEMA_KEY, db=meta)
        version = None if raw is None else int(raw)
        if version != SCHEMA_VERSION:
            if version is not None and version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"graph store at {root} has schema version {version}, newer than this "
                    f"Grimoire knows ({SCHEMA_VERSION}); upgrade grimoire-memory to read it")
            raise StoreError(f"graph store at {root} has schema version {version}, not "
                             f"{SCHEMA_VERSION}: a read-only open cannot prepare it; the "
                             "daemon does on its next start (grimoire run)")
        dbs = {name: env.open_db(name.encode(), create=False, **flags)
               for name, flags in _DB_FLAGS.items()}
    except lmdb.NotFoundError as exc:
        raise StoreError(f"graph store at {root} lacks a sub-database ({exc}): the daemon "
                         "creates it on its next start (grimoire run)") from exc
    except (lmdb.Error, ValueError) as exc:
        raise StoreError(f"cannot read graph store at {root}: {exc}") from exc
    return {**dbs, "meta": meta}
