"""Carrying out a forget: tombstone first, erase by ids, rewrite the files, mark it done.

``forget(ctx, params)`` plans (``plan``), and unless ``dry_run``, writes the pending
tombstone (the intent, fsync'd), then applies it. ``_apply`` works from the tombstone's
ids alone, so it can run again: at the next open if a crash stopped it
(``resume_pending``), and on a restored backup (``apply_tombstones``), where the ids
still name rows. In order:

1. the retrieval log writes still in flight land first (they may name a forgotten item);
2. on the writer thread, under the curator's cycle lock: the episodes
   (``EpisodeStore.erase``: LanceDB rewritten and every older version removed, the
   journal rewritten, the in-memory index and BM25 postings rebuilt), the KG triples
   (``GraphStore.erase``: every version, index entry and head, then the file rewritten),
   the semantic rows (``SemanticStore.erase``: entries with their vectors and FTS
   postings, mentions, edges, evidence, logs, audit rows);
3. the entries that lost evidence recounted and re-stated, summaries rebuilt
   (``curator.api.forget_apply``), then ``semantic.sqlite`` rewritten (``scrub``: VACUUM
   with ``secure_delete``, WAL truncated) and PLAYBOOK.md compiled again;
4. the redo logs scrubbed (``stores.redo``): the erase's own records emptied (a repair
   applies the tombstone again), the ops about a forgotten id replaced, and the
   selector's text (kept in ``needles`` while the forget is pending) wherever it occurs;
   a replay still does what they did;
5. the in-memory caches that may hold a forgotten text dropped;
6. the ``done`` line.

Each step is idempotent (an id already gone costs nothing), so a crash anywhere leaves a
pending tombstone whose second run finishes the job.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from curator import api as curator_api
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.forget import needles, tombstones
from grimoire.forget.plan import make_plan, parse_selector
from grimoire.ids import new_id
from grimoire.logs import get_logger
from grimoire.stores.graph.codec import id_bytes

__all__ = ["apply_tombstones", "forget", "resume_pending"]

log = get_logger(__name__)

# ctx.extras keys of the retrieval stages' caches (texts, terms, candidate lists): dropped
# after a forget; each stage rebuilds its own on the next read.
_CACHE_PREFIXES = ("retrieval.", "mentions.")
_KEEP = frozenset({"retrieval.pending", "retrieval.hurry", "retrieval.starts",
                   "retrieval.reads.in_flight", "retrieval.log", "retrieval.weights",
                   "mentions.entry_rid"})


def forget(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """``forget``: see the module doc. ``dry_run``: the plan's counts and listing only."""
    dry_run = params.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ValidationError("must be true or false", field="dry_run")
    selector = parse_selector(params)
    plan = make_plan(ctx, selector)
    if dry_run:
        return {"dry_run": True, "kind": selector.kind, "would_remove": plan.counts(),
                **plan.listing(ctx)}
    now = curator_api.store_time(ctx)
    record = {"tombstone": new_id(now), "state": "pending", "kind": selector.kind,
              "at": now, "written_at_ms": int(time.time() * 1000), "counts": plan.counts(),
              "ids": plan.ids(), "curator": plan.curator}
    needles.save(ctx.data_dir, str(record["tombstone"]), selector.needles)
    tombstones.append(ctx.data_dir, record)
    done = _apply(ctx, record)
    return {"dry_run": False, "tombstone": record["tombstone"], "kind": selector.kind,
            "removed": plan.counts(), "stores": done}


def _apply(ctx: Context, record: Mapping[str, Any]) -> dict[str, Any]:
    from grimoire.retrieval.stages.writes import drain

    ids = record["ids"]
    episodes = list(ids.get("episodes", []))
    started = time.perf_counter()
    drain(ctx)

    redo = ctx.extras.get("stores.redo")

    def erase() -> dict[str, Any]:
        out: dict[str, Any] = {"episodes": ctx.episodes.erase(episodes)}
        with redo.forgetting() if redo is not None else contextlib.nullcontext():
            triples = list(ids.get("triples", []))
            out["triples"] = ctx.graph.erase(triples) if triples else 0
            out["semantic"] = ctx.semantic.erase(
                episode_ids=episodes, entry_ids=ids.get("entries", []),
                retrieval_ids=ids.get("retrieval", []),
                admission_ids=ids.get("admission", []), delta_ids=ids.get("delta", []))
        return out

    done = curator_api.forget_apply(ctx, record.get("curator", {}), episodes, erase,
                                    ctx.semantic.scrub)
    done["redo"] = _scrub_redo(ctx, ids, needles.load(ctx.data_dir, record["tombstone"]))
    with ctx.state_lock:
        for key in [k for k in ctx.extras if k.startswith(_CACHE_PREFIXES)
                    and k not in _KEEP]:
            del ctx.extras[key]
    tombstones.append(ctx.data_dir, {"tombstone": record["tombstone"], "state": "done",
                                     "at": curator_api.store_time(ctx)})
    needles.drop(ctx.data_dir, record["tombstone"])
    done["seconds"] = round(time.perf_counter() - started, 3)
    log.info("forget.done", tombstone=record["tombstone"], kind=record.get("kind"),
             episodes=done.get("episodes"), seconds=done["seconds"])
    return done


def _scrub_redo(ctx: Context, ids: Mapping[str, Any], texts: Sequence[str]) -> dict[str, int]:
    """The redo logs (``stores.redo``) lose every forgotten id and text: each is replaced
    in the records that hold it (``RedoLog.scrub``), the graph's raw 16-byte triple ids
    too. The journal's kept rows went with ``EpisodeStore.erase``."""
    redo = ctx.extras.get("stores.redo")
    if redo is None:
        return {}
    found = [str(v).encode() for values in ids.values() if isinstance(values, list)
             for v in values]
    found += [id_bytes(t) for t in ids.get("triples", [])]
    scrubbed: dict[str, int] = redo.scrub(found, [t.encode() for t in texts])
    return scrubbed


def resume_pending(ctx: Context) -> int:
    """At open: finish every forget a crash left pending; returns how many."""
    pending = tombstones.pending(ctx.data_dir)
    for record in pending:
        log.warning("forget.resume", tombstone=record["tombstone"], kind=record.get("kind"))
        _apply(ctx, record)
    return len(pending)


def apply_tombstones(ctx: Context, source: Path, since_ms: int = 0) -> dict[str, Any]:
    """After a restore: apply the tombstones of ``source`` (the backed-up data directory)
    written at or after ``since_ms`` (the backup's start, wall clock), and keep them in
    this directory's own file. Returns how many were applied."""
    applied = 0
    for record in tombstones.read(source):
        if int(record.get("written_at_ms", 0)) < since_ms:
            continue
        copy = {k: v for k, v in record.items() if k not in ("done_at",)}
        tombstones.append(ctx.data_dir, {**copy, "state": "pending"})
        _apply(ctx, copy)
        applied += 1
    return {"applied": applied, "source": str(source)}
