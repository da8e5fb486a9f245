"""SQL for retrieval's side of the semantic store: entity mentions and entry read-outs.

Owns ``entity_mentions`` (migration 2): which episodes and entries name an
entity key such as ``token:WETH``. Also the narrow reads/writes over
``grimoire_entries`` that retrieval needs and the entry API does not offer
cheaply: a few entries or their stored vectors in one statement, entries
added after a rowid watermark (to index their mentions), and the
``access_count`` bump of a deciding retrieval, which touches that one
column so neither the FTS5 nor the vec0 triggers fire.

Plain functions over an apsw connection that validate their own arguments;
the store picks the connection and transaction and wraps apsw errors. Must
not rank, recognise entities or decide anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import apsw
import numpy as np
import numpy.typing as npt

from grimoire.errors import ValidationError
from grimoire.records import GrimoireEntry
from grimoire.stores.semantic.codec import ENTRY_COLUMNS, row_to_entry, vector_from_blob

__all__ = [
    "MAX_ENTITY_CHARS",
    "VERSION_COLUMNS",
    "MentionRow",
    "Version",
    "add_mentions",
    "bump_entry_access",
    "entries_after",
    "entries_by_id",
    "entry_vectors",
    "entry_versions",
    "max_entry_rid",
    "mentions_of",
    "version_of",
]

MAX_ENTITY_CHARS = 300
_KINDS = frozenset({"episode", "entry"})

# (entity, item_id, item_kind, recorded_at)
MentionRow = tuple[str, str, str, int]


def _ids(ids: Iterable[str], field: str) -> list[str]:
    if isinstance(ids, str):
        raise ValidationError("must be a list of ids, not one string", field=field)
    out = list(dict.fromkeys(ids))
    for value in out:
        if not isinstance(value, str) or not value or len(value) > 256:
            raise ValidationError("must be non-empty ids of <= 256 chars", field=field)
    return out


def add_mentions(conn: apsw.Connection, rows: Sequence[MentionRow]) -> int:
    """Record mentions; an existing (entity, item) keeps its earliest ``recorded_at``."""
    checked: list[MentionRow] = []
    for i, row in enumerate(rows):
        if not isinstance(row, tuple) or len(row) != 4:
            raise ValidationError("must be (entity, item_id, item_kind, recorded_at)",
                                  field=f"mentions[{i}]")
        entity, item_id, kind, at = row
        if not isinstance(entity, str) or not entity or len(entity) > MAX_ENTITY_CHARS:
            raise ValidationError(f"must be a non-empty string of <= {MAX_ENTITY_CHARS} chars",
                                  field=f"mentions[{i}].entity")
        _ids([item_id], f"mentions[{i}].item_id")
        if kind not in _KINDS:
            raise ValidationError("must be 'episode' or 'entry'", field=f"mentions[{i}].kind")
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise ValidationError("must be unix ms", field=f"mentions[{i}].recorded_at")
        checked.append((entity, item_id, kind, at))
    if checked:
        conn.executemany(
            "INSERT INTO entity_mentions (entity, item_id, item_kind, recorded_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (entity, item_id) DO UPDATE SET "
            "recorded_at = min(recorded_at, excluded.recorded_at)", checked)
    return len(checked)


def mentions_of(
    conn: apsw.Connection, entity: str, until: int | None, limit: int
) -> list[tuple[str, str, int]]:
    """(item_id, item_kind, recorded_at) naming ``entity``, newest first, recorded ≤ until."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("must be an integer >= 0", field="limit")
    rows = conn.execute(
        "SELECT item_id, item_kind, recorded_at FROM entity_mentions "
        "WHERE entity = ? AND recorded_at <= ? ORDER BY recorded_at DESC, item_id LIMIT ?",
        (entity, 2**63 - 1 if until is None else int(until), limit),
    )
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


def max_entry_rid(conn: apsw.Connection) -> int:
    row = conn.execute("SELECT max(rid) FROM grimoire_entries").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def entries_after(
    conn: apsw.Connection, rid: int, limit: int
) -> list[tuple[int, str, str, int]]:
    """(rid, id, content, created_at) of entries with a rowid above ``rid``, oldest first."""
    rows = conn.execute(
        "SELECT rid, id, content, created_at FROM grimoire_entries WHERE rid > ? "
        "ORDER BY rid LIMIT ?", (int(rid), int(limit)))
    return [(int(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]


# The columns whose change makes a cached entry stale for ranking (updated_at should move
# with any change; the ranking inputs are listed too, so a writer that forgets it is caught).
VERSION_COLUMNS = ("updated_at", "confidence", "quality_score", "strength", "last_accessed_at",
                   "status", "market_regime", "strategy", "category")
Version = tuple[object, ...]


def entry_versions(conn: apsw.Connection, rids: Iterable[int]) -> dict[int, tuple[str, Version]]:
    """rid → (id, version) for these rowids: enough to tell a cached entry is current."""
    wanted = [int(r) for r in rids]
    if not wanted:
        return {}
    rows = conn.execute(
        f"SELECT rid, id, {', '.join(VERSION_COLUMNS)} FROM grimoire_entries "
        "WHERE rid IN (SELECT value FROM json_each(?))", (json.dumps(wanted),))
    return {int(r[0]): (str(r[1]), tuple(r[2:])) for r in rows}


def version_of(entry: GrimoireEntry) -> Version:
    """The same version tuple, from an entry record (enums as their stored values)."""
    return (entry.updated_at, entry.confidence, entry.quality_score, entry.strength,
            entry.last_accessed_at, entry.status.value,
            entry.market_regime.value if entry.market_regime else None, entry.strategy,
            entry.category.value)


def entries_by_id(conn: apsw.Connection, ids: Iterable[str]) -> dict[str, GrimoireEntry]:
    """Several entries (any status) by id in one statement; missing ids are left out."""
    wanted = _ids(ids, "ids")
    if not wanted:
        return {}
    columns = ", ".join(ENTRY_COLUMNS)
    rows = conn.execute(
        f"SELECT {columns} FROM grimoire_entries WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(wanted),))
    found = (row_to_entry(row) for row in rows)
    return {entry.id: entry for entry in found}


def entry_vectors(
    conn: apsw.Connection, ids: Iterable[str]
) -> dict[str, npt.NDArray[np.float32]]:
    """The stored (L2-normalised) vectors of these entries, in one statement."""
    wanted = _ids(ids, "ids")
    if not wanted:
        return {}
    rows = conn.execute(
        "SELECT e.id, v.embedding FROM grimoire_entries e JOIN entry_vectors v ON v.rid = e.rid "
        "WHERE e.id IN (SELECT value FROM json_each(?))", (json.dumps(wanted),))
    return {str(r[0]): vector_from_blob(r[1]) for r in rows}


def bump_entry_access(conn: apsw.Connection, ids: Iterable[str]) -> int:
    """``access_count + 1`` for each entry (a deciding retrieval served it); rows changed."""
    wanted = _ids(ids, "entry_ids")
    if not wanted:
        return 0
    conn.execute(
        "UPDATE grimoire_entries SET access_count = access_count + 1 "
        "WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(wanted),))
    return int(conn.changes())
