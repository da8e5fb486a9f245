"""What the vector and FTS indexes' last build measured, kept across opens (issue 29).

LanceDB keeps its indexes in the table; what it does not keep is what the store measured
of them (recall@10 against exact search, overlap@10 with our BM25), without which an index
is not used. Without this, every open found ``indexed_rows = 0`` and rebuilt the index (at
1M rows: minutes of k-means, with exact search at 1M meanwhile). ``save_state`` writes the
measure to ``episodes.index/<name>.json`` after a build; ``restore`` gives it back at open
when the table still holds an index on that column covering at least the rows measured
(a table rewritten by ``forget`` holds none: the next refresh builds and measures again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grimoire.logs import get_logger

__all__ = ["STATE_FILES", "restore", "save_state"]

log = get_logger(__name__)
STATE_FILES = ("ann.json", "fts.json")


def _indexed_rows(table: Any, column: str) -> int | None:
    """Rows covered by the table's index on ``column``, None without one."""
    try:
        for config in table.list_indices():
            if list(config.columns) == [column]:
                stats = table.index_stats(config.name)
                return None if stats is None else int(stats.num_indexed_rows)
    except (OSError, ValueError, RuntimeError, AttributeError) as exc:
        log.warning("episodes.index.state.unreadable", column=column, error=str(exc))
    return None


def restore(path: Path | None, table: Any, column: str) -> dict[str, Any] | None:
    """The saved measure of the index on ``column``, if the table still holds that index."""
    if path is None or table is None or not path.is_file():
        return None
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        rows = int(state["indexed_rows"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("episodes.index.state.unreadable", path=str(path), error=str(exc))
        return None
    have = _indexed_rows(table, column)
    if have is None or have < rows:
        return None
    return state


def save_state(path: Path | None, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (temp file, rename); a failure only costs a rebuild."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("episodes.index.state.save.failed", path=str(path), error=str(exc))
