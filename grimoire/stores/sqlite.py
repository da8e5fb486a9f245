"""The one way Grimoire opens SQLite: ``connect(path)``, the one-writer/many-readers
``Connections`` holder, and the apsw error boundary.

Owns connection settings (apsw best practice, WAL, busy timeout, durability,
foreign keys, sqlite-vec), which connection a thread uses, and the
conversion of apsw errors into ``StoreError``. It must not know any table:
schemas belong to the stores.

Why each setting:

- apsw's best-practice connection settings are applied to *this* connection
  only (``apsw.bestpractice.apply`` would register process-wide hooks that
  change every other apsw user in the process, which a library must not do).
- WAL: readers never block the single writer and the writer never blocks them.
- ``synchronous=FULL``: in WAL mode each COMMIT fsyncs the WAL, so a
  committed (acknowledged) write survives a power loss. NORMAL only survives
  a process crash; ``scripts/bench_stores.py --part semantic`` measures what FULL costs.
- busy timeout: a second process (the CLI) may hold the write lock briefly.

Read-only stores (``Connections(read_only=True)``, a reader beside a running
daemon or with none) never write. How they connect depends on the ``-wal``
file: when it exists (a daemon, or any connection, has the database open) the
connections are ``SQLITE_OPEN_READONLY`` and share the writer's ``-shm`` index
(SQLite needs it to read a WAL database; a read-only connection takes its read
marks there, as any reader does). When it does not exist nobody has the file
open, and a read-only connection would create ``-wal`` and ``-shm`` and, unable
to checkpoint, leave them behind; so it opens read-write with ``PRAGMA
query_only`` (no statement can write) and, as the last connection, lets SQLite
remove both files on close: the directory is left as it was found.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import apsw
import apsw.bestpractice
import sqlite_vec

from grimoire.errors import NotAvailableError, StoreError

__all__ = ["Connections", "Synchronous", "connect", "reader_mode", "scrub", "store_errors"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

# Applied one by one to our connection; apsw.bestpractice.library_logging is process-global
# left to the entrypoint.
_BEST_PRACTICE = (
    apsw.bestpractice.connection_wal,
    apsw.bestpractice.connection_enable_foreign_keys,
    apsw.bestpractice.connection_dqs,
    apsw.bestpractice.connection_optimize,
    apsw.bestpractice.connection_recursive_triggers,
)


_READERS = itertools.count(1)  # a serial per reader connection, for ``read_mark``


def connect(
    path: Path | str,
    *,
    readonly: bool = False,
    query_only: bool = False,
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 5_000,
    vec: bool = True,
) -> apsw.Connection:
    """Open ``path`` with Grimoire's settings and sqlite-vec loaded.

    ``readonly`` connections are for reader threads: they can never write by
    mistake. ``query_only`` opens an existing file read-write (never creating
    it) with every write refused by SQLite (see the module doc: a reader of a
    database nobody else has open). Raises StoreError if the file cannot be
    opened or configured.
    """
    if synchronous not in _SYNCHRONOUS:
        raise StoreError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}")
    if readonly:
        flags = apsw.SQLITE_OPEN_READONLY
    elif query_only:
        flags = apsw.SQLITE_OPEN_READWRITE
    else:
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    with store_errors(f"open {path}"):
        conn = apsw.Connection(str(path), flags=flags)
        try:
            if query_only:
                conn.pragma("query_only", True)  # before any setting could write
            conn.set_busy_timeout(busy_timeout_ms)
            for setting in _BEST_PRACTICE:
                setting(conn)
            conn.pragma("synchronous", synchronous)
            if not (readonly or query_only):
                # After a checkpoint, truncate a WAL that a big batch grew, instead of
                # keeping its high-water size on disk forever.
                conn.pragma("journal_size_limit", 64 * 1024 * 1024)
            # apsw's `with conn:` then opens writes with BEGIN IMMEDIATE, so a
            # transaction never has to upgrade a read lock (and deadlock) later.
            conn.transaction_mode = "IMMEDIATE"
            if vec:
                conn.enable_load_extension(True)
                conn.load_extension(sqlite_vec.loadable_path())
                conn.enable_load_extension(False)
        except BaseException:
            conn.close()
            raise
    return conn


def reader_mode(path: Path | str) -> Literal["readonly", "query_only"]:
    """How a reader that must not change the directory connects (module doc)."""
    return "readonly" if Path(f"{path}-wal").exists() else "query_only"


def scrub(conn: apsw.Connection, *, attempts: int = 50) -> None:
    """Leave no deleted row's bytes in the file or its WAL (``forget``): rebuild the file with
    ``secure_delete`` on (``VACUUM`` writes only live rows, so the free pages and free
    blocks that kept deleted cells are gone), then checkpoint the WAL and truncate it to
    zero bytes, which needs a moment with no reader inside a read transaction (retried).

    Outside any transaction; the caller holds the write connection. StoreError if the
    WAL could not be emptied."""
    import time

    with store_errors("scrub"):
        conn.pragma("secure_delete", True)
        conn.execute("VACUUM")
        for attempt in range(attempts):
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
            if not busy:
                return
            time.sleep(0.01 * (attempt + 1))
    raise StoreError("sqlite: scrub could not empty the write-ahead log: a reader kept a "
                     "read transaction open; run forget again (it resumes)")


@contextmanager
def store_errors(action: str) -> Iterator[None]:
    """Convert apsw errors raised inside the block into StoreError naming ``action``."""
    try:
        yield
    except apsw.Error as exc:
        raise StoreError(f"sqlite: {action} failed: {type(exc).__name__}: {exc}") from exc


class Connections:
    """One write connection behind a lock, and one read-only connection per reader thread.

    The daemon has one writer thread that owns every mutation and reader
    threads that query concurrently. In WAL mode readers never block the
    writer and see the last committed state; so each reader thread gets its
    own read-only connection (opened on first use), and the single write
    connection is only used inside ``transaction()``, which holds a lock so a
    stray second writer waits instead of interleaving with the first.

    A thread *inside* a transaction reads through the write connection, so it
    sees its own uncommitted writes (a curator cycle that adds an entry and
    then looks it up in the same batch finds it).

    ``queue(item)`` hands an item to ``on_commit`` once the outermost
    transaction has committed; items queued in a transaction or savepoint
    that rolls back are dropped. Stores use it to update in-memory mirrors
    only with what is durable.

    ``read_only=True``: no write connection at all (``writer`` and
    ``transaction()`` raise NotAvailableError); every thread reads through its
    own connection, opened as ``reader_mode`` says when the holder is created.
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 5_000,
        on_commit: Callable[[list[Any]], None] | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._busy_timeout_ms = busy_timeout_ms
        self._query_only = read_only and reader_mode(path) == "query_only"
        self._writer: apsw.Connection | None = None
        if not read_only:
            self._writer = connect(path, synchronous=synchronous,
                                   busy_timeout_ms=busy_timeout_ms)
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0
        self._queued: list[Any] = []
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self.on_commit = on_commit
        # A redo log (``stores.redo.StatementRedo``) records each outermost transaction's
        # write statements and appends them, durable, just before its commit.
        self.redo: Any = None

    @property
    def writer(self) -> apsw.Connection:
        """The write connection, for set-up work such as migrations (not for readers)."""
        self._check_open()
        return self._write_connection()

    def _write_connection(self) -> apsw.Connection:
        if self._writer is None:
            raise NotAvailableError(f"sqlite store {self.path} was opened read-only: "
                                    "it cannot be written")
        return self._writer

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"sqlite store {self.path} is closed")

    def in_transaction(self) -> bool:
        """True when the calling thread is inside ``transaction()``."""
        return self._owner == threading.get_ident()

    def read_mark(self, counter: Callable[[apsw.Connection], Any] | None = None
                  ) -> tuple[int, int] | None:
        """A token that changes whenever what ``read()`` shows may have changed: (the calling
        thread's reader, its ``PRAGMA data_version``, which moves with every commit of
        another connection, the writer's included). A caller may keep what it read under
        the token and reuse it while the token is unchanged. None inside a transaction (the
        writer's own uncommitted writes move no counter): read afresh then.

        ``counter`` narrows it: a value the store's own triggers move with every change to
        what the caller keeps (read through the same reader), in place of data_version."""
        if self.in_transaction():
            return None
        conn = self.read()
        version = (conn.execute("PRAGMA data_version").get if counter is None
                   else counter(conn))
        return int(self._local.serial), int(version)

    def read(self) -> apsw.Connection:
        """The connection the calling thread should read through."""
        self._check_open()
        if self.in_transaction():
            return self._write_connection()
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, readonly=not self._query_only,
                           query_only=self._query_only, busy_timeout_ms=self._busy_timeout_ms)
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    self._check_open()
                self._readers.append(conn)
            self._local.conn = conn
            self._local.serial = next(_READERS)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error); nested calls are savepoints.

        Commit is durable before this returns (synchronous=FULL).
        """
        with self._lock:
            self._check_open()
            writer = self._write_connection()
            outer = self._depth == 0
            mark = len(self._queued)
            self._depth += 1
            self._owner = threading.get_ident()
            redo = self.redo if outer else None
            appended = None
            try:
                if redo is not None:
                    redo.begin()
                with writer:  # BEGIN IMMEDIATE at the top, SAVEPOINT when nested
                    yield writer
                    if redo is not None:  # its record appended, durable, before the commit
                        appended = redo.before_commit()
            except BaseException:
                del self._queued[mark:]
                if redo is not None:
                    redo.abort(appended)
                raise
            finally:
                self._depth -= 1
                if outer:
                    self._owner = None
            if outer and self._queued:
                items, self._queued = self._queued, []
                if self.on_commit is not None:
                    self.on_commit(items)

    def scrub(self) -> None:
        """``scrub`` the file through the write connection, between transactions."""
        with self._lock:
            self._check_open()
            if self._depth:
                raise StoreError("scrub() inside a transaction")
            scrub(self._write_connection())

    def queue(self, item: Any) -> None:
        """Queue ``item`` for ``on_commit`` (only inside ``transaction()``)."""
        if not self.in_transaction():
            raise StoreError("queue() outside a transaction")
        self._queued.append(item)

    def close(self) -> None:
        """Close every connection (idempotent). Waits for a running transaction."""
        with self._lock, self._readers_lock:
            if self._closed:
                return
            self._closed = True
            with store_errors(f"close {self.path}"):
                for conn in self._readers:
                    conn.close()
                self._readers.clear()
                if self._writer is not None:
                    # Refresh planner statistics the session asked for (apsw best practice).
                    self._writer.pragma("optimize")
                    self._writer.close()
                if self.redo is not None:
                    self.redo.close()
