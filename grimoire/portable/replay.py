"""``grimoire repair``'s second half: the redo copies replayed over a restored backup.

After ``check.repair`` has restored the backup into ``INTO`` and taken every intact store
from the live directory, each damaged store gets back the writes acknowledged since the
backup from its second copy (``stores.redo``):

- ``episodes``: the live journal's rows (pending and ``kept``) that ``INTO``'s table lacks
  are written into ``INTO``'s journal; the first open of ``INTO`` replays them into the
  table, as it does after any crash;
- ``semantic`` / ``graph``: the records of ``redo/semantic.log`` / ``redo/graph.log`` past
  the restored file's mark, applied in order.

Then the live ``redo`` directory is copied into ``INTO``, so the repaired copy keeps the
second copy of everything since the same backup. Without a backup (``backup=None``), a
damaged store is rebuilt from its copy alone, which only a copy that began with the store
can do (the log header's ``fresh``, the journal's ``kept_since``); otherwise the repair
says that a backup is needed. A backup older than the newest one the copies were pruned
at is refused: the writes between would be missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import apsw

from grimoire.errors import StoreError, ValidationError
from grimoire.stores.redo.log import read_records
from grimoire.stores.redo.marks import COVERED, REDO_DIR, covered

__all__ = ["check_backup_age", "replay_damaged"]

_JOURNAL = "episodes/episodes_journal.sqlite"
_LOGS = {"semantic": ("semantic.log", "semantic.sqlite"), "graph": ("graph.log", "graph.lmdb")}


def check_backup_age(live: Path, backup_marks: dict[str, Any]) -> None:
    """Refuse a backup older than the one ``live``'s redo copies were last pruned at."""
    newest = covered(live)
    for store in ("semantic", "graph", "episodes"):
        have, need = backup_marks.get(store), newest.get(store)
        if isinstance(need, int) and need > 0 and (not isinstance(have, int) or have < need):
            raise ValidationError(
                f"this backup is older than the newest one ({newest.get('backup')}): the "
                "redo copies no longer hold the writes between them; repair from that one",
                field="backup")


def _journal_rows(path: Path) -> tuple[list[tuple[Any, ...]], str | None]:
    """(seq, id, episode, vector) of every row of the journal at ``path``, pending and
    kept, and its ``kept_since``."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = [tuple(r) for r in conn.execute("SELECT seq, id, episode, vector FROM journal")]
        since = None
        if "kept" in tables:
            rows += [tuple(r) for r in conn.execute(
                "SELECT seq, id, episode, vector FROM kept")]
            found = conn.execute("SELECT value FROM meta WHERE key = 'kept_since'").fetchall()
            since = str(found[0][0]) if found else None
    finally:
        conn.close()
    return rows, since


def _table_ids(out: Path) -> set[str]:
    import lancedb

    table_dir = out / "episodes" / "episodes.lance"
    if not table_dir.exists():
        return set()
    table = lancedb.connect(str(table_dir.parent)).open_table("episodes")
    return {str(i) for i in table.to_arrow().column("id").to_pylist()}


def _episodes(live: Path, out: Path, from_backup: bool) -> dict[str, Any]:
    rows, since = _journal_rows(live / _JOURNAL)
    if not from_backup and since != "creation":
        raise StoreError("the episode table is damaged and its journal's copy began after "
                         "the store did: repair needs a backup (--backup)")
    have = _table_ids(out)
    fresh = sorted((r for r in rows if str(r[1]) not in have), key=lambda r: int(r[0]))
    target = out / _JOURNAL
    if not target.exists():  # no backup: the live journal, emptied, gives the identity
        shutil.copy2(live / _JOURNAL, target)
        conn = apsw.Connection(str(target))
        try:
            conn.execute("DELETE FROM journal; DELETE FROM kept")
        finally:
            conn.close()
    conn = apsw.Connection(str(target))
    try:
        conn.set_busy_timeout(5000)
        conn.execute("PRAGMA synchronous=FULL")
        with conn:
            conn.executemany("INSERT OR IGNORE INTO journal(seq, id, episode, vector) "
                             "VALUES(?, ?, ?, ?)", fresh)
    finally:
        conn.close()
    return {"journal_rows": len(fresh)}


def _log(live: Path, out: Path, store: str, from_backup: bool) -> dict[str, Any]:
    from grimoire.stores.redo import lmdbops, statements

    log_name, file = _LOGS[store]
    header, records = read_records(live / REDO_DIR / log_name)
    if not from_backup and not header.get("fresh"):
        raise StoreError(f"{file} is damaged and its redo log began after the store did: "
                         "repair needs a backup (--backup)")
    if store == "semantic" and not (out / file).exists():  # no backup: an empty store
        _empty_semantic(live, out / file)
    replay = statements.replay if store == "semantic" else lmdbops.replay
    return replay(out / file, records)


def _empty_semantic(live: Path, path: Path) -> None:
    """A new semantic store at ``path`` with the live store's embedding identity (the
    journal's ``meta``): its schema, which the log's records write into."""
    from grimoire.clock import FrozenClock
    from grimoire.stores.semantic.store import SemanticStore

    conn = apsw.Connection(str(live / _JOURNAL), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    finally:
        conn.close()
    if "embedding_model" not in meta:
        raise StoreError("cannot tell the embedding model from the journal: repair needs a "
                         "backup (--backup)")
    SemanticStore.open(path, model_id=meta["embedding_model"],
                       dim=int(meta["embedding_dim"]), clock=FrozenClock(0)).close()


def replay_damaged(live: Path, out: Path, damaged: list[str],
                   from_backup: bool) -> dict[str, Any]:
    """Replay into ``out`` the second copies of the ``damaged`` stores (module doc)."""
    done: dict[str, Any] = {}
    for store in damaged:
        if store == "episodes":
            done[store] = _episodes(live, out, from_backup)
        elif store in _LOGS:
            done[store] = _log(live, out, store, from_backup)
    if (live / REDO_DIR).is_dir():
        shutil.rmtree(out / REDO_DIR, ignore_errors=True)
        shutil.copytree(live / REDO_DIR, out / REDO_DIR,
                        ignore=shutil.ignore_patterns("*.new", ".*.tmp"))
        if not from_backup:
            (out / COVERED).unlink(missing_ok=True)
    return done
