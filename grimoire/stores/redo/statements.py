"""The semantic store's redo: every write statement of a committed transaction, replayable.

``StatementRedo`` watches the store's write connection (apsw's ``exec_trace``) while
``Connections.transaction()`` runs its outermost transaction and keeps each statement that
changes the database with its bindings, the savepoints apsw opens for nested transactions
included (so a nested block that rolled back rolls back again on replay). Just before the
commit it writes the transaction's number into ``redo_mark`` (inside the same
transaction) and appends the statements as one record to the log (one fdatasync); if the
commit then fails, the record is taken back. At open, records past the database's mark
(appended, then the process died before the commit) are dropped: the log holds exactly
the committed transactions, and a copy of the database (a backup) knows from its own
``redo_mark`` which records come after it.

``replay`` applies the records past a database's mark to it, in order, each in one
transaction: the statements ran on the same state before, so they do the same again (a
statement that failed then, a constraint the code caught, fails again and is skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from grimoire.errors import StoreError
from grimoire.stores.redo.log import FORGET, RedoLog
from grimoire.stores.redo.recorder import Recorder
from grimoire.stores.sqlite import connect, store_errors

__all__ = ["StatementRedo", "read_mark", "replay"]

_MARK_DDL = ("CREATE TABLE IF NOT EXISTS redo_mark("
             "id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)")
_SET_MARK = ("INSERT INTO redo_mark(id, seq) VALUES(1, ?) "
             "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq")
_SAVEPOINTS = ("SAVEPOINT", "RELEASE", "ROLLBACK TO")


def read_mark(conn: apsw.Connection) -> int:
    """The last redo record this database holds (0: none, or a store without the table)."""
    try:
        found = conn.execute("SELECT seq FROM redo_mark WHERE id = 1").fetchall()
    except apsw.SQLError:  # no such table: written before the redo log existed
        return 0
    value = found[0][0] if found else 0
    return value if isinstance(value, int) else 0


def _bindings(bindings: Any) -> Any:
    if bindings is None or isinstance(bindings, dict):
        return bindings
    return list(bindings)


class StatementRedo(Recorder):
    """See the module doc. Used by ``Connections.transaction()`` under its lock."""

    def __init__(self, writer: apsw.Connection, log: RedoLog,
                 covered: Callable[[], int | None] = lambda: None) -> None:
        self._conn = writer
        self._ops: list[Any] | None = None
        with store_errors("redo mark"):
            writer.execute(_MARK_DDL)
            mark = read_mark(writer)
        super().__init__(log, mark, covered)
        writer.exec_trace = self._trace

    def _trace(self, cursor: Any, sql: str, bindings: Any) -> bool:
        ops = self._ops
        if ops is None:
            return True
        if isinstance(cursor, apsw.Cursor):
            if not cursor.is_readonly:
                ops.append(["q", sql, _bindings(bindings)])
        elif sql.lstrip().upper().startswith(_SAVEPOINTS):  # BEGIN / COMMIT: the record's
            ops.append(["q", sql, None])
        return True

    def begin(self) -> None:
        """The outermost transaction starts: record its statements."""
        self._ops = []

    def before_commit(self) -> int | None:
        """Mark the transaction and append its record (None if it wrote nothing); first
        drops the records a backup covers (``covered()``: its mark) if there are new ones."""
        ops, self._ops = self._ops, None
        return self._record(ops, lambda seq: self._conn.execute(_SET_MARK, (seq,)))

    def abort(self, seq: int | None) -> None:
        """The transaction rolled back: stop recording, take back its record if appended."""
        self._ops = None
        self._take_back(seq)


def replay(path: Path, records: list[tuple[int, list[Any]]]) -> dict[str, Any]:
    """Apply to the database at ``path`` the ``records`` past its mark (see the module
    doc). Raises StoreError when the records do not start right after the mark (a backup
    older than the one the log was pruned at)."""
    conn = connect(path)
    try:
        with store_errors("redo replay"):
            conn.execute(_MARK_DDL)
            mark = read_mark(conn)
            todo = [(seq, ops) for seq, ops in records if seq > mark]
            if todo and todo[0][0] != mark + 1:
                raise StoreError(f"{path.name}: the redo log starts at record {todo[0][0]} "
                                 f"but this copy ends at {mark}: the writes between are "
                                 "only in a newer backup")
            skipped = 0
            for seq, ops in todo:
                with conn:
                    for op in ops:
                        if op[0] == FORGET:
                            continue
                        try:
                            conn.execute(op[1], op[2])
                        except apsw.ConstraintError:
                            skipped += 1
                    conn.execute(_SET_MARK, (seq,))
    finally:
        conn.close()
    return {"records": len(todo), "from_mark": mark, "statements_failed_again": skipped}
