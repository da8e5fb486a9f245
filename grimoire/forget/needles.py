"""The texts a forget removes from the redo logs, kept on disk only while it is pending.

The tombstone holds ids, never the text; but a forget a crash cut short is finished at
the next open (``apply.resume_pending``), and the redo logs' ops that hold the forgotten
name without any forgotten id (an index key, a closed head) can only be found by the
name. So ``forget`` writes the selector's texts here (fsync'd) before it starts, and the
``done`` step removes them: after a finished forget no file holds them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PENDING", "drop", "load", "save"]

PENDING = "redo/forget-texts.json"


def _read(root: Path) -> dict[str, list[str]]:
    try:
        found = json.loads((root / PENDING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write(root: Path, texts: dict[str, list[str]]) -> None:
    path = root / PENDING
    if not texts:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = path.with_name(path.name + ".tmp")
    with open(staging, "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(staging, path)


def save(root: Path, tombstone: str, texts: Sequence[str]) -> None:
    if texts:
        _write(root, {**_read(root), tombstone: list(texts)})


def load(root: Path, tombstone: str) -> list[str]:
    return list(_read(root).get(tombstone, []))


def drop(root: Path, tombstone: str) -> None:
    found = _read(root)
    if tombstone in found:
        del found[tombstone]
        _write(root, found)
