"""connect() settings, the apsw error boundary, and the one-writer/many-readers holder."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from grimoire.errors import StoreError
from grimoire.stores.sqlite import Connections, connect, store_errors


def test_connect_applies_durable_wal_settings_and_loads_sqlite_vec(tmp_path: Path) -> None:
    """One connect(): WAL, synchronous=FULL, foreign keys, busy timeout, vec0 available."""
    conn = connect(tmp_path / "a.sqlite")
    try:
        assert conn.pragma("journal_mode") == "wal"
        assert conn.pragma("synchronous") == 2  # FULL
        assert conn.pragma("foreign_keys") == 1
        assert conn.pragma("busy_timeout") == 5000
        assert conn.transaction_mode == "IMMEDIATE"
        assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v0.1")
        # Loading further extensions was switched back off after sqlite-vec.
        with pytest.raises(apsw.Error):
            conn.load_extension("/nonexistent/ext.so")
    finally:
        conn.close()


def test_connect_synchronous_normal_is_selectable(tmp_path: Path) -> None:
    conn = connect(tmp_path / "a.sqlite", synchronous="NORMAL")
    try:
        assert conn.pragma("synchronous") == 1
    finally:
        conn.close()
    with pytest.raises(StoreError, match="synchronous"):
        connect(tmp_path / "a.sqlite", synchronous="SOMETIMES")  # type: ignore[arg-type]


def test_readonly_connection_refuses_writes_as_store_error(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    rw = connect(path)
    rw.execute("CREATE TABLE t (x INTEGER)")
    ro = connect(path, readonly=True)
    try:
        with pytest.raises(StoreError, match="ReadOnlyError") as info, store_errors("write t"):
            ro.execute("INSERT INTO t VALUES (1)")
        assert isinstance(info.value.__cause__, apsw.ReadOnlyError)
        assert "write t" in str(info.value)
    finally:
        ro.close()
        rw.close()


def test_connect_to_unopenable_path_is_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="open"):
        connect(tmp_path / "missing-dir" / "a.sqlite")


def _table(db: Connections) -> None:
    with db.transaction() as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")


def _values(conn: apsw.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT x FROM t ORDER BY x")]


def test_transaction_commits_and_hands_queued_items_to_on_commit(tmp_path: Path) -> None:
    seen: list[list[object]] = []
    db = Connections(tmp_path / "a.sqlite", on_commit=seen.append)
    _table(db)
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        db.queue("one")
        assert seen == []  # nothing is announced before COMMIT
    assert seen == [["one"]]
    assert _values(db.read()) == [1]
    db.close()


def test_rollback_drops_writes_and_queued_items(tmp_path: Path) -> None:
    seen: list[list[object]] = []
    db = Connections(tmp_path / "a.sqlite", on_commit=seen.append)
    _table(db)
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        db.queue("lost")
        raise RuntimeError("boom")
    assert seen == []
    assert _values(db.read()) == []
    db.close()


def test_nested_transaction_is_a_savepoint(tmp_path: Path) -> None:
    """A failed inner block undoes only its own rows and queued items."""
    seen: list[list[object]] = []
    db = Connections(tmp_path / "a.sqlite", on_commit=seen.append)
    _table(db)
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        db.queue("outer")
        with pytest.raises(ValueError), db.transaction():
            conn.execute("INSERT INTO t VALUES (2)")
            db.queue("inner")
            raise ValueError("inner fails")
        conn.execute("INSERT INTO t VALUES (3)")
    assert _values(db.read()) == [1, 3]
    assert seen == [["outer"]]
    db.close()


def test_queue_outside_a_transaction_is_refused(tmp_path: Path) -> None:
    db = Connections(tmp_path / "a.sqlite")
    with pytest.raises(StoreError):
        db.queue("x")
    db.close()


def test_writer_thread_reads_its_own_uncommitted_rows_other_threads_do_not(
    tmp_path: Path,
) -> None:
    db = Connections(tmp_path / "a.sqlite")
    _table(db)
    other: list[list[int]] = []
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        assert db.read() is conn
        assert _values(db.read()) == [1]
        reader = threading.Thread(target=lambda: other.append(_values(db.read())))
        reader.start()
        reader.join(5)
    assert other == [[]]  # WAL: the reader was not blocked and saw the committed state
    assert _values(db.read()) == [1]
    db.close()


def test_each_reader_thread_gets_its_own_read_only_connection(tmp_path: Path) -> None:
    db = Connections(tmp_path / "a.sqlite")
    _table(db)
    conns: list[apsw.Connection] = []
    threads = [threading.Thread(target=lambda: conns.append(db.read())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len({id(c) for c in conns}) == 3
    assert all(c.readonly("main") for c in conns)
    assert db.read() is db.read()  # one per thread, reused
    db.close()
    with pytest.raises(StoreError, match="closed"):
        db.read()
    db.close()  # idempotent


def test_read_mark_moves_with_every_commit_and_is_none_inside_a_transaction(
        tmp_path: Path) -> None:
    db = Connections(tmp_path / "a.sqlite")
    try:
        with db.transaction() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        first = db.read_mark()
        assert first is not None and db.read_mark() == first  # nothing committed since
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            assert db.read_mark() is None  # the writer's own uncommitted rows: read afresh
        second = db.read_mark()
        assert second is not None and second != first
        marks: list[tuple[int, int] | None] = []
        reader = threading.Thread(target=lambda: marks.append(db.read_mark()))
        reader.start()
        reader.join()
        assert marks[0] is not None and marks[0][0] != second[0]  # another thread's reader
    finally:
        db.close()
