"""The Clade exchange: agents share warnings, validated heuristics and validated insights
through one LanceDB table.

The table (``clade`` under a URI LanceDB opens natively: a local or network path,
or object storage such as ``s3://bucket/prefix``) holds one row per published
item: ``key`` (sha256 of origin and the entry's id; the merge key, so publishing
again adds nothing: an entry whose sentence the curator re-states is not sent again),
``origin`` (the publishing agent), ``content_hash`` (sha256 of category and content),
the entry's fields, its evidence counts (``validated``, ``contradicted``, ``episodes``)
``published_at`` and ``memory``: the publisher's FEED.json kind (``simulated`` or
``real``; an unmarked data directory counts as real, as ``import`` counts it).

``pull`` never mixes the two: it skips the rows whose ``memory`` differs from this agent's,
and the rows without one (published before the column existed, or the column added to an
old table: their kind is unknown), unless asked (``allow_mixed``, ``clade pull
--allow-mixed``); skipped rows are counted (``refused_mixed``) and stay pullable later.
A mixed pull into a marked directory is recorded in its FEED.json (``mixed_in``), as a
mixed ``import`` is. The curator cycle's step never mixes.

``publish`` sends this agent's own knowledge only (learned or told here: what it pulled
or inherited is never echoed back): warnings at any status that is alive, heuristics
once active, insights once active and confirmed here at least once (validated).
``pull`` reads the rows of every other origin it has not pulled yet and imports them
through ``transfer.import_items`` as ``clade`` provenance (admission gate, confidence ×
the clade weight, idempotent by key): an agent never re-imports its own items. Each
incoming item is first written as a ``clade_alert`` episode (ref ``clade:<key>``; the
entry names it as its parent episode), so the agent's memory records what it was told
and when, whatever the gate then decides.

``exchange`` is the curator cycle's Clade step (wired by the facade as a cycle hook when
``clade.uri`` is set): every ``clade.every_cycles`` cycles it publishes at most
``clade.max_publish`` new items and pulls at most ``clade.max_pull`` new foreign ones,
at the cycle's data time. What it published is recorded in meta (``clade.published.<key>``)
and what it pulled in the import ledger, so a restart neither re-sends nor re-imports
(and a row another agent published while this one was down is pulled at the next cycle).

Many agents write the table at once (README, "Many agents on one table"): LanceDB commits
each write atomically with a conditional put; Grimoire adds what it does not: a publish that
lost a race is merged again (idempotent by key), a pull takes one row per key, a create that
lost the race puts back the rows it hid, and the writer whose commit makes every
``clade.compact_every``-th version compacts the table.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from curator.cycle.transitions import LOCAL_PROVENANCE
from grimoire.context import Context
from grimoire.errors import StoreError, ValidationError
from grimoire.methods.episode import write_episodes
from grimoire.portable.bundle import entry_items
from grimoire.portable.transfer import import_items, imported_as
from grimoire.records import Category, EntryStatus
from grimoire.stores.marker import MARKER, read_marker
from playbook import write_atomic

__all__ = ["TABLE", "agent_name", "exchange", "publish", "pull"]

TABLE = "clade"
# This agent's own knowledge, learned or told here (one definition: curator.cycle.transitions).
_LOCAL = {p.value for p in LOCAL_PROVENANCE}
_SCHEMA = pa.schema([
    ("key", pa.string()), ("origin", pa.string()), ("content_hash", pa.string()),
    ("category", pa.string()), ("content", pa.string()), ("confidence", pa.float64()),
    ("decay_class", pa.string()), ("tags", pa.list_(pa.string())),
    ("strategy", pa.string()), ("regime", pa.string()), ("is_bloodstain", pa.bool_()),
    ("validated", pa.int64()), ("contradicted", pa.int64()), ("episodes", pa.int64()),
    ("published_at", pa.int64()), ("memory", pa.string()),
])
_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)
_HEX = re.compile(r"[0-9a-f]{64}")


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
            table = db.open_table(TABLE)
        except (ValueError, FileNotFoundError):
            try:
                return _put_back(db.create_table(TABLE, schema=_SCHEMA))
            except _ERRORS:  # another agent created it meanwhile (its commit won)
                return db.open_table(TABLE)
        if "memory" not in table.schema.names:  # a table from before the marker column
            try:
                table.add_columns({"memory": "CAST(NULL AS STRING)"})
            except _ERRORS:  # another agent added it meanwhile
                table = db.open_table(TABLE)
                if "memory" not in table.schema.names:
                    raise
        return table
    except _ERRORS as exc:
        raise StoreError(f"cannot open the Clade table at {uri}: {exc}") from exc


def _put_back(table: Any) -> Any:
    """Creating the table commits an Overwrite. When another agent created it (and
    published) between this one's look and its commit, LanceDB does not refuse the create:
    it commits the empty table on top as a later version, and the latest version has lost
    those rows. They are still in the version before it, so they are put back, merged by
    key (nothing is doubled; what others wrote on top of the empty table stays)."""
    made = int(table.version)
    if made <= 1:
        return table
    table.checkout(made - 1)
    before = table.to_arrow().to_pylist()
    table.checkout_latest()
    if before:
        _merge(table, pa.Table.from_pylist(before, schema=_SCHEMA), 4)
    return table


def memory_kind(ctx: Context) -> str:
    """This agent's memory as the Clade table records it: ``simulated`` or ``real``."""
    return "simulated" if ctx.simulated else "real"


