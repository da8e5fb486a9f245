"""The episodic store's write-ahead journal and full-text index (one apsw SQLite file).

Owns ``<dir>/episodes_journal.sqlite``:

- ``journal``: every acknowledged episode (JSON + vector bytes) until its row
  is in LanceDB *and* LanceDB's new files were fsync'd; then it is deleted.
  LanceDB never fsyncs, so this table is what makes ``append`` durable
  (``journal_mode=WAL``, ``synchronous=FULL``: the commit fsyncs the WAL).
- ``episode_fts``: a contentless FTS5 index (porter stemming) of every
  episode's text, rowid = the episode's ``seq``. It is written in the same
  transaction as the journal row, so it never lags the store, and it is kept
  for good (it is the store's BM25 backend, measured faster than LanceDB's FTS).
- ``meta``: the embedding identity, checked against the LanceDB table's.

Threading: one write connection, used only by the store's writer; each reader
thread gets its own read-only connection (WAL readers never block the writer).
It must not know about LanceDB or the in-memory index.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from grimoire.errors import (
    EmbeddingMismatchError,
    SchemaVersionError,
    StoreError,
)
from grimoire.records import Episode
from grimoire.stores.episodes_schema import episode_from_json, episode_to_json

__all__ = ["JOURNAL_FILE", "JOURNAL_VERSION", "Journal", "JournalRow", "fts_query"]

JOURNAL_FILE = "episodes_journal.sqlite"
JOURNAL_VERSION = 1
MAX_QUERY_TERMS = 64
_TERM = re.compile(r"\w+", re.UNICODE)

_DDL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS journal(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    episode TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS episode_fts USING fts5(
    text, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
);
"""

