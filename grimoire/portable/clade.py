"""The Clade exchange: agents share warnings and validated heuristics through one LanceDB table.

The table (``clade`` under a URI LanceDB opens natively: a local or network path,
or object storage such as ``s3://bucket/prefix``) holds one row per published
item: ``key`` (sha256 of origin and content hash; the merge key, so publishing
again adds nothing), ``origin`` (the publishing agent), ``content_hash``
(sha256 of category and content), the entry's fields, its evidence counts
(``validated``, ``contradicted``, ``episodes``) and ``published_at``.

``publish`` sends this agent's own knowledge only (self-learned or replicant
provenance: what it pulled is never echoed back): warnings at any status that
is alive, heuristics once active (validated here). ``pull`` reads every row of
another origin and imports it through ``transfer.import_items`` as ``clade``
provenance (admission gate, discounted confidence, idempotent by key): an
agent never re-imports its own items.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pyarrow as pa

from curator.cycle.transitions import LOCAL_PROVENANCE
from grimoire.context import Context
from grimoire.errors import StoreError, ValidationError
from grimoire.portable.bundle import entry_items
from grimoire.portable.transfer import import_items
from grimoire.records import Category, EntryStatus

__all__ = ["TABLE", "agent_name", "publish", "pull"]

TABLE = "clade"
# This agent's own knowledge, learned or told here (one definition: curator.cycle.transitions).
_LOCAL = {p.value for p in LOCAL_PROVENANCE}
_SCHEMA = pa.schema([
    ("key", pa.string()), ("origin", pa.string()), ("content_hash", pa.string()),
    ("category", pa.string()), ("content", pa.string()), ("confidence", pa.float64()),
    ("decay_class", pa.string()), ("tags", pa.list_(pa.string())),
    ("strategy", pa.string()), ("regime", pa.string()), ("is_bloodstain", pa.bool_()),
    ("validated", pa.int64()), ("contradicted", pa.int64()), ("episodes", pa.int64()),
    ("published_at", pa.int64()),
])
_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)


def agent_name(ctx: Context, agent: str | None) -> str:
    name = agent if agent is not None else ctx.data_dir.resolve().name
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValidationError("must be a non-empty name of at most 200 characters",
                              field="agent")
    return name.strip()


def _table(uri: str) -> Any:
    if not isinstance(uri, str) or not uri:
        raise ValidationError("must be a non-empty path or URI", field="uri")
    import lancedb

    try:
        db = lancedb.connect(uri)
        try:
            return db.open_table(TABLE)
        except (ValueError, FileNotFoundError):
            try:
                return db.create_table(TABLE, schema=_SCHEMA)
            except (ValueError, OSError):  # another agent created it meanwhile
                return db.open_table(TABLE)
    except _ERRORS as exc:
        raise StoreError(f"cannot open the Clade table at {uri}: {exc}") from exc


def _content_hash(category: str, content: str) -> str:
    return hashlib.sha256(f"{category}\n{content}".encode()).hexdigest()


def publish(ctx: Context, uri: str, agent: str | None = None) -> dict[str, Any]:
    """Publish this agent's warnings and active heuristics; returns how many were new."""
    origin = agent_name(ctx, agent)
    # Wall time, not ctx.now(): the table is shared by agents whose clocks may be
    # simulated (--speed) and differ; publication time must mean the same to all of them.
    now = int(time.time() * 1000)
    rows = []
    warnings = entry_items(ctx, 0.0, origin, categories=(Category.WARNING,),
                           statuses=(EntryStatus.CANDIDATE, EntryStatus.ACTIVE))
    heuristics = entry_items(ctx, 0.0, origin, categories=(Category.HEURISTIC,),
                             statuses=(EntryStatus.ACTIVE,))
    for item in [*warnings, *heuristics]:
        if item["provenance"] not in _LOCAL:
            continue
        chash = _content_hash(item["category"], item["content"])
        ev = item["evidence"]
        rows.append({
            "key": hashlib.sha256(f"{origin}\n{chash}".encode()).hexdigest(),
            "origin": origin, "content_hash": chash, "category": item["category"],
            "content": item["content"], "confidence": float(item["confidence"]),
            "decay_class": item["decay_class"], "tags": item["tags"],
            "strategy": item["strategy"], "regime": item["regime"],
            "is_bloodstain": bool(item["is_bloodstain"]), "validated": ev["validated"],
            "contradicted": ev["contradicted"], "episodes": ev["episodes"],
            "published_at": now,
        })
    table = _table(uri)
    if not rows:
        return {"uri": uri, "agent": origin, "offered": 0, "published": 0}
    try:
        before = table.count_rows()
        (table.merge_insert("key").when_not_matched_insert_all()
         .execute(pa.Table.from_pylist(rows, schema=_SCHEMA)))
        added = table.count_rows() - before
    except _ERRORS as exc:
        raise StoreError(f"cannot publish to the Clade table at {uri}: {exc}") from exc
    ctx.events.emit("CladePublish", ctx.now(), uri=uri, agent=origin, offered=len(rows),
                    published=added)
    return {"uri": uri, "agent": origin, "offered": len(rows), "published": max(added, 0)}


def pull(ctx: Context, uri: str, agent: str | None = None) -> dict[str, Any]:
    """Import every other agent's items through the gate as ``clade`` provenance."""
    me = agent_name(ctx, agent)
    table = _table(uri)
    try:
        rows = table.to_arrow().to_pylist()
    except _ERRORS as exc:
        raise StoreError(f"cannot read the Clade table at {uri}: {exc}") from exc
    items = []
    for row in rows:
        if row["origin"] == me:
            continue
        if _content_hash(row["category"], row["content"]) != row["content_hash"]:
            continue  # altered after publishing: not what its origin vouched for
        items.append({
            "category": row["category"], "content": row["content"],
            "confidence": min(1.0, max(0.0, float(row["confidence"]))),
            "decay_class": row["decay_class"], "tags": list(row["tags"] or []),
            "strategy": row["strategy"], "regime": row["regime"],
            "is_bloodstain": bool(row["is_bloodstain"]), "origin": row["origin"],
            "hash": "clade:" + row["key"], "source_id": row["key"],
        })
    result = import_items(ctx, entries=items, provenance="clade", origin="clade",
                          source=uri)
    return {"uri": uri, "agent": me, "rows": len(rows), "foreign": len(items), **result}
