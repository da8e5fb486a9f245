"""The episodic store's write-ahead journal (one apsw SQLite file).

Owns ``<dir>/episodes_journal.sqlite``:

- ``journal``: every acknowledged episode (JSON + vector bytes) until its row
  is in LanceDB *and* LanceDB's new files were fsync'd; then it is deleted.
  LanceDB never fsyncs, so this table is what makes ``append`` durable
  (``journal_mode=WAL``, ``synchronous=FULL``: each commit fdatasyncs the
  WAL, ~0.4-1.5 ms here; strace shows one fdatasync per append).
- ``kept``: each row again after its flush (moved there in the release's own commit: no
  extra fsync), until a backup covers it (``stores.redo``: the backup's largest ``seq``,
  read from ``redo/covered.json`` at each release): the second copy that ``grimoire
  repair`` replays over a backup when the LanceDB table is damaged. ``meta``'s
  ``kept_since`` says whether it began with the store (``creation``: it alone rebuilds
  the table until the first backup) or later (``upgrade``);
- ``meta``: the embedding identity, checked against the LanceDB table's, and
  ``newest_timestamp``: the largest timestamp of any episode ever appended
  (raised in the same transaction as the rows; episodes are never deleted), so a
  reader learns the data's time without opening LanceDB (``read_newest``).

Only the store's writer uses it (appends, release after a flush, replay on
open); reads never touch it. ``read_journal`` is the read-only store's one
look at it: one read transaction through a connection that cannot write
(``sqlite.reader_mode``), beside the writer's. It must not know about LanceDB
or the index.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt

from grimoire.errors import (
    EmbeddingMismatchError,
    SchemaVersionError,
    StoreError,
)
from grimoire.records import Episode
from grimoire.stores.episodes.schema import episode_from_json, episode_to_json
from grimoire.stores.redo.marks import covered as redo_covered
from grimoire.stores.sqlite import reader_mode, scrub

__all__ = ["JOURNAL_FILE", "JOURNAL_VERSION", "NEWEST_UNKNOWN", "Journal", "JournalRow",
           "read_journal", "read_newest", "read_pending"]

JOURNAL_FILE = "episodes_journal.sqlite"
JOURNAL_VERSION = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS journal(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    episode TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS kept(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    episode TEXT NOT NULL,
    vector BLOB NOT NULL
);
"""
_KEEP = "INSERT OR IGNORE INTO kept SELECT seq, id, episode, vector FROM journal WHERE seq <= ?"

JournalRow = tuple[int, Episode, npt.NDArray[np.float32]]

NEWEST_KEY = "newest_timestamp"
_NO_EPISODE = "none"  # the store holds no episode yet
#: ``read_newest``'s answer for a journal that does not know (written before it kept it).
NEWEST_UNKNOWN = -1
_RAISE_NEWEST = (
    "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = "
    "CASE WHEN value = 'none' OR CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER) "
    "THEN excluded.value ELSE value END")


def _decode(found: Sequence[Any], dim: int) -> list[JournalRow]:
    out: list[JournalRow] = []
    for seq, text, blob in found:
        if not (isinstance(seq, int) and isinstance(text, str) and isinstance(blob, bytes)):
            raise StoreError(f"journal row {seq!r} is malformed")
        vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        if vector.shape != (dim,):
            raise StoreError(f"journal row {seq} has a {vector.size}-d vector, want {dim}")
        out.append((seq, episode_from_json(text), vector))
    return out


def read_journal(path: Path, *, model_id: str, dim: int) -> list[JournalRow]:
    """Every journaled row (seq order) of the journal at ``path``, read without writing.

    No journal file: no rows. Checks the schema version and the embedding identity as
    the writer's open does; changes nothing (see ``sqlite.reader_mode``).
    """
    if not path.is_file():
        return []
    readonly = reader_mode(path) == "readonly"
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    try:
        db = apsw.Connection(str(path), flags=flags)
    except apsw.Error as exc:
        raise StoreError(f"cannot open episode journal {path} read-only: {exc}") from exc
    try:
        if not readonly:
            db.execute("PRAGMA query_only=1")
        db.setbusytimeout(5000)
        db.execute("BEGIN")  # one snapshot for the checks and the rows
        try:
            got = db.execute("PRAGMA user_version").fetchall()[0][0]
            version = got if isinstance(got, int) else 0
            if version > JOURNAL_VERSION:
                raise SchemaVersionError(
                    f"{path} was written by journal version {version} but this Grimoire "
                    f"understands up to {JOURNAL_VERSION}: upgrade Grimoire to read it")
            tables = {str(r[0]) for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "journal"} <= tables:
                return []  # created, not yet initialised: nothing journaled
            meta = {str(k): str(v) for k, v in db.execute(
                "SELECT key, value FROM meta WHERE key != 'kept_since'")}
            if meta and (meta.get("embedding_model"), meta.get("embedding_dim")) != (
                model_id, str(dim)
            ):
                raise EmbeddingMismatchError(
                    f"{path} was built with embedding model {meta.get('embedding_model')!r} "
                    f"(dim {meta.get('embedding_dim')}) but the configuration uses "
                    f"{model_id!r} (dim {dim}): restore the old embedding settings")
            found = db.execute("SELECT seq, episode, vector FROM journal ORDER BY seq"
                               ).fetchall()
        finally:
            db.execute("COMMIT")
    except apsw.Error as exc:
        raise StoreError(f"cannot read episode journal {path}: {exc}") from exc
    finally:
        db.close()
    return _decode(found, dim)