JournalRow = tuple[int, Episode, npt.NDArray[np.float32]]


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression from free text: each word quoted, OR-ed (BM25 ranks).

    Quoting makes user text inert (no FTS5 syntax: ``AND``, ``*``, ``:``, quotes).
    """
    terms = list(dict.fromkeys(t.lower() for t in _TERM.findall(text)))[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


class Journal:
    """The apsw side of the episodic store; see the module docstring."""

    def __init__(self, path: Path, *, model_id: str, dim: int) -> None:
        self.path = path
        self._dim = dim
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        try:
            self._db = apsw.Connection(str(path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.setbusytimeout(5000)
            self._init_schema(model_id, dim)
        except apsw.Error as exc:
            raise StoreError(f"cannot open episode journal {path}: {exc}") from exc

    def _init_schema(self, model_id: str, dim: int) -> None:
        with self._db:
            version = self._scalar("PRAGMA user_version")
            if version > JOURNAL_VERSION:
                raise SchemaVersionError(
                    f"{self.path} was written by journal version {version} but this Grimoire "
                    f"understands up to {JOURNAL_VERSION}: upgrade Grimoire to open it"
                )
            self._db.execute(_DDL)
            self._db.execute(f"PRAGMA user_version={JOURNAL_VERSION}")
            meta = {str(k): str(v) for k, v in self._db.execute("SELECT key, value FROM meta")}
            if not meta:
                self._db.executemany(
                    "INSERT INTO meta(key, value) VALUES(?, ?)",
                    [("embedding_model", model_id), ("embedding_dim", str(dim))],
                )
            elif (meta.get("embedding_model"), meta.get("embedding_dim")) != (model_id, str(dim)):
                raise EmbeddingMismatchError(
                    f"{self.path} was built with embedding model "
                    f"{meta.get('embedding_model')!r} (dim {meta.get('embedding_dim')}) but "
                    f"the configuration uses {model_id!r} (dim {dim}): restore the old "
                    "embedding settings or use a new data directory"
                )

    # ------------------------------------------------------------ writer side

    def write(self, episodes: Sequence[Episode], seqs: Sequence[int],
              vectors: npt.NDArray[np.float32]) -> None:
        """Journal and FTS-index the rows in one durable transaction (all or nothing)."""
        rows = [
            (seq, ep.id, episode_to_json(ep), vectors[i].astype("<f4").tobytes())
            for i, (ep, seq) in enumerate(zip(episodes, seqs, strict=True))
        ]
        try:
            with self._db:
                self._db.executemany(
                    "INSERT INTO journal(seq, id, episode, vector) VALUES(?, ?, ?, ?)", rows
                )
                self._db.executemany(
                    "INSERT INTO episode_fts(rowid, text) VALUES(?, ?)",
                    [(seq, ep.text) for ep, seq in zip(episodes, seqs, strict=True)],
                )
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
        out: list[JournalRow] = []
        for seq, text, blob in found:
            if not (isinstance(seq, int) and isinstance(text, str) and isinstance(blob, bytes)):
                raise StoreError(f"journal row {seq!r} is malformed")
            vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
            if vector.shape != (self._dim,):
                raise StoreError(
                    f"journal row {seq} has a {vector.size}-d vector, want {self._dim}"
                )
            out.append((seq, episode_from_json(text), vector))
        return out

    def release(self, max_seq: int) -> int:
        """Forget journal rows up to ``max_seq`` (they are durable in LanceDB now)."""
        try:
            with self._db:
                self._db.execute("DELETE FROM journal WHERE seq <= ?", (max_seq,))
                changed = self._db.changes()
        except apsw.Error as exc:
            raise StoreError(f"episode journal cleanup failed: {exc}") from exc
        return changed

    def _scalar(self, sql: str) -> int:
        got = self._db.execute(sql).fetchall()[0][0]
        return -1 if got is None else int(got)

    def max_seq(self) -> int:
        """Largest seq ever journaled or indexed (-1 when empty)."""
        try:
            return self._scalar(
                "SELECT max(m) FROM (SELECT max(seq) AS m FROM journal "
                "UNION ALL SELECT max(rowid) FROM episode_fts)"
            )
        except apsw.Error as exc:
            raise StoreError(f"cannot read episode journal: {exc}") from exc

    def fts_rowids(self) -> set[int]:
        try:
            return {int(r[0]) for r in self._db.execute("SELECT rowid FROM episode_fts")}
        except apsw.Error as exc:
            raise StoreError(f"cannot read episode text index: {exc}") from exc

    def fts_count(self) -> int:
        try:
            return self._scalar("SELECT count(*) FROM episode_fts")
        except apsw.Error as exc:
            raise StoreError(f"cannot read episode text index: {exc}") from exc

    def fts_add(self, rows: Sequence[tuple[int, str]]) -> None:
        """Index texts that are missing (rebuild after the journal file was lost)."""
        try:
            with self._db:
                self._db.executemany("INSERT INTO episode_fts(rowid, text) VALUES(?, ?)", rows)
        except apsw.Error as exc:
            raise StoreError(f"episode text index rebuild failed: {exc}") from exc

    # ------------------------------------------------------------ reader side

    def _reader(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError("episode store is closed")
            conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
            conn.setbusytimeout(5000)
            conn.execute("PRAGMA query_only=1")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def text_hits(self, query: str, limit: int | None) -> Iterator[tuple[int, float]]:
        """(seq, score) best first; score = -bm25 (higher is better).

        Lazy: a filtered caller stops reading once it has k hits that pass.
        """
        match = fts_query(query)
        if match is None:
            return
        sql = "SELECT rowid, bm25(episode_fts) FROM episode_fts WHERE episode_fts MATCH ? "
        sql += "ORDER BY rank" + (f" LIMIT {int(limit)}" if limit is not None else "")
        try:
            for seq, rank in self._reader().execute(sql, (match,)):
                yield int(seq), -float(rank)
        except apsw.Error as exc:
            raise StoreError(f"episode text search failed: {exc}") from exc

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def close(self) -> None:
        self._closed = True
        with self._readers_lock:
            readers, self._readers = self._readers, []
        try:
            for conn in readers:
                conn.close()
            self._db.close()
        except apsw.Error as exc:
            raise StoreError(f"closing the episode journal failed: {exc}") from exc