def _content_hash(category: str, content: str) -> str:
    return hashlib.sha256(f"{category}\n{content}".encode()).hexdigest()


_PUBLISHED = "clade.published."


def _offer(ctx: Context, origin: str) -> list[dict[str, Any]]:
    """Rows for this agent's own warnings, active heuristics and validated insights."""
    now = int(time.time() * 1000)
    warnings = entry_items(ctx, 0.0, origin, categories=(Category.WARNING,),
                           statuses=(EntryStatus.CANDIDATE, EntryStatus.ACTIVE))
    rules = entry_items(ctx, 0.0, origin, categories=(Category.HEURISTIC, Category.INSIGHT),
                        statuses=(EntryStatus.ACTIVE,))
    rows = []
    for item in [*warnings, *rules]:
        ev = item["evidence"]
        if item["provenance"] not in _LOCAL:
            continue
        if item["category"] == Category.INSIGHT.value and ev["validated"] < 1:
            continue  # an insight is shared once this agent's outcomes confirmed it
        chash = _content_hash(item["category"], item["content"])
        rows.append({
            "key": hashlib.sha256(f"{origin}\n{item['source_id']}".encode()).hexdigest(),
            "origin": origin, "content_hash": chash, "category": item["category"],
            "content": item["content"], "confidence": float(item["confidence"]),
            "decay_class": item["decay_class"], "tags": item["tags"],
            "strategy": item["strategy"], "regime": item["regime"],
            "is_bloodstain": bool(item["is_bloodstain"]), "validated": ev["validated"],
            "contradicted": ev["contradicted"], "episodes": ev["episodes"],
            "published_at": now, "memory": memory_kind(ctx),
        })
    return rows


def publish(ctx: Context, uri: str, agent: str | None = None, *, limit: int | None = None,
            ledger: bool = False) -> dict[str, Any]:
    """Publish this agent's warnings, active heuristics and validated insights; returns how
    many were new. With ``ledger`` (the cycle's step), only items this agent never published
    are offered, at most ``limit``, and what was sent is recorded in meta."""
    origin = agent_name(ctx, agent)
    # Wall time, not ctx.now(): the table is shared by agents whose clocks may be
    # simulated (--speed) and differ; publication time must mean the same to all of them.
    rows = _offer(ctx, origin)
    if ledger:
        rows = [r for r in rows if ctx.semantic.get_meta(_PUBLISHED + r["key"]) is None]
    waiting = max(0, len(rows) - limit) if limit is not None else 0
    rows = rows[:limit] if limit is not None else rows
    table = _table(uri)
    if not rows:
        return {"uri": uri, "agent": origin, "offered": 0, "published": 0, "waiting": 0}
    cfg = ctx.config.clade
    try:
        merged = _merge(table, pa.Table.from_pylist(rows, schema=_SCHEMA), cfg.publish_attempts)
        # this call's own inserts (a sibling publishing at the same time is not counted)
        added = int(merged.num_inserted_rows)
    except _ERRORS as exc:
        raise StoreError(f"cannot publish to the Clade table at {uri}: {exc}") from exc
    if ledger:
        def record() -> None:
            with ctx.semantic.transaction():
                for r in rows:
                    ctx.semantic.set_meta(_PUBLISHED + r["key"], r["published_at"])

        ctx.writer.call(record)
    ctx.events.emit("CladePublish", ctx.now(), uri=uri, agent=origin, offered=len(rows),
                    published=added)
    compacted = _compact(table, int(merged.version), cfg.compact_every, cfg.keep_versions_s)
    return {"uri": uri, "agent": origin, "offered": len(rows), "published": max(added, 0),
            "waiting": waiting, "version": int(merged.version), **compacted}


