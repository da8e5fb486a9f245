"""The death reflection: ``grimoire testament --data DIR OUT`` (seed 004, SPEC §13 succession).

``write_testament(ctx, out)`` runs a final curator cycle (so the testament holds what the
agent knows at its last moment, judged on every episode it wrote), then writes a verified
bundle (``bundle``'s format and manifest: ``grimoire import`` reads it as any bundle) with
two more files:

    entries.jsonl    the active knowledge (every category but the curator's L1/L2 episode
                     summaries), with each entry's claim and the insight a derived rule
                     came from, plus the lessons' warnings whatever their status
    causal.jsonl     the causal graph: every edge with its weight and evidence count
    triples.jsonl    the knowledge graph's active triples
    lessons.jsonl    the costliest failures, one per line, costliest first: the episode
                     (an action that went wrong, or a safety incident), its cost (the loss
                     it reported, 0 when none) and the warnings it produced (``warnings``:
                     the source ids of the warnings that cite it as a parent episode or
                     counted it as confirming evidence)
    testament.json   the generation and the lifetime's figures (episodes by type and
                     outcome, the data's first and last time, gains and losses, ticks,
                     curator cycles, knowledge by category and status)
    PLAYBOOK.md      the last playbook, for the owner (never imported)

The manifest says ``"testament": {"generation": N, "lessons": n}``. A successor starts
from it with ``succession.inherit`` (``grimoire run --inherit OUT``). Costliest means: the
largest reported loss (``gain`` < 0) first, then importance (emergency, critical, …), then
the most recent. Everything is read on the data's own time (the final cycle's).
"""

from __future__ import annotations

import heapq
import os
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from curator.cycle.transitions import SUMMARY_TAG
from grimoire import __version__
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.portable.bundle import (
    FORMAT_VERSION,
    KIND,
    causal_items,
    entry_items,
    item_hash,
    triple_items,
    write_jsonl,
)
from grimoire.portable.manifest import MANIFEST, file_table, fsync_tree, write_json_atomic
from grimoire.records import (
    Category,
    EntryStatus,
    Episode,
    EpisodeType,
    Importance,
    Outcome,
)
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["GENERATION_KEY", "LESSONS", "TESTAMENT", "generation", "write_testament"]

GENERATION_KEY = "succession.generation"
LESSONS = "lessons.jsonl"
TESTAMENT = "testament.json"
_SEVERITY = {Importance.ROUTINE: 0, Importance.NOTABLE: 1, Importance.CRITICAL: 2,
             Importance.EMERGENCY: 3}
_LIVE = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)


def generation(ctx: Context) -> int:
    """This agent's generation: 0 for an original, its predecessor's + 1 for a successor."""
    value = ctx.semantic.get_meta(GENERATION_KEY, 0)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_failure(e: Episode) -> bool:
    if e.type is EpisodeType.SAFETY_INCIDENT:
        return True
    return e.type is EpisodeType.ACTION and e.outcome is Outcome.NEGATIVE


def _cost(e: Episode) -> float:
    return -float(e.gain) if e.gain is not None and e.gain < 0 else 0.0


def _scan(ctx: Context, keep: int) -> tuple[list[Episode], dict[str, Any]]:
    """One pass over every episode: the ``keep`` costliest failures and the figures."""
    by_type: Counter[str] = Counter()
    by_outcome: Counter[str] = Counter()
    first = last = None
    gains = losses = 0.0
    heap: list[tuple[tuple[float, int, int, str], Episode]] = []
    for e in ctx.episodes.scan():
        by_type[e.type.value] += 1
        if e.type is EpisodeType.ACTION:
            by_outcome[e.outcome.value] += 1
        first = e.timestamp if first is None else min(first, e.timestamp)
        last = e.timestamp if last is None else max(last, e.timestamp)
        if e.gain is not None:
            gains += max(0.0, float(e.gain))
            losses += _cost(e)
        if _is_failure(e):
            key = (_cost(e), _SEVERITY[e.importance], e.timestamp, e.id)
            if len(heap) < keep:
                heapq.heappush(heap, (key, e))
            elif key > heap[0][0]:
                heapq.heapreplace(heap, (key, e))
    figures = {
        "episodes": sum(by_type.values()), "episodes_by_type": dict(sorted(by_type.items())),
        "actions_by_outcome": dict(sorted(by_outcome.items())),
        "failures": by_outcome.get(Outcome.NEGATIVE.value, 0)
        + by_type.get(EpisodeType.SAFETY_INCIDENT.value, 0),
        "first_episode_at": first, "last_episode_at": last,
        "gains": round(gains, 6), "losses": round(losses, 6),
        "net": round(gains - losses, 6),
    }
    costliest = [e for _, e in sorted(heap, key=lambda pair: pair[0], reverse=True)]
    return costliest, figures


