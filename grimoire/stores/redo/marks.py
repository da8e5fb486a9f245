"""What a backup covers: the redo marks of its copies, and ``redo/covered.json``.

``backup_marks(COPY)`` reads, from the store files of a finished backup copy, the number
of the last redo record each holds (``semantic``: ``redo_mark``; ``graph``: ``meta``'s
``redo_seq``); the episode table's mark, the largest ``seq`` it holds, comes from the
backup's own read of it. ``record_covered(DIR, ...)`` writes them into the live data
directory (atomically) once the backup is complete, and ``covered(DIR)`` reads them back
for the writers, which then drop what is covered (cached by the file's mtime: the writers
ask at every commit).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["COVERED", "REDO_DIR", "backup_marks", "covered", "record_covered"]

REDO_DIR = "redo"
COVERED = f"{REDO_DIR}/covered.json"
_cache: dict[str, tuple[int, dict[str, Any]]] = {}
_lock = threading.Lock()


def covered(root: Path) -> dict[str, Any]:
    """The marks the last complete backup of ``root`` covers ({} before any backup)."""
    path = root / COVERED
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        return {}
    key = str(path)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # being replaced: the next commit asks again
    marks = found if isinstance(found, dict) else {}
    with _lock:
        _cache[key] = (stamp, marks)
    return marks


def backup_marks(copy: Path, episodes_seq: int | None) -> dict[str, int]:
    """The redo marks of the store copies in the backup directory ``copy``."""
    import apsw
    import lmdb

    from grimoire.stores.graph.codec import read_u64
    from grimoire.stores.redo.lmdbops import MARK_KEY
    from grimoire.stores.redo.statements import read_mark

    marks: dict[str, int] = {}
    conn = apsw.Connection(str(copy / "semantic.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        marks["semantic"] = read_mark(conn)
    finally:
        conn.close()
    graph = copy / "graph.lmdb"
    env = lmdb.open(str(graph), readonly=True, lock=False, subdir=True, max_dbs=32,
                    map_size=max(2 * (graph / "data.mdb").stat().st_size, 1 << 30))
    try:
        with env.begin() as txn:
            meta = env.open_db(b"meta", txn=txn, create=False)
            marks["graph"] = read_u64(txn.get(MARK_KEY, db=meta))
    finally:
        env.close()
    if episodes_seq is not None:
        marks["episodes"] = episodes_seq
    return marks


def record_covered(root: Path, marks: dict[str, int], backup: Path, at_ms: int) -> None:
    """Write ``redo/covered.json`` into the live directory ``root`` (atomic rename)."""
    target = root / COVERED
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = target.with_name(".covered.json.tmp")
    with open(staging, "w", encoding="utf-8") as f:
        json.dump({**marks, "backup": str(backup.resolve()), "created_at_ms": at_ms}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(staging, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