def _query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """``sql``'s rows from the journal at ``path``, through a connection that cannot write
    (``sqlite.reader_mode``), beside the writer's; apsw errors propagate."""
    readonly = reader_mode(path) == "readonly"
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    db = apsw.Connection(str(path), flags=flags)
    try:
        if not readonly:
            db.execute("PRAGMA query_only=1")
        db.setbusytimeout(5000)
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def read_newest(path: Path) -> int | None:
    """The newest episode timestamp the journal at ``path`` recorded, None when the store
    holds no episode, ``NEWEST_UNKNOWN`` when it cannot say (no journal, or one written
    before it kept the figure: the caller opens the store instead). Writes nothing."""
    if not path.is_file():
        return NEWEST_UNKNOWN
    try:
        found = _query(path, "SELECT value FROM meta WHERE key = ?", (NEWEST_KEY,))
    except apsw.SQLError:  # no meta table yet: a journal created, not initialised
        return NEWEST_UNKNOWN
    except apsw.Error as exc:
        raise StoreError(f"cannot read episode journal {path}: {exc}") from exc
    if not found:
        return NEWEST_UNKNOWN
    value = str(found[0][0])
    return None if value == _NO_EPISODE else int(value)


def read_pending(path: Path) -> tuple[int, int] | None:
    """(rows, largest seq or -1) of the journal at ``path``: the episodes acknowledged and
    not yet released after their flush (a fingerprint of the journal's content, read
    without writing); None when there is no journal or it cannot be read."""
    if not path.is_file():
        return None
    try:
        rows, top = _query(path, "SELECT count(*), coalesce(max(seq), -1) FROM journal")[0]
    except apsw.Error:
        return None
    return int(str(rows)), int(str(top))


