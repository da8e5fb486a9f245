"""``grimoire backup`` / ``grimoire restore``: a consistent snapshot of a live data directory.

Backup reads the store files beside the daemon (every engine here supports a
second process reading while one writes), so it needs no socket method and
never queues behind the daemon's writer thread:

1. ``semantic.sqlite``: SQLite's online backup API through apsw (a consistent
   copy of committed pages while writers go on);
2. ``graph.lmdb``: LMDB ``copy`` inside one read transaction (not ``compact``: see
   ``_lmdb_backup``);
3. the episode journal (apsw online backup), **then** the LanceDB table at the
   version committed at that moment (``checkout(version)`` and a fresh table with
   the same schema and identity). Journal first: a row acknowledged before the
   backup began is either still in the journal copy or was flushed to LanceDB
   before the version was read. A row in both is deduplicated by the store's
   recovery on open. Episodes go last, so every episode the semantic or graph
   copies refer to is in the snapshot;
4. PLAYBOOK.md, the config file (when one is given) and ``FEED.json`` (simulated or real
   memory: the restored copy stays what the source was; the manifest's ``memory`` says it);
5. ``manifest.json`` last, with versions, row counts and the sha256 and size of
   every file. Everything is written to ``DEST.partial`` and renamed to ``DEST``;
6. then the redo marks of the copies (``stores.redo``: the last redo record each holds,
   ``manifest.stores.redo``) are written to the live ``redo/covered.json``: the writers
   drop the second copies this backup covers. The journal copy carries no ``kept`` rows
   (they are in the table copied beside it).

Restore verifies the manifest against every file and refuses a mismatch or a
partial copy before writing anything; it copies to a temporary sibling of the
target and renames it into place, so the target is never half restored. The target must
be absent or empty, so a restore never mixes simulated and real memory; the marker it
brings makes a later ``grimoire run`` of the other kind refuse the directory.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import apsw

from grimoire import __version__
from grimoire.errors import StoreError, ValidationError
from grimoire.portable.manifest import (
    MANIFEST,
    file_table,
    fsync_tree,
    read_manifest,
    verify,
    write_json_atomic,
)
from grimoire.scopes.backup import backup_scopes
from grimoire.stores.marker import MARKER, read_marker
from grimoire.stores.redo.marks import backup_marks, record_covered

__all__ = ["FORMAT_VERSION", "backup", "restore"]

FORMAT_VERSION = 1
KIND = "grimoire-backup"
_EPISODES = "episodes"
_JOURNAL = "episodes_journal.sqlite"
_SEMANTIC = "semantic.sqlite"
_GRAPH = "graph.lmdb"
_PLAYBOOK = "PLAYBOOK.md"
_CONFIG = "config.yaml"
_TOMBSTONES = "TOMBSTONES.jsonl"
_LANCE_RETRIES = 3


def _scalar(conn: apsw.Connection, sql: str) -> int:
    value = conn.execute(sql).fetchall()[0][0]
    return int(value) if isinstance(value, int | float | str) else 0


def _sqlite_backup(src: Path, dest: Path) -> dict[str, Any]:
    """Online backup of ``src`` into a new file ``dest``; row counts of its plain tables."""
    source = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        source.set_busy_timeout(5000)
        target = apsw.Connection(str(dest))
        try:
            # One step copies every page inside a single read transaction: in WAL mode the
            # daemon's writers go on meanwhile, and the copy is one consistent snapshot.
            # Copying in slices (step(n)) would restart from the first page after every
            # write the daemon makes to this file between two slices; with a busy journal
            # that means copying it again and again while competing for the disk.
            with target.backup("main", source, "main") as step:
                step.step(-1)
            target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            version = _scalar(target, "PRAGMA user_version")
            tables = [str(r[0]) for r in target.execute(
                "SELECT name FROM sqlite_master WHERE type='table' "
                "AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%'")]
            counts = {}
            for name in tables:
                try:
                    counts[name] = _scalar(target, f'SELECT count(*) FROM "{name}"')
                except apsw.Error:  # shadow table of a module not loaded here
                    continue
        finally:
            target.close()
    finally:
        source.close()
    return {"user_version": version, "rows": counts}


def drop_kept(journal: Path) -> None:
    """Empty the ``kept`` table of a journal copy (its rows are in the table's copy)."""
    conn = apsw.Connection(str(journal))
    try:
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "kept" in tables:
            conn.execute("DELETE FROM kept")
            conn.execute("VACUUM")
    finally:
        conn.close()


def _lmdb_backup(src: Path, dest: Path) -> dict[str, Any]:
    import lmdb

    dest.mkdir(mode=0o700)
    # A read-only environment must map at least the whole file (py-lmdb's 10 MiB default
    # segfaults on a larger store); twice its size leaves room for the daemon's growth
    # between this open and the copy's read transaction.
    size = (src / "data.mdb").stat().st_size
    env = lmdb.open(str(src), readonly=True, lock=True, subdir=True, max_dbs=32,
                    map_size=max(2 * size, 1 << 30))
    try:
        # compact=True (MDB_CP_COMPACT) segfaults on this store's layout with py-lmdb 3.0
        # (reproduced with 2,000 triples, read-only or not): the plain copy is just as
        # consistent (one read transaction), only not defragmented.
        env.copy(str(dest), compact=False)
        entries = int(env.stat()["entries"])
    finally:
        env.close()
    return {"main_entries": entries}


# The episode table is written in slices of about this many bytes, each made durable
# before the next: the disk never holds more than one slice of unwritten backup data,
# so the daemon's own fsyncs (every acknowledged episode.write) wait behind at most
# that much, instead of behind the whole table flushed at the end.
_SLICE_BYTES = 32 << 20


def _rows_per_slice(nbytes: int, rows: int) -> int:
    return max(1, rows) if nbytes <= _SLICE_BYTES else max(1, rows * _SLICE_BYTES // nbytes)


def _lance_backup(src_dir: Path, dest_dir: Path) -> dict[str, Any]:
    """The episode table at its committed version, rewritten compactly into ``dest_dir``."""
    import lancedb

    last: Exception | None = None
    for _ in range(_LANCE_RETRIES):  # a concurrent compaction may remove an old version
        try:
            table = lancedb.connect(str(src_dir)).open_table(_EPISODES)
            version = int(table.version)
            table.checkout(version)
            data = table.to_arrow()
            schema = table.schema
            out = lancedb.connect(str(dest_dir))
            if (dest_dir / f"{_EPISODES}.lance").exists():
                shutil.rmtree(dest_dir / f"{_EPISODES}.lance")
            data = data.cast(schema)
            step = _rows_per_slice(data.nbytes, data.num_rows)
            copy = out.create_table(_EPISODES, data=data.slice(0, step), schema=schema)
            fsync_tree(dest_dir)
            for start in range(step, data.num_rows, step):
                copy.add(data.slice(start, step))
                fsync_tree(dest_dir)
            import pyarrow.compute as pc

            top = pc.max(data.column("seq")).as_py() if data.num_rows else 0
            return {"lance_version": version, "lance_rows": data.num_rows,
                    "lance_max_seq": int(top or 0)}
        except (OSError, ValueError, RuntimeError) as exc:
            last = exc
    raise StoreError(f"cannot read the episode table for backup: {last}")


def backup(data_dir: str | Path, dest: str | Path, *, config_file: str | Path | None = None,
           playbook: str | Path | None = None) -> dict[str, Any]:
    """Write a verified snapshot of ``data_dir`` to ``dest`` (which must not exist)."""
    started = time.perf_counter()
    root, out = Path(data_dir), Path(dest)
    for need in (_SEMANTIC, _GRAPH, _EPISODES):
        if not (root / need).exists():
            raise ValidationError(f"{root} is not a Grimoire data directory (no {need})",
                                  field="data")
    if out.exists():
        raise ValidationError(f"{out} already exists: choose a new backup directory",
                              field="dest")
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)  # left by a backup that was cut short
    partial.mkdir(parents=True, mode=0o700)
    try:
        stores: dict[str, Any] = {"began_at_ms": int(time.time() * 1000)}
        stores["semantic"] = _sqlite_backup(root / _SEMANTIC, partial / _SEMANTIC)
        fsync_tree(partial)  # each store made durable as it is copied (see _SLICE_BYTES)
        stores["graph"] = _lmdb_backup(root / _GRAPH, partial / _GRAPH)
        fsync_tree(partial)
        (partial / _EPISODES).mkdir(mode=0o700)
        journal = _sqlite_backup(root / _EPISODES / _JOURNAL, partial / _EPISODES / _JOURNAL)
        lance = _lance_backup(root / _EPISODES, partial / _EPISODES)
        stores["episodes"] = {**lance, "journal_rows": journal["rows"].get("journal", 0),
                              "journal_version": journal["user_version"]}
        # What this backup covers of the redo copies (stores.redo): their records up to
        # these marks are not needed once it is complete. The journal's kept rows are all
        # in the table just copied: the copy does not carry them twice.
        stores["redo"] = backup_marks(partial, lance["lance_max_seq"])
        drop_kept(partial / _EPISODES / _JOURNAL)
        if (root / _TOMBSTONES).exists():  # what was forgotten before: kinds, counts, ids
            shutil.copy2(root / _TOMBSTONES, partial / _TOMBSTONES)
        book = Path(playbook) if playbook is not None else root / _PLAYBOOK
        if book.exists():
            shutil.copy2(book, partial / _PLAYBOOK)
        if config_file is not None:
            shutil.copy2(config_file, partial / _CONFIG)
        # Simulated or real: the restored copy is what the source was (a restored demo
        # must not be taken for real memory, nor let a real feed run on it).
        marker = read_marker(root)
        if marker is not None:
            shutil.copy2(root / MARKER, partial / MARKER)
        stores["scopes"] = backup_scopes(root, partial, backup)  # DATA/scopes/* too
        fsync_tree(partial)
        files = file_table(partial)
        manifest = {
            "kind": KIND, "format_version": FORMAT_VERSION, "grimoire_version": __version__,
            "created_at_ms": int(time.time() * 1000), "source": str(root.resolve()),
            "memory": marker["kind"] if marker else None, "stores": stores, "files": files,
        }
        write_json_atomic(partial / MANIFEST, manifest)
        os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    # Complete: the writers may now drop the redo records it covers.
    record_covered(root, stores["redo"], out, int(time.time() * 1000))
    return {"dest": str(out), "files": len(files),
            "bytes": sum(f["bytes"] for f in files.values()), "stores": stores,
            "seconds": round(time.perf_counter() - started, 3)}


def restore(src: str | Path, data_dir: str | Path) -> dict[str, Any]:
    """Verify the backup at ``src`` and copy it to ``data_dir`` (absent or empty)."""
    source, target = Path(src), Path(data_dir)
    manifest = read_manifest(source, KIND, FORMAT_VERSION)
    verify(source, manifest)
    if target.exists() and any(target.iterdir()):
        raise ValidationError(f"{target} is not empty: restore into a new directory",
                              field="dir")
    staging = target.with_name(f".{target.name}.restoring")
    if staging.exists():
        shutil.rmtree(staging)
    try:
        shutil.copytree(source, staging, ignore=shutil.ignore_patterns(MANIFEST, _CONFIG))
        os.chmod(staging, 0o700)
        verify(staging, {"files": {k: v for k, v in manifest["files"].items()
                                   if k != _CONFIG}})
        fsync_tree(staging)
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"dir": str(target), "files": len(manifest["files"]),
            "memory": manifest.get("memory"), "stores": manifest.get("stores", {}),
            "source": manifest.get("source"),
            "config": str(source / _CONFIG) if (source / _CONFIG).exists() else None}