# LanceDB's words for a write that lost a race to the siblings: its commit lost to theirs
# (lance retries a few times within its own timeout, then gives up with one of these), a
# compaction rewrote the files it read ("Incompatible transaction"), or removed the files
# of the old version it was reading ("Not found").
_LOST_RACE = re.compile(r"concurrent writer|conflict|incompatible|not found", re.IGNORECASE)


def _merge(table: Any, data: pa.Table, attempts: int) -> Any:
    """Insert the rows whose key the table lacks; a commit that lost the race to other
    writers is tried again after a jittered pause. Each try re-reads the table, so a row
    that landed (even when its commit's answer was lost) matches its key and is not added
    twice: the key makes the retry idempotent. Each retry reads the latest version: the one
    the handle read may be the one a compaction rewrote or removed."""
    for attempt in range(attempts):
        try:
            if attempt:  # the handle still reads the version that lost: read the latest
                table.checkout_latest()
            return table.merge_insert("key").when_not_matched_insert_all().execute(data)
        except _ERRORS as exc:
            if attempt + 1 >= attempts or not _LOST_RACE.search(str(exc)):
                raise
            time.sleep(random.uniform(0.5, 1.5) * 2 ** attempt)
    raise AssertionError("unreachable")  # attempts >= 1 (config: positive)


def _compact(table: Any, version: int, every: int, keep_s: float) -> dict[str, Any]:
    """The writer whose commit made a version that is a multiple of ``every`` compacts the
    table (each version number is written by exactly one commit, so one writer is elected
    per ``every`` commits, without a lock): small data files are merged, and the files of
    versions older than ``keep_s`` seconds are removed (a sibling still reading one fails
    its read, reports it and reads again at its next exchange). A compaction that loses a
    race is left to the next elected writer."""
    if version % every:
        return {}
    try:
        table.optimize(cleanup_older_than=timedelta(seconds=keep_s))
    except _ERRORS as exc:
        return {"compacted": False, "compact_error": str(exc)[:300]}
    return {"compacted": True}


def _new_rows(ctx: Context, table: Any, uri: str, me: str, limit: int | None,
              allow_mixed: bool) -> tuple[int, list[dict[str, Any]], int, int]:
    """(rows in the table, the foreign rows not pulled yet (at most ``limit``), how many more
    wait, how many were refused as the other kind of memory or of unknown kind). Only the
    keys are read to decide; the rows themselves are read by key."""
    try:
        heads = (table.search().select(["key", "origin", "memory"]).limit(None).to_arrow()
                 .to_pylist())
    except _ERRORS as exc:
        raise StoreError(f"cannot read the Clade table at {uri}: {exc}") from exc
    kind = memory_kind(ctx)
    fresh = [h for h in heads if h["origin"] != me and _HEX.fullmatch(str(h["key"]))
             and imported_as(ctx, f"clade:{h['key']}") is None]
    refused = {str(h["key"]) for h in fresh if h["memory"] != kind} if not allow_mixed else set()
    new = sorted({str(h["key"]) for h in fresh} - refused)
    take = new if limit is None else new[:limit]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(take), 200):
        chunk = ", ".join(f"'{k}'" for k in take[start:start + 200])
        try:
            rows += table.search().where(f"key IN ({chunk})").limit(None).to_arrow().to_pylist()
        except _ERRORS as exc:
            raise StoreError(f"cannot read the Clade table at {uri}: {exc}") from exc
    rows.sort(key=lambda r: (int(r["published_at"] or 0), str(r["key"])))
    # One row per key: two inserts of one key that raced each other both land (LanceDB does
    # not see them conflict); the first published is the item, the other is not a second one.
    once: dict[str, dict[str, Any]] = {}
    for row in rows:
        once.setdefault(str(row["key"]), row)
    return len(heads), list(once.values()), len(new) - len(take), len(refused)


def _alert(ctx: Context, row: dict[str, Any], now: int) -> str:
    """The ``clade_alert`` episode recording one incoming item (written once per key)."""
    ref = f"clade:{row['key']}"
    found = ctx.episodes.get_by_ref(ref)
    if found:
        return found[0].id
    severe = row["category"] == Category.WARNING.value
    params = {
        "text": f"Clade alert from {row['origin']}: {row['category']}: {row['content']}",
        "type": "clade_alert", "timestamp": now, "ref": ref,
        "importance": "critical" if row["is_bloodstain"] else "notable" if severe else "routine",
        **({"strategy": row["strategy"]} if row["strategy"] else {}),
        **({"regime": row["regime"]} if row["regime"] else {}),
    }
    return write_episodes(ctx, [params])[0]


