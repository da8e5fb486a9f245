"""The semantic store: distilled knowledge entries in SQLite (apsw + sqlite-vec + FTS5).

Owns ``grimoire_entries`` with their vectors (vec0) and full-text index
(FTS5), quarantine and cold storage, the causal graph, the admission /
retrieval / curator logs, episode bookkeeping and ``meta``. It must not
import the other stores, retrieval or the curator; it does no ranking beyond
cosine and BM25.

Threads: one writer thread performs every mutation (each method that writes
opens a transaction; wrap many writes in ``transaction()`` to make them one
durable commit); any number of reader threads query concurrently through
their own read-only connections (see ``sqlite.Connections``).

KNN reads go through an in-memory numpy mirror of the vec0 table
(``semantic_vectors``) when ``vector_cache`` is on: vec0 remains the stored
index, the mirror is rebuilt from it on open and updated after each commit.
Inside a write transaction KNN reads vec0 through the write connection, so a
batch sees its own uncommitted entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from grimoire.clock import Clock
from grimoire.errors import NotAvailableError, NotFoundError, StoreError, ValidationError
from grimoire.logs import get_logger
from grimoire.records import EntryStatus, GrimoireEntry, parse_enum
from grimoire.stores.semantic import entries, erase, mentions
from grimoire.stores.semantic.base import SemanticBase
from grimoire.stores.semantic.codec import validate_entry, validate_vector
from grimoire.stores.semantic.schema import SCHEMA_VERSION, check_readable, migrate
from grimoire.stores.semantic.types import (
    EntryFilter,
    QuarantineRecord,
    StoreCounts,
)
from grimoire.stores.semantic.vectors import CacheOp, VectorCache
from grimoire.stores.sqlite import Connections, Synchronous, store_errors

__all__ = ["SemanticStore"]

log = get_logger(__name__)

KnnSource = Literal["auto", "cache", "vec0"]


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError("must be an integer >= 0", field=field)
    return value


def _k(k: object) -> int:
    return min(_count(k, "k"), entries.MAX_K)


def _stamp(entry: GrimoireEntry) -> tuple[str, mentions.Version]:
    """The row stamp the vector mirror keeps for an entry as written (id, version)."""
    return entry.id, mentions.version_of(entry)


class SemanticStore(SemanticBase):
    """Entries, vectors, full text, causal edges and logs in one SQLite file.

    Entry methods are defined here; transaction(), close(), the causal graph,
    logs, episode state and meta come from ``SemanticBase``.
    """

    def __init__(self, db: Connections, *, model_id: str, dim: int, clock: Clock,
                 vector_cache: bool) -> None:
        """Use ``SemanticStore.open``."""
        super().__init__(db, clock)
        self.model_id = model_id
        self.dim = dim
        self._cache: VectorCache | None = None
        if vector_cache:
            with store_errors("load vector cache"):
                self._cache = VectorCache.load(db.writer, dim)
        db.on_commit = self._apply_committed

    @classmethod
    def open(
        cls, path: Path, *, model_id: str, dim: int, clock: Clock,
        synchronous: Synchronous = "FULL", vector_cache: bool = True,
        read_only: bool = False,
    ) -> SemanticStore:
        """Open (creating and migrating if needed) the store at ``path``.

        Raises SchemaVersionError for a store newer than this code and
        EmbeddingMismatchError for one built with another model or dimension.

        ``read_only=True`` reads a store that exists, beside its writer (a daemon)
        or without one: no write connection, nothing migrated or written (a store
        at an older schema is a StoreError: the daemon migrates it when it next
        starts), every write raises NotAvailableError. Reads are live: each one sees
        the last commit. No vector cache (it would miss the writer's commits):
        nearest-neighbour reads go to sqlite-vec.
        """
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 8192:
            raise ValidationError("must be an integer in [1, 8192]", field="dim")
        if not isinstance(model_id, str) or not model_id:
            raise ValidationError("must be a non-empty string", field="model_id")
        path = Path(path)
        if read_only:
            return cls._open_read_only(path, model_id=model_id, dim=dim, clock=clock)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = Connections(path, synchronous=synchronous)
        try:
            with store_errors(f"migrate {path}"):
                found = migrate(db.writer, path, model_id=model_id, dim=dim)
            store = cls(db, model_id=model_id, dim=dim, clock=clock, vector_cache=vector_cache)
        except BaseException:
            db.close()
            raise
        log.info("semantic.open", path=str(path), schema=SCHEMA_VERSION, was=found,
                 model=model_id, dim=dim, cached_vectors=len(store._cache or ()))
        return store

    @classmethod
    def _open_read_only(cls, path: Path, *, model_id: str, dim: int,
                        clock: Clock) -> SemanticStore:
        if not path.is_file():
            raise StoreError(f"no semantic store at {path}: nothing to read (check --data DIR)")
        db = Connections(path, read_only=True)
        try:
            with store_errors(f"check {path}"):
                found = check_readable(db.read(), path, model_id=model_id, dim=dim)
            store = cls(db, model_id=model_id, dim=dim, clock=clock, vector_cache=False)
        except BaseException:
            db.close()
            raise
        log.info("semantic.open", path=str(path), schema=found, model=model_id, dim=dim,
                 read_only=True)
        return store

    @property
    def read_only(self) -> bool:
        return self._db.read_only

    def _apply_committed(self, ops: list[Any]) -> None:
        cache = self._cache
        if cache is None:
            return
        try:
            cache.apply(ops)
        except Exception:  # the mirror is derived data: drop it, reads fall back to vec0
            self._cache = None
            log.exception("semantic.cache.disabled", path=str(self._db.path))

    # --- entries: writes -----------------------------------------------------------------

    def insert_entry(self, entry: GrimoireEntry, embedding: npt.ArrayLike) -> None:
        """Store a new entry with its embedding. Duplicate id: ValidationError."""
        e = validate_entry(entry)
        vector = validate_vector(embedding, self.dim)
        with self._write("insert_entry") as conn:
            if entries.get_rid(conn, e.id) is not None:
                raise ValidationError(f"an entry {e.id!r} already exists", field="id")
            rid = entries.insert(conn, e, vector)
            self._db.queue(CacheOp(rid, vector, entries.meta_of(e), _stamp(e)))

    def update_entry(self, entry: GrimoireEntry, embedding: npt.ArrayLike | None = None) -> None:
        """Replace the stored entry with the same id by ``entry`` (and its vector if given)."""
        e = validate_entry(entry)
        vector = None if embedding is None else validate_vector(embedding, self.dim)
        with self._write("update_entry") as conn:
            rid = entries.get_rid(conn, e.id)
            if rid is None:
                raise NotFoundError(f"no entry {e.id!r}")
            entries.replace(conn, e)
            if vector is not None:
                entries.set_vector(conn, rid, vector)
            self._db.queue(CacheOp(rid, vector, entries.meta_of(e), _stamp(e)))

    def archive(self, entry_id: str, now: int | None = None) -> GrimoireEntry:
        """Move an entry to cold storage: still readable by id, hidden from queries."""
        archived = self._set_status(entry_id, EntryStatus.ARCHIVED, self._now(now))
        log.info("semantic.archive", entry_id=entry_id)
        return archived

    def _set_status(self, entry_id: str, status: EntryStatus, now: int) -> GrimoireEntry:
        with self._write("set_status") as conn:
            current = entries.get_by_id(conn, entry_id)
            if current is None:
                raise NotFoundError(f"no entry {entry_id!r}")
            updated = dataclasses.replace(current, status=status, updated_at=now)
            self.update_entry(updated)
        return updated

    # --- quarantine ----------------------------------------------------------------------

    def quarantine(
        self, entry: GrimoireEntry, embedding: npt.ArrayLike | None = None, *, reason: str,
        conflicting_id: str | None = None, now: int | None = None,
    ) -> GrimoireEntry:
        """Hold ``entry`` back (status quarantined) for review at the next curator cycle.

        A new entry needs its embedding; an existing one (same id) is moved
        into quarantine. Returns the stored entry.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("must be a non-empty string", field="reason")
        if conflicting_id is not None and not isinstance(conflicting_id, str):
            raise ValidationError("must be an entry id or None", field="conflicting_id")
        at = self._now(now)
        held = validate_entry(dataclasses.replace(entry, status=EntryStatus.QUARANTINED))
        with self._write("quarantine") as conn:
            if entries.get_rid(conn, held.id) is None:
                if embedding is None:
                    raise ValidationError("is required for a new entry", field="embedding")
                self.insert_entry(held, embedding)
            else:
                self.update_entry(held, embedding)
            conn.execute("DELETE FROM quarantined_entries WHERE entry_id = ?", (held.id,))
            entries.insert_quarantine(conn, held.id, reason, conflicting_id, at)
        log.info("semantic.quarantine", entry_id=held.id, conflicting_id=conflicting_id)
        return held

    def get_quarantine(self, entry_id: str) -> QuarantineRecord | None:
        with store_errors("get_quarantine"):
            return entries.get_quarantine(self._db.read(), entry_id)

    def list_quarantine(self, *, pending_only: bool = True,
                        limit: int | None = None) -> list[QuarantineRecord]:
        with store_errors("list_quarantine"):
            return entries.list_quarantine(self._db.read(), pending_only, limit)

    def release_quarantine(self, entry_id: str, *, status: EntryStatus = EntryStatus.CANDIDATE,
                           now: int | None = None) -> GrimoireEntry:
        """Accept a quarantined entry: it becomes ``status`` (candidate by default)."""
        target = parse_enum(EntryStatus, status, "status")
        if target in (EntryStatus.QUARANTINED, EntryStatus.ARCHIVED):
            raise ValidationError("a released entry must become candidate, active or demoted",
                                  field="status")
        return self._resolve(entry_id, "released", target, self._now(now))

    def reject_quarantine(self, entry_id: str, *, now: int | None = None) -> GrimoireEntry:
        """Refuse a quarantined entry: it is archived (kept readable as the record of why)."""
        return self._resolve(entry_id, "rejected", EntryStatus.ARCHIVED, self._now(now))

    def _resolve(self, entry_id: str, resolution: str, status: EntryStatus,
                 now: int) -> GrimoireEntry:
        with self._write("resolve_quarantine") as conn:
            record = entries.get_quarantine(conn, entry_id)
            if record is None or record.resolution is not None:
                raise NotFoundError(f"no pending quarantine for entry {entry_id!r}")
            entries.resolve_quarantine(conn, entry_id, resolution, now)
            resolved = self._set_status(entry_id, status, now)
        log.info("semantic.quarantine.resolve", entry_id=entry_id, resolution=resolution)
        return resolved

    # --- entries: reads ------------------------------------------------------------------

    def get_entry(self, entry_id: str) -> GrimoireEntry | None:
        """The entry with this id, whatever its status (archived and quarantined too)."""
        with store_errors("get_entry"):
            return entries.get_by_id(self._db.read(), entry_id)

    def read_mark(self) -> tuple[int, int] | None:
        """A token that changes whenever a commit may have changed what this thread reads
        (``sqlite.Connections.read_mark``); None inside a write transaction."""
        with store_errors("read_mark"):
            return self._db.read_mark()

    def entries_mark(self) -> tuple[int, int] | None:
        """A token that changes whenever an entry may have changed (a counter every insert,
        update or delete of an entry moves, read by this thread's reader): what a caller
        derived from entries alone stays valid while it is unchanged, across commits that
        wrote only logs. None inside a write transaction."""
        with store_errors("entries_mark"):
            return self._db.read_mark(
                lambda conn: conn.execute("SELECT n FROM entries_version").get)

    def short_ids(self, ids: Iterable[str], min_chars: int = 8) -> dict[str, str]:
        """Each id's shortest prefix of at least ``min_chars`` unique among every entry in
        the store (whatever its status): what a table may print and ``entry.get`` /
        ``explain`` resolve back to the one entry."""
        with store_errors("short_ids"):
            return entries.unique_prefixes(self._db.read(), ids, min_chars)

    def get_embedding(self, entry_id: str) -> npt.NDArray[np.float32] | None:
        """The stored (L2-normalised) vector of an entry, from vec0."""
        with store_errors("get_embedding"):
            return entries.get_vector(self._db.read(), entry_id)

    def list_entries(
        self, filters: EntryFilter | None = None, *, order: entries.EntryOrder = "confidence",
        limit: int | None = 100, offset: int = 0,
    ) -> list[GrimoireEntry]:
        """Entries passing ``filters`` (default: not archived/quarantined), best first.

        ``order``: confidence (desc), created_at or last_accessed_at (newest first).
        ``limit=None`` returns them all.
        """
        if order not in ("confidence", "created_at", "last_accessed_at"):
            raise ValidationError(f"{order!r} is not one of: confidence, created_at, "
                                  "last_accessed_at", field="order")
        if limit is not None:
            _count(limit, "limit")
        with store_errors("list_entries"):
            return entries.list_entries(self._db.read(), filters or EntryFilter(), order, limit,
                                        _count(offset, "offset"))

    def find_by_claim_key(self, key: str, filters: EntryFilter | None = None,
                          ) -> GrimoireEntry | None:
        """The most recently updated entry whose claim has this ``Claim.key``."""
        with store_errors("find_by_claim_key"):
            return entries.find_by_claim_key(self._db.read(), key, filters or EntryFilter())

    def knn(
        self, vector: npt.ArrayLike, k: int, filters: EntryFilter | None = None, *,
        source: KnnSource = "auto",
    ) -> list[tuple[GrimoireEntry, float]]:
        """The ``k`` entries most similar to ``vector`` as (entry, cosine similarity), best first.

        ``source``: "auto" reads the in-memory mirror when it is on and the
        caller is not inside a write transaction, else vec0; "vec0" / "cache"
        force one (for diagnostics and the benchmark).
        """
        query = validate_vector(vector, self.dim, field="vector")
        k = _k(k)
        filt = filters or EntryFilter()
        cache = self._cache
        if source == "cache" and cache is None:
            raise NotAvailableError("the vector cache is off for this store")
        if source not in ("auto", "cache", "vec0"):
            raise ValidationError("must be auto, cache or vec0", field="source")
        with store_errors("knn"):
            conn = self._db.read()
            use_cache = source == "cache" or (
                source == "auto" and cache is not None and not self._db.in_transaction())
            if use_cache and cache is not None:
                hits = cache.knn(query, k, filt)
            else:
                hits = entries.knn_vec0(conn, query, k, filt)
            found = entries.get_by_rids(conn, (rid for rid, _ in hits))
        # A commit between the two reads may change an entry: re-check the filter.
        return [(found[rid], sim) for rid, sim in hits
                if rid in found and filt.matches(found[rid])]

    def bm25(self, query: str, k: int, filters: EntryFilter | None = None,
             ) -> list[tuple[GrimoireEntry, float]]:
        """Full-text search over content as (entry, BM25 score, higher is better).

        Any string is a safe query: words are matched (OR, porter-stemmed),
        FTS5 operators and punctuation in it are treated as text.
        """
        if not isinstance(query, str):
            raise ValidationError("must be a string", field="query")
        with store_errors("bm25"):
            return entries.bm25(self._db.read(), query, _k(k), filters or EntryFilter())

    def merge_text_index(self) -> None:
        """Merge the entries' full-text index into one segment (after many text writes: a
        BM25 query then reads a third of the pages; see ``entries.merge_text_index``)."""
        with self._write("merge_text_index") as conn:
            entries.merge_text_index(conn)

    def counts(self) -> StoreCounts:
        """Entry counts per category and status, causal edges, pending quarantine."""
        with store_errors("counts"):
            return entries.counts(self._db.read())

    # --- retrieval: entity mentions and narrow entry read-outs (semantic_mentions) ---------

    def add_mentions(self, rows: Sequence[mentions.MentionRow]) -> int:
        """Record (entity, item_id, item_kind, recorded_at) mentions; returns rows given."""
        with self._write("add_mentions") as conn:
            return mentions.add_mentions(conn, rows)

    def mentions_of(self, entity: str, *, until: int | None = None,
                    limit: int = 50) -> list[tuple[str, str, int]]:
        """(item_id, item_kind, recorded_at) naming ``entity``, newest first."""
        with store_errors("mentions_of"):
            return mentions.mentions_of(self._db.read(), entity, until, limit)

    def max_entry_rid(self) -> int:
        """The largest entry rowid (0 when empty): a cheap "were entries added?" probe.

        From the vector mirror when it is on (every entry has a vector; as of the last
        commit, no SQL: retrieval asks up to three times a query), else from SQLite."""
        cache = self._cache
        if cache is not None and not self._db.in_transaction():
            return cache.max_rid()
        with store_errors("max_entry_rid"):
            return mentions.max_entry_rid(self._db.read())

    def entries_after(self, rid: int, limit: int = 500) -> list[tuple[int, str, str, int]]:
        """(rid, id, content, created_at) of entries added after rowid ``rid``, oldest first."""
        with store_errors("entries_after"):
            return mentions.entries_after(self._db.read(), rid, limit)

    def knn_versions(self, vector: npt.ArrayLike, k: int, filters: EntryFilter | None = None,
                     ) -> list[tuple[str, mentions.Version, float]]:
        """``knn`` without building the entries: (id, version, cosine), best first.

        For a caller that caches entries: ``version`` equals
        ``semantic_mentions.version_of(entry)`` while the stored row is unchanged.
        Rows that changed since the search must be re-checked against
        ``filters`` by the caller. From the vector mirror, ids and versions are the
        rows' stamps (same snapshot as the search: no SQL); else they are read.
        """
        query = validate_vector(vector, self.dim, field="vector")
        filt = filters or EntryFilter()
        cache = self._cache
        with store_errors("knn_versions"):
            if cache is not None and not self._db.in_transaction():
                stamped = cache.knn_stamped(query, _k(k), filt)
                if all(stamp is not None for _, _, stamp in stamped):
                    return [(*stamp, sim) for _, sim, stamp in stamped if stamp is not None]
                hits = [(rid, sim) for rid, sim, _ in stamped]
            else:
                hits = entries.knn_vec0(self._db.read(), query, _k(k), filt)
            versions = mentions.entry_versions(self._db.read(), (rid for rid, _ in hits))
        return [(*versions[rid], sim) for rid, sim in hits if rid in versions]

    def get_entries(self, ids: Iterable[str]) -> dict[str, GrimoireEntry]:
        """Several entries (any status) by id in one statement; missing ids are left out."""
        with store_errors("get_entries"):
            return mentions.entries_by_id(self._db.read(), ids)

    def entry_vectors(self, ids: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Stored vectors of several entries in one statement (missing ids are left out)."""
        with store_errors("entry_vectors"):
            return mentions.entry_vectors(self._db.read(), ids)

    def bump_entry_access(self, ids: Iterable[str]) -> int:
        """``access_count + 1`` for each entry; only that column changes (no trigger fires)."""
        with self._write("bump_entry_access") as conn:
            return mentions.bump_entry_access(conn, ids)

    # --- forget (grimoire.forget) -----------------------------------------------------------

    def entries_quoting(self, needles: Sequence[str]) -> list[str]:
        """Ids of the entries whose content, tags, source or claim quote a needle."""
        with store_errors("entries_quoting"):
            return erase.entries_quoting(self._db.read(), needles)

    def entries_citing(self, episode_ids: Iterable[str]) -> list[str]:
        """Ids of the entries that cite one of these episodes (parent or evidence)."""
        with store_errors("entries_citing"):
            return erase.entries_citing(self._db.read(), episode_ids)

    def rows_referencing(self, item_ids: Iterable[str], entry_ids: Iterable[str],
                         needles: Sequence[str]) -> dict[str, list[Any]]:
        """Log rows that name a forgotten item or quote a needle (``semantic.erase``)."""
        with store_errors("rows_referencing"):
            return erase.rows_referencing(self._db.read(), item_ids, entry_ids, needles)

    def erase(self, *, episode_ids: Iterable[str], entry_ids: Iterable[str],
              retrieval_ids: Iterable[str], admission_ids: Iterable[int],
              delta_ids: Iterable[int], mention_keys: Iterable[str] = ()) -> dict[str, int]:
        """Delete these items and every row that refers to them, in one transaction; the
        vector mirror is reloaded. The file still holds the bytes until ``scrub``."""
        with self._write("erase") as conn:
            out = erase.erase_rows(conn, episode_ids=episode_ids, entry_ids=entry_ids,
                                   retrieval_ids=retrieval_ids, admission_ids=admission_ids,
                                   delta_ids=delta_ids, mention_keys=mention_keys)
        if self._cache is not None:
            with store_errors("reload vector cache"):
                self._cache = VectorCache.load(self._db.writer, self.dim)
        return out

    def scrub(self) -> None:
        """Rewrite the file so no deleted row's bytes remain in it or its WAL."""
        self._db.scrub()
