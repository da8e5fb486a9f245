"""The episodic store's LanceDB table: create/open with identity checks, add, fsync, compact.

Owns ``<dir>/episodes.lance`` (LanceDB table ``episodes``). LanceDB 0.40 never
calls fsync (MEASUREMENTS.md), so after every write this module fsyncs the
files under the dataset that are new or changed since the last sync, and
their directories; only then may the caller drop the journal rows.

Why targeted fsync and not ``os.sync()``: ``os.sync`` was as cheap here
(0.4-1.2 ms) but it flushes every dirty page of the machine, so its cost
depends on other processes, and it reports no error. The dataset holds a few
dozen files between compactions; a stat walk plus fsync of the new ones costs
about a millisecond per flush (bench: "flush" row).

The store decides when to compact from the counts ``sync`` takes on every
flush (data files, versions), so a fast or bursty writer cannot outrun it.

Compaction is two LanceDB ``optimize`` calls with an fsync between them: the
first compacts without removing anything, the second removes old versions.
A single ``optimize(cleanup_older_than=…)`` would unlink the files of the old
fragments before the compacted copies were fsync'd, so a power loss at that
moment could lose rows whose journal entries are already gone.

``read_only=True`` opens the table of a store another process writes: no
create, migration, fsync or compaction; ``read_rows`` pins the latest committed
version and ``vector_batches`` reads the same one (the caller retries both if the
writer's compaction removed that version's files under them).

It must not know about the journal or the in-memory index.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from grimoire.errors import StoreError
from grimoire.stores.episodes.schema import ADDED_FIELDS, V2_FIELDS, check_identity, row_schema
from grimoire.stores.fsync import fsync_path

__all__ = ["TABLE_DIR", "TABLE_NAME", "LanceEpisodes", "table_files"]

TABLE_NAME = "episodes"
TABLE_DIR = f"{TABLE_NAME}.lance"
# First compaction pass: keep every version (LanceDB's default would prune after 7 days).
_KEEP_ALL = timedelta(days=365 * 100)
# Rows per batch when the vectors are read on open: 12 MiB of float32 at 384-d.
VECTOR_BATCH_ROWS = 8192
# What lancedb 0.40 raises (Rust errors surface as these) and pyarrow's own errors.
_LANCE_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)


def table_files(root: Path) -> tuple[int, int, int]:
    """(data files, versions, bytes) of the LanceDB table at ``root``, read from its files
    (a file removed during the walk, by a concurrent cleanup, is skipped)."""
    data_files = versions = size = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        kind = os.path.basename(dirpath)
        for name in filenames:
            try:
                size += os.stat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
            data_files += kind == "data"
            versions += kind == "_versions" and name.endswith(".manifest")
    return data_files, versions, size


class LanceEpisodes:
    """The LanceDB table of episodes; see the module docstring."""

    def __init__(self, directory: Path, *, model_id: str, dim: int,
                 read_only: bool = False) -> None:
        self.root = directory / TABLE_DIR
        self.schema = row_schema(model_id=model_id, dim=dim)
        self.read_only = read_only
        self._table: Any = None  # None: a read-only open found no table yet
        self._synced: dict[str, tuple[int, int, int]] = {}
        self.data_files = 0  # counted by every sync(): what triggers work-based compaction
        self.versions = 0
        self._db: Any = None
        if read_only:  # LanceDB (~1 s to import) only when a read needs the table
            if self.root.exists():
                self._table = _OnFirstUse(lambda: self._open_read_only(directory, model_id, dim))
            return
        try:
            import lancedb  # slow import (~1.5 s): only when a store is opened

            self._db = lancedb.connect(str(directory))
            if self.root.exists():
                self._table = self._db.open_table(TABLE_NAME)
                check_identity(self._table.schema.metadata, model_id=model_id, dim=dim,
                               where=str(self.root))
                self._migrate()
                self._check_columns()
            else:
                self._table = self._db.create_table(TABLE_NAME, schema=self.schema)
        except StoreError:
            raise
        except _LANCE_ERRORS as exc:  # lancedb raises these
            raise StoreError(f"cannot open episode table {self.root}: {exc}") from exc
        # Everything present now may be unsynced (a crash before close): sync it once.
        self.sync()
        try:
            fsync_path(str(directory))
        except OSError as exc:
            raise StoreError(f"cannot fsync {directory}: {exc}") from exc

    def _open_read_only(self, directory: Path, model_id: str, dim: int) -> Any:
        proxy = self._table
        try:
            import lancedb

            self._db = lancedb.connect(str(directory))
            self._table = self._db.open_table(TABLE_NAME)
            check_identity(self._table.schema.metadata, model_id=model_id, dim=dim,
                           where=str(self.root))
            self._check_read_only_columns()
        except BaseException as exc:
            self._table = proxy  # a failed check fails again on every use
            if isinstance(exc, _LANCE_ERRORS) and not isinstance(exc, StoreError):
                raise StoreError(f"cannot open episode table {self.root}: {exc}") from exc
            raise
        return self._table

    def version_on_disk(self) -> int | None:
        """The table's newest committed version, read from its manifests' names without
        LanceDB (None: no table, or names this code does not know). Every LanceDB write
        (add, delete, compaction, overwrite) commits a new version, so a table still at the
        version a saved index names holds exactly the rows that index was saved from."""
        try:
            stems = [name[:-len(".manifest")] for name in os.listdir(self.root / "_versions")
                     if name.endswith(".manifest")]
            numbers = [int(stem) for stem in stems]
        except (OSError, ValueError):
            return None
        if not numbers:
            return None
        if all(len(stem) == 20 for stem in stems) and min(numbers) >= 1 << 63:
            return (1 << 64) - 1 - min(numbers)  # Lance's V2 names: u64::MAX - version
        if any(len(stem) == 20 for stem in stems):
            return None
        return max(numbers)

    def _migrate(self) -> None:
        """Schema 1 → 2 → 3: add each version's columns (null for every old row): 2 the
        ``thread`` and ``actor`` columns, 3 ``marks``.

        LanceDB adds columns in one new table version (atomic: a crash leaves the old
        version, and the next open adds them again). The table's metadata keeps saying the
        version it was created at (LanceDB cannot rewrite it); the columns are what tells
        the versions apart, and an older Grimoire refuses the migrated table in
        ``_check_columns`` with a clear message.
        """
        for added in ADDED_FIELDS:  # oldest first: add_columns appends, so the order holds
            have = {f.name for f in self._table.schema}
            missing = [f for f in added if f.name not in have]
            if missing and len(missing) == len(added):
                self._table.add_columns(missing)

    def _check_read_only_columns(self) -> None:
        have = {f.name for f in self._table.schema}
        if not all(f.name in have for f in V2_FIELDS):
            raise StoreError(
                f"{self.root} is at episode schema version 1 (no thread and actor columns); "
                "a read-only open does not migrate it: the daemon migrates it on its next "
                "start (grimoire run), then it can be read")
        # Later columns (marks) may be missing: the reader sees them empty until the
        # daemon's next start adds them.
        later = {f.name for added in ADDED_FIELDS[1:] for f in added}
        self._check_columns(absent_ok=later - have)

    def _check_columns(self, absent_ok: Collection[str] = ()) -> None:
        found = {f.name: f.type for f in self._table.schema}
        want = {f.name: f.type for f in self.schema if f.name not in absent_ok}
        if found != want:
            missing = sorted(set(want) - set(found))
            raise StoreError(
                f"{self.root} has unexpected columns (missing {missing}); it does not match "
                "episode schema version it claims: restore it from a backup or move it aside"
            )

    # ------------------------------------------------------------ writes

    def append(self, table: pa.Table) -> None:
        """Append ``table`` in one LanceDB version (not yet durable: call ``sync``)."""
        self._check_writable()
        before = self._table.version
        try:
            self._table.add(table)
        except _LANCE_ERRORS as exc:
            # If the commit happened anyway the rows are in: do not write them twice.
            if self._table.version == before:
                raise StoreError(f"episode table append failed: {exc}") from exc

    def sync(self) -> int:
        """fsync every file under the dataset that is new or changed, then its directory."""
        self._check_writable()
        dirty_dirs: set[str] = set()
        synced = 0
        seen: dict[str, tuple[int, int, int]] = {}
        data_files = versions = 0
        try:
            for dirpath, _dirnames, filenames in os.walk(self.root):
                kind = os.path.basename(dirpath)
                for name in filenames:
                    data_files += kind == "data"
                    versions += kind == "_versions" and name.endswith(".manifest")
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:  # removed by a concurrent cleanup
                        continue
                    key = (st.st_ino, st.st_size, st.st_mtime_ns)
                    seen[path] = key
                    if self._synced.get(path) != key:
                        fsync_path(path)
                        synced += 1
                        dirty_dirs.add(dirpath)
            for path in dirty_dirs | ({str(self.root)} if dirty_dirs else set()):
                fsync_path(path)
        except OSError as exc:
            raise StoreError(f"cannot fsync the episode table: {exc}") from exc
        self._synced = seen
        self.data_files, self.versions = data_files, versions
        return synced

    def compact(self, cleanup_older_than_s: int) -> dict[str, Any]:
        """Merge fragments, fsync, then remove versions older than ``cleanup_older_than_s``.

        ``0`` keeps only the newest version. That is safe here because nothing else
        reads old versions: the store holds an exclusive lock on the directory, its
        reads are served from memory, and the compacted files are fsync'd first.
        """
        self._check_writable()
        before = self.file_stats()
        started = time.perf_counter()
        try:
            self._table.optimize(cleanup_older_than=_KEEP_ALL)
            self.sync()
            # At least 1 ms: lancedb warns on 0 (for concurrent readers, which this table
            # has none of); the newest version is never removed either way.
            keep = max(timedelta(seconds=cleanup_older_than_s), timedelta(milliseconds=1))
            self._table.optimize(cleanup_older_than=keep)
        except _LANCE_ERRORS as exc:
            raise StoreError(f"episode table compaction failed: {exc}") from exc
        self.sync()
        after = self.file_stats()
        return {
            "seconds": round(time.perf_counter() - started, 4),
            "fragments_before": before["fragments"],
            "fragments_after": after["fragments"],
            "versions_before": before["versions"],
            "versions_after": after["versions"],
            "bytes_before": before["bytes"],
            "bytes_after": after["bytes"],
        }

    def rewrite_without(self, ids: Collection[str]) -> int:
        """Erase rows for good (``forget``): returns how many of ``ids`` were stored.

        A LanceDB delete only marks rows in a deletion file, and compaction rewrites only
        fragments past a deleted share (10 %), so the rows' bytes would stay in the data
        files; a delete by predicate would also keep the predicate in the transaction
        file. So the table is rewritten: one new version holding every other row (the
        identity metadata kept), fsync'd, then every older version and its files removed
        (``cleanup`` at ~0 s, ``delete_unverified``: this store holds the only writer's
        lock, and its reads are served from memory). A crash in between leaves either the
        old version (forget resumes and rewrites again) or the new one with old files
        (the next call's cleanup removes them). Nothing stored under ``ids``: no rewrite,
        but old versions are still cleaned up."""
        self._check_writable()
        removed = 0
        try:
            data: pa.Table = self._table.to_arrow()
            gone = pc.is_in(data["id"], value_set=pa.array(sorted(set(ids)), pa.string()))
            removed = int(pc.sum(gone).as_py() or 0)
            if removed:
                kept = data.filter(pc.invert(gone)).cast(self.schema)
                del data
                self._table.add(kept, mode="overwrite")
                del kept
            self.sync()
            for _ in range(20):  # versions newer than the 1 ms cut-off wait a moment
                self._table.optimize(cleanup_older_than=timedelta(milliseconds=1),
                                     delete_unverified=True)
                if self.file_stats()["versions"] <= 1:
                    break
                time.sleep(0.005)
        except _LANCE_ERRORS as exc:
            raise StoreError(f"episode table rewrite failed: {exc}") from exc
        self.sync()
        return removed

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"episode table {self.root} was opened read-only")

    # ------------------------------------------------------------ reads

    def read_rows(self) -> pa.Table:
        """Every stored row without its vector, as stored; the caller orders by ``seq``.

        Read-only: pins the latest committed version first, so that ``vector_batches``
        reads the same rows. Why the vectors apart: at 100k rows they are 147 MiB of
        float32 Arrow, and one read of everything (ordered by ``seq`` with a copy) made the
        daemon's open peak at ~455 MiB over its start and keep ~85 MiB of it; read a batch
        at a time the caller quantises each as it comes (scripts/bench_speed.py --part memory).
        """
        if self._table is None:
            return self.schema.empty_table().drop_columns(["vector"])
        have = set(self._table.schema.names)  # a read-only open of an older table: fewer
        columns = [f.name for f in self.schema if f.name != "vector" and f.name in have]
        try:
            if self.read_only:
                self._table.checkout_latest()
                self._table.checkout(self._table.version)
            rows: pa.Table = self._table.search().select(columns).limit(None).to_arrow()
        except _LANCE_ERRORS as exc:
            raise StoreError(f"cannot read the episode table: {exc}") from exc
        return rows

    def vector_batches(self, batch_rows: int = VECTOR_BATCH_ROWS
                       ) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """``(seq, vectors)`` of every stored row, ``batch_rows`` at a time, in storage order,
        from the version ``read_rows`` read (a batch's vectors: rows × dim float32)."""
        if self._table is None:
            return
        dim = self.schema.field("vector").type.list_size
        try:
            for batch in (self._table.search().select(["seq", "vector"]).limit(None)
                          .to_batches(batch_rows)):
                vectors = batch["vector"].flatten().to_numpy(zero_copy_only=False)
                yield (batch["seq"].to_numpy(),
                       vectors.astype(np.float32, copy=False).reshape(len(batch), dim))
        except _LANCE_ERRORS as exc:
            raise StoreError(f"cannot read the episode table's vectors: {exc}") from exc

    def rows_after(self, max_seq: int) -> tuple[int, int, pa.Table]:
        """(version, rows in the table, the rows with ``seq > max_seq`` with their vectors)
        at one version: what an open applies on top of the saved index (``sidecar``)."""
        if self._table is None:
            return 0, 0, self.schema.empty_table()
        have = set(self._table.schema.names)
        columns = [f.name for f in self.schema if f.name in have]
        try:
            if self.read_only:
                self._table.checkout_latest()
                self._table.checkout(self._table.version)
            total = int(self._table.count_rows())
            rows: pa.Table = (self._table.search().where(f"seq > {int(max_seq)}")
                              .select(columns).limit(None).to_arrow())
            return int(self._table.version), total, rows
        except _LANCE_ERRORS as exc:
            raise StoreError(f"cannot read the episode table: {exc}") from exc

    @property
    def table(self) -> Any:
        """The LanceDB table itself, for benchmarks and diagnostics only."""
        return self._table

    def file_stats(self) -> dict[str, int]:
        """Fragments (LanceDB), data files, versions (manifests) and bytes on disk."""
        data_files, versions, size = table_files(self.root)
        if self._table is None:
            return {"fragments": 0, "data_files": 0, "versions": 0, "bytes": 0}
        try:
            if self.read_only:  # the writer's table as it is now, not as it was at the open
                self._table.checkout_latest()
            # Typed as a dataclass in 0.40 but returned as a dict at run time: accept both.
            raw: Any = self._table.stats()
            frag: Any = raw["fragment_stats"] if isinstance(raw, dict) else raw.fragment_stats
            fragments = int(frag["num_fragments"] if isinstance(frag, dict)
                            else frag.num_fragments)
        except (*_LANCE_ERRORS, KeyError) as exc:
            raise StoreError(f"cannot read episode table stats: {exc}") from exc
        return {"fragments": fragments, "data_files": data_files, "versions": versions,
                "bytes": size}

    def close(self) -> None:
        # LanceDB 0.40 tables have no close(); dropping the references releases them.
        del self._table, self._db


class _OnFirstUse:
    """A read-only open's table, opened (LanceDB imported) on its first attribute read."""

    def __init__(self, opener: Callable[[], Any]) -> None:
        self._opener = opener
        self._opened: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._opened is None:
            self._opened = self._opener()
        return getattr(self._opened, name)