class Journal:
    """The apsw side of the episodic store; see the module docstring."""

    def __init__(self, path: Path, *, model_id: str, dim: int) -> None:
        self.path = path
        self._dim = dim
        try:
            self._db = apsw.Connection(str(path))
        except apsw.Error as exc:
            raise StoreError(f"cannot open episode journal {path}: {exc}") from exc
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            # Rows live here only until the next flush: keep the WAL file from staying large.
            self._db.execute("PRAGMA journal_size_limit=4194304")
            self._db.setbusytimeout(5000)
            self._init_schema(model_id, dim)
        except apsw.Error as exc:
            self._db.close()
            raise StoreError(f"cannot open episode journal {path}: {exc}") from exc
        except StoreError:
            self._db.close()
            raise

    def _init_schema(self, model_id: str, dim: int) -> None:
        with self._db:
            version = self._scalar("PRAGMA user_version")
            if version > JOURNAL_VERSION:
                raise SchemaVersionError(
                    f"{self.path} was written by journal version {version} but this Grimoire "
                    f"understands up to {JOURNAL_VERSION}: upgrade Grimoire to open it"
                )
            had = {str(r[0]) for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            self._db.execute(_DDL)
            self._db.execute(f"PRAGMA user_version={JOURNAL_VERSION}")
            meta = {str(k): str(v) for k, v in self._db.execute(
                "SELECT key, value FROM meta WHERE key != 'kept_since'")}
            if "kept" not in had:
                self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
                                 ("kept_since", "upgrade" if meta else "creation"))
            self._identity_recorded = bool(meta)
            if meta and (meta.get("embedding_model"), meta.get("embedding_dim")) != (
                model_id, str(dim)
            ):
                raise EmbeddingMismatchError(
                    f"{self.path} was built with embedding model "
                    f"{meta.get('embedding_model')!r} (dim {meta.get('embedding_dim')}) but "
                    f"the configuration uses {model_id!r} (dim {dim}): restore the old "
                    "embedding settings or use a new data directory"
                )

    def record_identity(self, model_id: str, dim: int) -> None:
        """Write the embedding identity into a new journal (after the table's check passed,
        so a refused open leaves no journal claiming the wrong model)."""
        if self._identity_recorded:
            return
        try:
            with self._db:
                self._db.executemany(
                    "INSERT INTO meta(key, value) VALUES(?, ?)",
                    [("embedding_model", model_id), ("embedding_dim", str(dim))],
                )
        except apsw.Error as exc:
            raise StoreError(f"episode journal write failed: {exc}") from exc
        self._identity_recorded = True

    def write(self, episodes: Sequence[Episode], seqs: Sequence[int],
              vectors: npt.NDArray[np.float32]) -> None:
        """Journal the rows in one durable transaction (all or nothing)."""
        rows = [
            (seq, ep.id, episode_to_json(ep), vectors[i].astype("<f4").tobytes())
            for i, (ep, seq) in enumerate(zip(episodes, seqs, strict=True))
        ]
        newest = str(max(ep.timestamp for ep in episodes)) if episodes else None
        try:
            with self._db:
                self._db.executemany(
                    "INSERT INTO journal(seq, id, episode, vector) VALUES(?, ?, ?, ?)", rows
                )
                if newest is not None:
                    self._db.execute(_RAISE_NEWEST, (NEWEST_KEY, newest))
        except apsw.Error as exc:
            raise StoreError(f"episode journal write failed: {exc}") from exc

    def note_newest(self, newest: int | None) -> None:
        """Record the store's newest timestamp if this journal does not know it yet (a
        store written before the journal kept it; called at the writable open)."""
        try:
            with self._db:
                if self._db.execute("SELECT 1 FROM meta WHERE key = ?", (NEWEST_KEY,)
                                    ).fetchall():
                    return
                self._db.execute("INSERT INTO meta(key, value) VALUES(?, ?)",
                                 (NEWEST_KEY, _NO_EPISODE if newest is None else str(newest)))
        except apsw.Error as exc:
            raise StoreError(f"episode journal write failed: {exc}") from exc

    def pending(self) -> list[JournalRow]:
        """Every journaled row, in seq order (replayed on open)."""
        try:
            found = self._db.execute(
                "SELECT seq, episode, vector FROM journal ORDER BY seq"
            ).fetchall()
        except apsw.Error as exc:
            raise StoreError(f"cannot read episode journal: {exc}") from exc
        return _decode(found, self._dim)

    def release(self, max_seq: int) -> int:
        """Move journal rows up to ``max_seq`` (durable in LanceDB now) to ``kept``, and
        drop the kept rows the last backup covers (module doc)."""
        covered = redo_covered(self.path.parent.parent).get("episodes")
        try:
            with self._db:
                self._db.execute(_KEEP, (max_seq,))
                self._db.execute("DELETE FROM journal WHERE seq <= ?", (max_seq,))
                changed = self._db.changes()
                if isinstance(covered, int):
                    self._db.execute("DELETE FROM kept WHERE seq <= ?", (covered,))
        except apsw.Error as exc:
            raise StoreError(f"episode journal cleanup failed: {exc}") from exc
        return changed

    def erase(self, ids: Sequence[str]) -> int:
        """Delete the rows of these episode ids, then rewrite the file so that no released or
        deleted row's bytes are left in it or its WAL (``sqlite.scrub``; ``forget``).

        One statement per table with the ids as one JSON array: ``kept`` has no index on
        ``id`` (a flush's move must stay cheap), so it is scanned once for all of them,
        not once per id (1,000 ids in a 100k-row ``kept``: 60 s one by one)."""
        wanted = json.dumps(list(ids))
        try:
            before = self._db.total_changes()
            with self._db:
                for table in ("journal", "kept"):
                    self._db.execute(f"DELETE FROM {table} WHERE id IN "
                                     "(SELECT value FROM json_each(?))", (wanted,))
            changed = self._db.total_changes() - before
        except apsw.Error as exc:
            raise StoreError(f"episode journal erase failed: {exc}") from exc
        scrub(self._db)
        return changed

    def _scalar(self, sql: str) -> int:
        got = self._db.execute(sql).fetchall()[0][0]
        return -1 if got is None else int(got)

    def max_seq(self) -> int:
        """Largest seq in the journal (-1 when empty)."""
        try:
            return self._scalar("SELECT max(seq) FROM journal")
        except apsw.Error as exc:
            raise StoreError(f"cannot read episode journal: {exc}") from exc

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def close(self) -> None:
        try:
            self._db.close()
        except apsw.Error as exc:
            raise StoreError(f"closing the episode journal failed: {exc}") from exc
