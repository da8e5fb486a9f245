"""The episodic store: append-only episodes in LanceDB, durable writes, fast reads.

Owns ``EpisodeStore`` (the API the facade, retrieval, distiller and curator use) and
composes private parts, one module each (plus ``schema``, the row format and validation,
and ``recovery``/``resume``, the open procedure):

- ``journal``: apsw SQLite write-ahead journal (what makes ``append`` durable: LanceDB
  never fsyncs);
- ``lance``: the LanceDB table, written in batches, fsync'd after every write, compacted
  when its data files or versions reach ``max_files`` or every ``compact_every_appends``
  flushes (one ``add()`` per row: 219 s and 4.4 GB for 10k rows, MEASUREMENTS.md);
- ``index``: the read side (int8 vectors, prefilter columns, rows) and ``text`` (BM25),
  saved beside the table (``sidecar``) so an open reads only the rows after the save.

Write path (one writer thread): ``append`` validates, commits the rows to the journal
(fsync), then makes them visible in memory; ``flush`` moves buffered rows to LanceDB in one
``add()``, fsyncs the new files, then drops the journal rows. On open, journal rows that
LanceDB lacks are replayed (idempotent by id).

Read-only (``open(read_only=True)``, a reader beside the daemon or without one): no lock,
nothing written; the journal is read once (before LanceDB, so no acknowledged row slips
between them), LanceDB's latest version is read, and the union is loaded into memory. Such
a store is a snapshot taken at open: rows the writer appends later are not seen until it is
opened again. Every write method raises NotAvailableError.

Reads (any thread, no lock) see buffered rows too and touch LanceDB only through its
vector and FTS indexes past their thresholds (``ann``, ``words``); below them, search is
in memory (scripts/bench_stores.py --part episodes, 10k rows: top-10 ~0.5-2.5 ms against
30-45 ms for LanceDB's flat search; BM25 ~1.6 ms against 13 ms for LanceDB FTS).
Per-episode mutable bookkeeping (consolidated flag, access counts) is not kept here:
episodes are append-only; the semantic store holds that. This module must not import
other stores, retrieval or the curator.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.clock import Clock
from grimoire.config import EpisodesConfig
from grimoire.errors import (
    ConfigError,
    NotAvailableError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from grimoire.logs import get_logger
from grimoire.records import Episode, EpisodeType
from grimoire.runtime.memory import release_free_memory
from grimoire.stores.episodes.ann import AnnIndex, AnnSettings
from grimoire.stores.episodes.fts import FtsSettings
from grimoire.stores.episodes.index import (
    EpisodeFilter,
    EpisodeIds,
    EpisodeIndex,
    Snapshot,
    pending_vectors,
)
from grimoire.stores.episodes.journal import (
    JOURNAL_FILE,
    NEWEST_UNKNOWN,
    Journal,
    JournalRow,
    read_journal,
    read_newest,
)
from grimoire.stores.episodes.lance import TABLE_DIR, LanceEpisodes
from grimoire.stores.episodes.quantized import F32, QuantizedRows
from grimoire.stores.episodes.recovery import Recovery, recover
from grimoire.stores.episodes.resume import load_index, save_index
from grimoire.stores.episodes.schema import (
    check_k,
    check_vectors,
    episodes_to_arrow,
    validate_episode,
)
from grimoire.stores.episodes.select import find_ids
from grimoire.stores.episodes.sidecar import INDEX_DIR, Sidecar, read_rows
from grimoire.stores.episodes.text import TextIndex
from grimoire.stores.episodes.words import Words

__all__ = ["EpisodeFilter", "EpisodeStore"]

log = get_logger(__name__)
LOCK_FILE = "episodes.lock"
SCAN_CHUNK = 1000


class EpisodeStore:
    """Append-only episodic memory. Open with ``EpisodeStore.open``; see the module doc."""

    def __init__(self, directory: Path, *, model_id: str, dim: int, config: EpisodesConfig,
                 clock: Clock, journal: Journal | None, lance: LanceEpisodes,
                 lock_fd: int) -> None:
        self.directory = directory
        self.read_only = journal is None
        self.model_id = model_id
        self.dim = dim
        self._config = config
        self._clock = clock
        self._journal = journal
        self._lance = lance
        self._lock_fd = lock_fd
        self._sidecar = Sidecar(directory, model_id=model_id, dim=dim, read_only=journal is None)
        self._index = EpisodeIndex(dim, allocate=self._sidecar.allocate)
        self._write_lock = threading.RLock()
        self._words = Words(FtsSettings.of(config), TextIndex(), self._write_lock,
                            directory / INDEX_DIR / "fts.json", lance.table)
        self._next_seq = 0
        self._buffer_since: int | None = None
        self._release_upto: int | None = None  # written to LanceDB, journal rows not dropped
        self._flushes_since_compact = 0
        self._last_compact: dict[str, Any] | None = None
        self._closed = False
        self._ann = AnnIndex(AnnSettings.of(config), directory / INDEX_DIR / "ann.json",
                             lance.table)

    @classmethod
    def open(cls, directory: Path, *, model_id: str, dim: int, config: EpisodesConfig,
             clock: Clock, read_only: bool = False) -> EpisodeStore:
        """Open or create the store in ``directory``; replays the journal.

        Raises EmbeddingMismatchError (other model/dim), SchemaVersionError (newer
        store), StoreError (I/O, or the store is open in another process).
        ``read_only=True``: a snapshot of an existing store, beside its writer or
        not (module doc); nothing in ``directory`` is created or changed.
        """
        if config.flush_rows < 1 or config.flush_ms < 0 or config.compact_every_appends < 1:
            raise ConfigError("episodes: flush_rows and compact_every_appends must be >= 1, "
                              "flush_ms >= 0")
        if config.cleanup_older_than_s < 0:
            raise ConfigError("episodes.cleanup_older_than_s must be >= 0")
        if config.max_files < 2:
            raise ConfigError("episodes.max_files must be >= 2")
        if dim < 1 or not model_id:
            raise ConfigError("embedding model id and a positive dim are required")
        started = time.perf_counter()
        directory = Path(directory)
        if read_only:
            return cls._open_read_only(directory, model_id=model_id, dim=dim, config=config,
                                       clock=clock, started=started)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot create the episode store in {directory}: {exc}") from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(lock_fd)
            raise StoreError(
                f"the episode store in {directory} is open in another process or store "
                "object: close it first (one writer per store)"
            ) from exc
        journal: Journal | None = None
        try:
            journal = Journal(directory / JOURNAL_FILE, model_id=model_id, dim=dim)
            lance = LanceEpisodes(directory, model_id=model_id, dim=dim)
            journal.record_identity(model_id, dim)
            store = cls(directory, model_id=model_id, dim=dim, config=config, clock=clock,
                        journal=journal, lance=lance, lock_fd=lock_fd)
            result = store._recover(journal.pending())
            store._next_seq = result.next_seq
            newest = store.recent(1)
            journal.note_newest(newest[0].timestamp if newest else None)
        except BaseException:
            if journal is not None:
                journal.close()
            os.close(lock_fd)  # also releases the flock
            raise
        log.info("episodes.open", directory=str(directory), rows=store._index.snap.n,
                 replayed=result.replayed, skipped=result.skipped,
                 seconds=round(time.perf_counter() - started, 3))
        return store

    @classmethod
    def _open_read_only(cls, directory: Path, *, model_id: str, dim: int,
                        config: EpisodesConfig, clock: Clock, started: float) -> EpisodeStore:
        if not (directory / TABLE_DIR).is_dir() and not (directory / JOURNAL_FILE).is_file():
            raise StoreError(f"no episode store in {directory}: nothing to read "
                             "(check --data DIR)")
        # The journal first, LanceDB second: a row the writer moves from one to the other
        # in between is then found in LanceDB (episodes_recovery.load_read_only).
        pending = read_journal(directory / JOURNAL_FILE, model_id=model_id, dim=dim)
        lance = LanceEpisodes(directory, model_id=model_id, dim=dim, read_only=True)
        store = cls(directory, model_id=model_id, dim=dim, config=config, clock=clock,
                    journal=None, lance=lance, lock_fd=-1)
        result = store._recover(pending)
        store._next_seq = result.next_seq
        log.info("episodes.open", directory=str(directory), rows=store._index.snap.n,
                 journal_rows=result.replayed, read_only=True,
                 seconds=round(time.perf_counter() - started, 3))
        return store

    def _recover(self, pending: list[JournalRow]) -> Recovery:
        self._index, self._words.text, result = load_index(
            self._lance, self._journal, pending, self._sidecar, self.dim,
            text_below=self._config.fts_threshold)
        return result

    @staticmethod
    def newest_on_disk(directory: Path) -> tuple[bool, int | None]:
        """(known, the newest episode timestamp or None for no episode) of the store in
        ``directory``, read from its journal without opening LanceDB; known is False for a
        store whose journal does not keep the figure yet (open it and ask ``recent(1)``)."""
        found = read_newest(Path(directory) / JOURNAL_FILE)
        if found == NEWEST_UNKNOWN:
            return False, None
        return True, found

    def _check_writable(self, method: str) -> None:
        if self.read_only:
            raise NotAvailableError(
                f"episodes.{method}: the episode store in {self.directory} was opened "
                "read-only; only the process that owns it (the daemon) writes")

    @property
    def _wal(self) -> Journal:  # the journal of a writable store (read-only ones have none)
        assert self._journal is not None
        return self._journal

    # ------------------------------------------------------------ writes (one writer)

    def append(self, episodes: Sequence[Episode], vectors: F32) -> None:
        """Add episodes with their vectors; durable (fsync'd) when this returns.

        All or nothing: bad input raises ValidationError and writes nothing.
        Vectors are stored L2-normalised. Ids must be new (episodes are append-only).
        """
        self._check_writable("append")
        if isinstance(episodes, str | bytes) or not isinstance(episodes, Sequence):
            raise ValidationError("must be a sequence of Episode", field="episodes")
        with self._write_lock:
            self._check_open()
            batch = [validate_episode(ep, f"episodes[{i}]") for i, ep in enumerate(episodes)]
            vecs = check_vectors(vectors, rows=len(batch), dim=self.dim, name="vectors")
            seen: set[str] = set()
            for ep in batch:
                if ep.id in seen:
                    raise ValidationError(f"duplicate id {ep.id!r} in the batch", field="id")
                if self._index.find(ep.id) is not None:
                    raise ValidationError(f"episode {ep.id!r} already exists", field="id")
                seen.add(ep.id)
            if not batch:
                return
            seqs = list(range(self._next_seq, self._next_seq + len(batch)))
            self._wal.write(batch, seqs, vecs)  # durable from here on
            self._next_seq += len(batch)
            self._words.add(self._index.snap.n, [ep.text for ep in batch])  # before publishing
            self._index.add(batch, seqs, vecs)
            now = self._clock()
            if self._buffer_since is None:
                self._buffer_since = now
            try:
                self._maybe_flush_locked(now)
            except StoreError as exc:
                # The rows are durable in the journal and readable; the flush is retried by
                # the next append / maybe_flush / close, so the caller's write succeeded.
                log.error("episodes.flush.failed", error=str(exc), buffered=self.buffered)

    def flush(self) -> int:
        """Write every buffered row to LanceDB in one add(); returns the rows written."""
        self._check_writable("flush")
        with self._write_lock:
            self._check_open()
            return self._flush_locked()

    def maybe_flush(self, now_ms: int) -> int:
        """Flush if the buffer holds ``flush_rows`` rows or is ``flush_ms`` old (daemon tick)."""
        self._check_writable("maybe_flush")
        with self._write_lock:
            self._check_open()
            return self._maybe_flush_locked(now_ms)

    def _maybe_flush_locked(self, now_ms: int) -> int:
        pending = self.buffered
        if pending == 0 and self._release_upto is None:
            return 0
        age = 0 if self._buffer_since is None else now_ms - self._buffer_since
        if pending >= self._config.flush_rows or age >= self._config.flush_ms or (
            pending == 0 and self._release_upto is not None
        ):
            return self._flush_locked()
        return 0

    def _flush_locked(self) -> int:
        started = time.perf_counter()
        snap = self._index.snap
        count = len(snap.pending)
        if count:
            lo, hi = snap.flushed, snap.flushed + count
            table = episodes_to_arrow(snap.pending, snap.seq[lo:hi].tolist(),
                                      pending_vectors(snap), self._lance.schema)
            self._lance.append(table)  # StoreError: nothing committed, rows stay buffered
            self._index.mark_flushed(count, table.drop_columns(["vector"]))
            self._release_upto = int(snap.seq[hi - 1])
            self._buffer_since = None
        if self._release_upto is not None:
            self._lance.sync()  # StoreError: journal rows kept, sync retried next flush
            self._wal.release(self._release_upto)
            self._release_upto = None
        if count:
            if self._index.snap.flushed >= self._sidecar.saved_rows + self._config.index_save_rows:
                save_index(self._sidecar, self._index, self._lance,
                           self._words.saved(self._index.snap.flushed))
            self._flushes_since_compact += 1
            log.debug("episodes.flush", rows=count,
                      seconds=round(time.perf_counter() - started, 4))
            if (self._flushes_since_compact >= self._config.compact_every_appends
                    or self._too_many_files()):
                try:
                    self._compact_locked()
                except StoreError as exc:
                    # The flush itself succeeded; compaction is retried after the next flush.
                    log.error("episodes.compact.failed", error=str(exc))
        return count

    def compact(self) -> dict[str, Any]:
        """Flush, merge LanceDB fragments and remove old versions; returns before/after stats."""
        self._check_writable("compact")
        with self._write_lock:
            self._check_open()
            self._flush_locked()
            return self._compact_locked()

    def _too_many_files(self) -> bool:
        """Work-based trigger: data files or versions (counted by the last sync) at the cap."""
        cap = self._config.max_files
        return self._lance.data_files >= cap or self._lance.versions >= cap

    def _compact_locked(self) -> dict[str, Any]:
        # Old versions go by count as well as by age: a writer faster than the clock
        # (a simulated run, a burst) would otherwise keep every version of the last minute.
        keep_s = 0 if self._too_many_files() else self._config.cleanup_older_than_s
        result = self._lance.compact(keep_s)
        release_free_memory()  # compaction read and rewrote every fragment: hand that back
        self._flushes_since_compact = 0
        self._last_compact = {**result, "at_ms": self._clock()}
        log.info("episodes.compact", **result)
        return result

    def erase(self, ids: Collection[str]) -> int:
        """Remove these episodes for good (``forget``); returns how many were stored.

        Flushes, rewrites the LanceDB table without them and removes every older version
        (``LanceEpisodes.rewrite_without``), deletes their journal rows and rewrites the
        journal file (``Journal.erase``), then rebuilds the in-memory index and BM25
        postings from what remains and publishes them. Idempotent: ids no longer stored
        cost a cleanup, nothing else. Readers see the old index or the new one."""
        self._check_writable("erase")
        with self._write_lock:
            self._check_open()
            wanted = sorted(set(ids))
            found = sum(1 for id_ in wanted if self._index.find(id_) is not None)
            self._flush_locked()
            self._sidecar.drop()  # stale from here on
            self._lance.rewrite_without(wanted)
            self._wal.erase(wanted)
            index = EpisodeIndex(self.dim, allocate=self._sidecar.allocate)
            text = TextIndex()
            result = recover(self._lance, self._wal, index, text)
            self._index, self._words.text = index, text
            save_index(self._sidecar, self._index, self._lance,
                           self._words.saved(self._index.snap.flushed))
            self._next_seq = max(self._next_seq, result.next_seq)
            release_free_memory()
            log.info("episodes.erase", asked=len(wanted), erased=found, rows=index.snap.n)
            return found

    # ------------------------------------------------------------ reads (any thread)

    @property
    def buffered(self) -> int:
        """Rows appended (durable in the journal) and not yet written to LanceDB."""
        return len(self._index.snap.pending)

    def count(self) -> int:
        return self._index.snap.n

    def get(self, id: str) -> Episode | None:
        pos = self._index.find(id)
        snap = self._index.snap  # read after the lookup: a found id is always below n
        if pos is None or pos >= snap.n:
            return None
        return self._index.episodes(snap, [pos])[0]

    def get_by_ref(self, ref: str) -> list[Episode]:
        """Every episode written with this caller ``ref``, in append order."""
        positions = list(self._index.refs.get(ref, ()))
        snap = self._index.snap
        return self._index.episodes(snap, [p for p in positions if p < snap.n])

    def search(self, vector: F32, k: int, filters: EpisodeFilter | None = None,
               ) -> list[tuple[Episode, float]]:
        """Top-k episodes by cosine similarity to ``vector`` (best first), prefiltered."""
        snap, hits = self._vector_hits(vector, k, filters)
        episodes = self._index.episodes(snap, [p for p, _ in hits])
        return [(ep, score) for ep, (_, score) in zip(episodes, hits, strict=True)]

    def search_ids(self, vector: F32, k: int) -> list[tuple[str, float]]:
        """As :meth:`search` unfiltered, ids only (for a caller that caches the records)."""
        snap, hits = self._vector_hits(vector, k, None)
        return [(snap.id_at(p), score) for p, score in hits]

    def _vector_hits(self, vector: F32, k: int, filters: EpisodeFilter | None,
                     ) -> tuple[Snapshot, list[tuple[int, float]]]:
        k = check_k(k)
        if isinstance(vector, np.ndarray) and vector.ndim == 1:
            vector = vector[None, :]
        query = check_vectors(vector, rows=1, dim=self.dim, name="vector")[0]
        self._check_filter(filters)
        snap = self._index.snap
        hits: list[tuple[int, float]] | None = None
        if filters is None and self._ann.usable:
            hits = self._ann.search(self._lance.table, self._index, snap, query, k)
        return snap, hits if hits is not None else self._index.search(snap, query, k, filters)

    def ann_due(self) -> bool:
        """Whether :meth:`refresh_ann` would build or rebuild LanceDB's vector index."""
        flushed = self._index.snap.flushed
        return not self.read_only and (self._ann.due(flushed) or self._words.fts.due(flushed))

    def refresh_ann(self) -> dict[str, Any] | None:
        """Build LanceDB's FTS index past ``episodes.fts_threshold`` rows (``words``), its
        vector index past ``ann_threshold`` (recall@10 against exact search measured); None
        when neither was due. Off the write path (daemon's background thread): no lock."""
        if self.read_only:
            return None
        fts = self._words.refresh(self._lance.table, self._index)
        snap = self._index.snap
        ann = self._ann.refresh(self._lance.table, self._index, snap, self.dim)
        if ann is not None:
            self._sidecar.release()  # the recall check read every row
        return None if ann is None and fts is None else {**(ann or {}), "fts": fts}

    def text_search(self, query: str, k: int, filters: EpisodeFilter | None = None,
                    ) -> list[tuple[Episode, float]]:
        """Top-k by BM25 over episode text (any query word may match), best first."""
        k = check_k(k)
        if not isinstance(query, str):
            raise ValidationError("must be a string", field="query")
        self._check_filter(filters)
        snap = self._index.snap  # before the text snapshot: it covers every row below n
        hits = self._words.search(self._lance.table, self._index, snap, query, k, filters)
        episodes = self._index.episodes(snap, [p for p, _ in hits])
        return [(ep, score) for ep, (_, score) in zip(episodes, hits, strict=True)]

    def recent(self, n: int, *, strategy: str | None = None, since: int | None = None,
               types: Sequence[EpisodeType | str] | None = None,
               until: int | None = None) -> list[Episode]:
        """The ``n`` newest episodes by timestamp (append order breaks ties), newest last;
        ``since`` inclusive, ``until`` exclusive."""
        n = check_k(n)
        flt = EpisodeFilter(types=types, strategy=strategy, since_ms=since, until_ms=until)
        snap = self._index.snap
        positions = self._positions(snap, flt)
        if n == 0 or positions.size == 0:
            return []
        return self._index.episodes(snap, self._index.newest(snap, positions, n).tolist())

    def recent_rows(self, n: int, *, since: int | None = None
                    ) -> tuple[list[str], npt.NDArray[np.int64], F32]:
        """The ``n`` newest episodes' ids, timestamps and vectors (as ``vectors_for``),
        newest last, without building the episodes: the write path's cheap look-back."""
        n = check_k(n)
        snap = self._index.snap
        positions = self._positions(snap, EpisodeFilter(since_ms=since))
        if n == 0 or positions.size == 0:
            return [], np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        chosen = self._index.newest(snap, positions, n)
        return ([snap.id_at(int(p)) for p in chosen], snap.timestamp[chosen].astype(np.int64),
                snap.rows()[chosen.tolist()])

    def scan(self, since_ms: int | None = None) -> Iterator[Episode]:
        """Every episode (timestamp >= since_ms if given) in append order, from a snapshot."""
        snap = self._index.snap
        positions = self._positions(snap, EpisodeFilter(since_ms=since_ms))
        for start in range(0, positions.size, SCAN_CHUNK):
            yield from self._index.episodes(snap, positions[start:start + SCAN_CHUNK].tolist())

    def find_ids(self, *, actor: str | None = None, thread: str | None = None,
                 quoting: Sequence[str] = ()) -> list[str]:
        """Ids (append order) of the episodes by ``actor``, in ``thread``, or whose text,
        ref, token pair, actor or thread quotes one of ``quoting`` (case-insensitive
        substring): what ``forget`` selects (``select.find_ids``)."""
        return find_ids(self._index.snap, actor=actor, thread=thread, quoting=quoting)

    def vectors_for(self, ids: Sequence[str]) -> F32:
        """A (len(ids) × dim) float32 copy of the vectors, in the order given.

        As held in memory: int8-quantised (within ~0.001 a component of what was stored:
        ``index``; read from the file, not the mapping: ``sidecar.read_rows``)."""
        snap = self._index.snap
        positions = []
        for id_ in ids:
            pos = self._index.find(id_)
            if pos is None or pos >= snap.n:
                raise NotFoundError(f"no episode {id_!r}")
            positions.append(pos)
        return read_rows(snap.rows(), np.asarray(positions, dtype=np.intp)).dequantize()

    def all_vectors(self) -> tuple[EpisodeIds, QuantizedRows]:
        """(ids, n × dim matrix) of every episode in append order, one snapshot.

        The matrix is int8-quantised (``QuantizedRows``): ``matrix @ q`` gives float32
        scores, ``matrix[i]`` a dequantised row."""
        snap = self._index.snap
        rows = snap.rows()
        rows.codes.flags.writeable = False  # views: the index's own arrays stay writable
        rows.scales.flags.writeable = False
        return EpisodeIds(snap), rows

    def stats(self) -> dict[str, Any]:
        """Counts, LanceDB fragments/versions, bytes on disk and in memory, last compaction."""
        snap = self._index.snap
        files = self._lance.file_stats()
        journal_bytes = sum(
            p.stat().st_size for p in (self.directory / f"{JOURNAL_FILE}{suffix}"
                                       for suffix in ("", "-wal", "-shm")) if p.exists())
        return {
            "rows": snap.n,
            "flushed_rows": snap.flushed,
            "buffered_rows": len(snap.pending),
            "fragments": files["fragments"],
            "data_files": files["data_files"],
            "versions": files["versions"],
            "lance_bytes": files["bytes"],
            "journal_bytes": journal_bytes,
            "disk_bytes": files["bytes"] + journal_bytes,
            "index_bytes": int(snap.codes.nbytes + snap.scales.nbytes
                               + sum(c.nbytes for c in snap.chunks)
                               + self._words.nbytes),
            "flushes_since_compact": self._flushes_since_compact,
            "last_compact": self._last_compact,
            "embedding_model": self.model_id,
            "embedding_dim": self.dim,
            "read_only": self.read_only,
            "ann": self._ann.stats(),
            "fts": self._words.fts.stats(),
        }

    def lance_table(self) -> Any:
        """The underlying LanceDB table (benchmarks, diagnostics). Do not write to it."""
        return self._lance.table

    def _positions(self, snap: Snapshot, flt: EpisodeFilter) -> npt.NDArray[np.intp]:
        mask = self._index.mask(snap, flt)
        return np.arange(snap.n) if mask is None else np.flatnonzero(mask)

    def _check_filter(self, filters: object) -> None:
        if filters is not None and not isinstance(filters, EpisodeFilter):
            raise ValidationError("must be an EpisodeFilter", field="filters")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("episode store is closed")

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush, then release every resource. Idempotent."""
        with self._write_lock:
            if self._closed:
                return
            if self.read_only:
                self._closed = True
                self._lance.close()
                log.info("episodes.close", rows=self._index.snap.n, read_only=True)
                return
            try:
                self._flush_locked()
                save_index(self._sidecar, self._index, self._lance,
                           self._words.saved(self._index.snap.flushed))
            finally:
                self._closed = True
                try:
                    self._wal.close()
                    self._lance.close()
                finally:
                    os.close(self._lock_fd)
            log.info("episodes.close", rows=self._index.snap.n)

    def __enter__(self) -> EpisodeStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