def _record_mixed(ctx: Context, uri: str, rows: list[dict[str, Any]]) -> None:
    """A mixed pull into a marked directory is written in its FEED.json (``mixed_in``)."""
    found = read_marker(ctx.data_dir)
    if found is None:
        return
    others = sorted({str(r["memory"] or "unmarked") for r in rows} - {found["kind"]})
    if not others:
        return
    at = datetime.now(UTC).isoformat(timespec="seconds")  # when it was mixed in, as import
    mixed = [*found.get("mixed_in", []),
             *({"kind": k, "source": f"clade table {uri}", "at": at} for k in others)]
    write_atomic(ctx.data_dir / MARKER, json.dumps({**found, "mixed_in": mixed}, indent=2)
                 + "\n")


def pull(ctx: Context, uri: str, agent: str | None = None, *, limit: int | None = None,
         now: int | None = None, allow_mixed: bool = False) -> dict[str, Any]:
    """Import the other agents' items not pulled yet through the gate as ``clade``
    provenance, each recorded first as a ``clade_alert`` episode at ``now`` (default the
    clock). Rows of the other kind of memory (or of none) are skipped unless
    ``allow_mixed`` (see the module doc)."""
    if not isinstance(allow_mixed, bool):
        raise ValidationError("must be true or false", field="allow_mixed")
    me = agent_name(ctx, agent)
    now = ctx.now() if now is None else int(now)
    started = time.perf_counter()
    table = _table(uri)
    total, rows, waiting, refused = _new_rows(ctx, table, uri, me, limit, allow_mixed)
    read_ms = round((time.perf_counter() - started) * 1000, 1)
    items = []
    tampered = 0
    for row in rows:
        if _content_hash(row["category"], row["content"]) != row["content_hash"]:
            tampered += 1
            continue  # altered after publishing: not what its origin vouched for
        items.append({
            "category": row["category"], "content": row["content"],
            "confidence": min(1.0, max(0.0, float(row["confidence"]))),
            "decay_class": row["decay_class"], "tags": list(row["tags"] or []),
            "strategy": row["strategy"], "regime": row["regime"],
            "is_bloodstain": bool(row["is_bloodstain"]), "origin": row["origin"],
            "hash": "clade:" + row["key"], "source_id": row["key"],
            "parent_episode_ids": [_alert(ctx, row, now)],
        })
    result = import_items(ctx, entries=items, provenance="clade", origin="clade",
                          source=uri)
    if allow_mixed and ctx.memory is not None:
        _record_mixed(ctx, uri, rows)
    out = {"uri": uri, "agent": me, "rows": total, "foreign": len(items),
           "alerts": len(items), "tampered": tampered, "waiting": waiting,
           "refused_mixed": refused, "read_ms": read_ms, **result}
    if refused:
        out["note"] = (f"{refused} row(s) come from {_other(ctx)} memory or say none: "
                       f"this {memory_kind(ctx)} memory never mixes them in unless asked "
                       "(--allow-mixed)")
    return out


def _other(ctx: Context) -> str:
    return "real" if ctx.simulated else "simulated"


def exchange(ctx: Context, now: int, cycle: int) -> dict[str, Any]:
    """The curator cycle's Clade step (see the module doc): publish, then pull."""
    cfg = ctx.config.clade
    if cfg.uri is None:
        return {"skipped": "no clade.uri"}
    if cycle % cfg.every_cycles:
        return {"skipped": f"every {cfg.every_cycles} cycles"}
    sent = publish(ctx, cfg.uri, cfg.agent, limit=cfg.max_publish, ledger=True)
    started = time.perf_counter()
    got = pull(ctx, cfg.uri, cfg.agent, limit=cfg.max_pull, now=now)
    compaction: dict[str, Any] = {k: sent[k] for k in ("compacted", "compact_error")
                                  if k in sent}
    return {"published": sent["published"], "publish_waiting": sent["waiting"],
            "pulled": got["foreign"], "alerts": got["alerts"], "pull_waiting": got["waiting"],
            "entries": got["entries"], "tampered": got["tampered"],
            "pull_ms": round((time.perf_counter() - started) * 1000, 1),
            "pull_read_ms": got["read_ms"], **compaction}
