"""The tombstone file, ``<data_dir>/TOMBSTONES.jsonl``: what was forgotten, never the text.

One JSON object a line, appended and fsync'd: a ``pending`` line (written before anything
is erased: the intent) with the tombstone's id, the kind of selector (episode, actor,
thread, entity, matching), how many episodes and other items, when (the data's time, and
the wall clock's for comparing with a backup's), and the ids of everything to erase or
recount; then a ``done`` line with the same id once every store is rewritten. Ids are
opaque (UUIDv7 and row numbers): the file holds no forgotten text and no forgotten name,
so the byte scan after a forget passes over it too. A line cut short by a crash is
skipped. Must not erase anything itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grimoire.errors import StoreError

__all__ = ["TOMBSTONES", "append", "pending", "read"]

TOMBSTONES = "TOMBSTONES.jsonl"


def append(data_dir: Path, record: Mapping[str, Any]) -> None:
    """Append one line and fsync the file (and the directory when it is new)."""
    path = data_dir / TOMBSTONES
    new = not path.exists()
    line = json.dumps(dict(record), sort_keys=True, separators=(",", ":")) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            dfd = os.open(data_dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except OSError as exc:
        raise StoreError(f"cannot write the tombstone to {path}: {exc.strerror}") from exc


def read(data_dir: Path) -> list[dict[str, Any]]:
    """Every tombstone in order, each its pending line with ``state`` of the last one."""
    path = data_dir / TOMBSTONES
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    found: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line a crash cut short: its forget never began erasing
        if not isinstance(record, dict) or not isinstance(record.get("tombstone"), str):
            continue
        key = record["tombstone"]
        if record.get("state") == "pending":
            found[key] = record
        elif key in found:
            found[key] = {**found[key], "state": record.get("state"),
                          "done_at": record.get("at")}
    return list(found.values())


def pending(data_dir: Path) -> list[dict[str, Any]]:
    """The tombstones whose forget did not finish (a crash): applied again at open."""
    return [t for t in read(data_dir) if t.get("state") == "pending"]