def _produced(ctx: Context, failures: Iterable[Episode]) -> dict[str, list[str]]:
    """``{episode id: ids of the live warnings it produced}``: the warnings that name it as a
    parent episode or counted it as confirming evidence."""
    wanted = {e.id for e in failures}
    out: dict[str, list[str]] = {i: [] for i in wanted}
    warnings = ctx.semantic.list_entries(
        EntryFilter(categories=(Category.WARNING,), statuses=_LIVE), limit=None)
    for w in warnings:
        cited = set(w.parent_episode_ids) | {
            episode for episode, verdict, _, _ in ctx.semantic.list_evidence(w.id)
            if verdict == "confirm"}
        for episode_id in sorted(cited & wanted):
            out[episode_id].append(w.id)
    return out


def _episode_view(e: Episode) -> dict[str, Any]:
    return {k: v for k, v in e.to_dict().items()
            if k in ("id", "text", "type", "timestamp", "outcome", "gain", "importance",
                     "strategy", "regime", "tool", "actions", "token_pair", "chain")}


def _knowledge(ctx: Context) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {}
    for e in ctx.semantic.list_entries(EntryFilter(), limit=None):
        counts.setdefault(e.category.value, Counter())[e.status.value] += 1
    return {c: dict(sorted(n.items())) for c, n in sorted(counts.items())}


def write_testament(ctx: Context, out: str | Path, *, origin: str | None = None,
                    final_cycle: bool = True) -> dict[str, Any]:
    """The death reflection into the new directory ``out``; see the module doc."""
    from curator.api import run_cycle

    target = Path(out)
    if target.exists():
        raise ValidationError(f"{target} already exists: choose a new testament directory",
                              field="out")
    origin = origin or ctx.data_dir.resolve().name
    cycle = run_cycle(ctx) if final_cycle else None
    now = int(cycle["now"]) if cycle is not None else ctx.now()
    keep = ctx.config.succession.lessons
    failures, figures = _scan(ctx, keep)
    produced = _produced(ctx, failures)
    lesson_ids = {w for ids in produced.values() for w in ids}
    # the curator's L1/L2 summaries describe episodes a successor never sees: not knowledge
    active = [item for item in entry_items(ctx, 0.0, origin, statuses=(EntryStatus.ACTIVE,))
              if SUMMARY_TAG not in item["tags"]]
    listed = {item["source_id"] for item in active}
    extra = [item for item in entry_items(ctx, 0.0, origin, categories=(Category.WARNING,),
                                          statuses=_LIVE)
             if item["source_id"] in lesson_ids and item["source_id"] not in listed]
    entries = [*active, *extra]
    lessons = []
    for e in failures:
        lesson = {"episode": _episode_view(e), "cost": _cost(e),
                  "warnings": produced.get(e.id, [])}
        lesson["hash"] = item_hash(lesson)
        lessons.append(lesson)
    gen = generation(ctx)
    last = ctx.semantic.get_meta("last_curator_cycle", {})
    figures.update({
        "ticks": ctx.tick, "curator_cycles": int(last.get("cycle", 0)) if last else 0,
        "knowledge": _knowledge(ctx),
        "causal_edges": len(ctx.semantic.list_edges()), "graph_triples": ctx.graph.count(),
    })
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True, mode=0o700)
    try:
        counts = {
            "entries": write_jsonl(partial / "entries.jsonl", entries),
            "causal": write_jsonl(partial / "causal.jsonl", causal_items(ctx)),
            "triples": write_jsonl(partial / "triples.jsonl", triple_items(ctx)),
        }
        n_lessons = write_jsonl(partial / LESSONS, lessons)
        testament = {"origin": origin, "generation": gen, "died_at": now,
                     "figures": figures, "lesson_warnings": len(lesson_ids)}
        write_json_atomic(partial / TESTAMENT, testament)
        book = ctx.config.playbook_path
        if book.exists():
            shutil.copy2(book, partial / "PLAYBOOK.md")
        fsync_tree(partial)
        write_json_atomic(partial / MANIFEST, {
            "kind": KIND, "format_version": FORMAT_VERSION, "grimoire_version": __version__,
            "origin": origin, "created_at_ms": now, "min_confidence": 0.0,
            "embedding_model": ctx.embedder.model_id, "counts": counts,
            "testament": {"generation": gen, "lessons": n_lessons},
            "files": file_table(partial),
        })
        os.replace(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    ctx.events.emit("Testament", now, out=str(target), generation=gen, lessons=n_lessons,
                    **counts)
    return {"out": str(target), "origin": origin, "generation": gen, "counts": counts,
            "lessons": n_lessons, "lesson_warnings": len(lesson_ids), "figures": figures,
            "final_cycle": cycle["cycle"] if cycle is not None else None}
