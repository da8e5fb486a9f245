"""What the curator's entries become when episodes are forgotten (``grimoire forget``).

The forget plan (``grimoire.forget``) decides, once, from the store as it was: which
entries lose evidence and what their ✓ / ✗ and cited support are once the forgotten
episodes no longer count (``recount_plan``), which are left without any support (removed),
and which L1 / L2 summaries quoted a forgotten episode (removed, then rebuilt from the
episodes they still cover). ``apply_recount`` writes those numbers (absolute, so running
it twice changes nothing), re-states each entry's sentence from them, and rebuilds the
summaries. Confidence stays the one function of ✓ / ✗ and provenance
(``decay.evidence_confidence``). Must not import the methods, the service or the facade.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from curator.cycle.sentences import sentence_for
from curator.cycle.summaries import write_summary
from curator.cycle.transitions import SUMMARY_TAG
from curator.hierarchy.episode_clusters import Cluster
from curator.hierarchy.summaries import l1_summary, l2_summary
from grimoire.context import Context
from grimoire.gate.decay import evidence_confidence
from grimoire.records import Episode, GrimoireEntry, Provenance

__all__ = ["apply_recount", "recount_plan"]

_TOLD = (Provenance.AGENT, Provenance.OWNER)


def _level(entry: GrimoireEntry) -> int | None:
    if SUMMARY_TAG not in entry.tags:
        return None
    return 2 if "summary:l2" in entry.tags else 1


def recount_plan(ctx: Context, citing: Sequence[str], forgotten: Collection[str]
                 ) -> dict[str, Any]:
    """For the entries that cite a forgotten episode: ``recount`` {id: [✓, ✗, support]},
    ``unsupported`` ids (no cited episode and no ✓ left: removed), and ``summaries``
    [{id, level, episodes, l1s}] to remove and rebuild from what they still cover."""
    gone = set(forgotten)
    recount: dict[str, list[int]] = {}
    unsupported: list[str] = []
    summaries: list[dict[str, Any]] = []
    for entry_id in citing:
        entry = ctx.semantic.get_entry(entry_id)
        if entry is None:
            continue
        kept = [p for p in entry.parent_episode_ids if p not in gone]
        level = _level(entry)
        if level is not None:
            summaries.append({"id": entry.id, "level": level, "episodes": kept,
                              "l1s": list(entry.parent_entry_ids)})
            continue
        rows = ctx.semantic.list_evidence(entry.id)
        lost = {r[0] for r in rows if r[0] in gone} | (set(entry.parent_episode_ids) & gone)
        if rows:  # counted per episode (issue 11): the absolute counts of what remains
            ups = sum(1 for r in rows if r[1] == "confirm" and r[0] not in gone)
            downs = sum(1 for r in rows if r[1] == "contradict" and r[0] not in gone)
        else:  # counted before the evidence table: nothing per episode to subtract
            ups, downs = entry.validated_count, entry.contradicted_count
        support = entry.claim.support if entry.claim is not None else 0
        support = max(ups + downs, support - len(lost))
        if (entry.parent_episode_ids and not kept and ups == 0
                and entry.provenance not in _TOLD):
            unsupported.append(entry.id)
            continue
        recount[entry.id] = [ups, downs, support]
    return {"recount": recount, "unsupported": unsupported, "summaries": summaries}


def _recounted(entry: GrimoireEntry, numbers: Sequence[int], gone: Collection[str],
               ctx: Context) -> GrimoireEntry:
    ups, downs, support = (int(n) for n in numbers)
    claim = entry.claim
    if claim is not None:
        claim = dataclasses.replace(claim, support=support)
    return dataclasses.replace(
        entry, validated_count=ups, contradicted_count=downs, claim=claim,
        confidence=evidence_confidence(entry.provenance, ups, downs, ctx.config.decay),
        parent_episode_ids=tuple(p for p in entry.parent_episode_ids if p not in gone))


def apply_recount(ctx: Context, plan: Mapping[str, Any], forgotten: Collection[str], *,
                  now: int, cycle: int) -> dict[str, int]:
    """Writer thread: store the planned numbers, re-state the sentences, rebuild the
    summaries (the planned ones were removed by then). Returns what it did."""
    gone = set(forgotten)
    changed = 0
    known = {e.id: e for e in ctx.semantic.list_entries(limit=None)}
    known.update(ctx.semantic.get_entries(plan.get("recount", {})))
    for entry_id, numbers in plan.get("recount", {}).items():
        entry = known.get(entry_id)
        if entry is None:
            continue
        new = _recounted(entry, numbers, gone, ctx)
        known[entry_id] = new
        text = sentence_for(new, known, ctx.config.distiller)
        vector = None
        if text != new.content:
            new = dataclasses.replace(new, content=text)
            vector = ctx.embedder.embed([text])[0]
        if new != entry:
            with ctx.semantic.transaction():
                ctx.semantic.update_entry(dataclasses.replace(new, updated_at=now), vector)
                ctx.semantic.add_curator_delta(
                    cycle=cycle, op="forget_recount", entry_id=entry_id, before=None,
                    after={"why": "episodes it cited were forgotten: recounted",
                           "validated": new.validated_count,
                           "contradicted": new.contradicted_count}, now=now)
            changed += 1
    rebuilt = _rebuild_summaries(ctx, plan.get("summaries", []), now=now, cycle=cycle)
    return {"recounted": changed, "summaries_rebuilt": rebuilt}


def _members(ctx: Context, ids: Sequence[str]) -> list[Episode]:
    found = [ctx.episodes.get(i) for i in ids]
    return sorted((e for e in found if e is not None), key=lambda e: (e.timestamp, e.id))


def _cluster(vectors: np.ndarray) -> Cluster:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    total = unit.sum(axis=0)
    n = len(unit)
    centroid = total / max(float(np.linalg.norm(total)), 1e-12)
    coherence = 1.0 if n == 1 else float((total @ total - n) / (n * (n - 1)))
    return Cluster(indices=tuple(range(n)), similarities=tuple(float(s) for s in unit @ centroid),
                   centroid=centroid.astype(np.float64), coherence=coherence)


def _rebuild_summaries(ctx: Context, plans: Sequence[Mapping[str, Any]], *, now: int,
                       cycle: int) -> int:
    made = 0
    examples = ctx.config.curator.summary_examples
    renamed: dict[str, str] = {}
    for spec in sorted(plans, key=lambda s: int(s["level"])):
        members = _members(ctx, spec["episodes"])
        if not members:
            continue
        if int(spec["level"]) == 1:
            vectors = ctx.episodes.vectors_for([m.id for m in members])
            draft = l1_summary(_cluster(np.asarray(vectors, np.float64)), members,
                               examples=examples)
        else:
            l1_ids = [renamed.get(i, i) for i in spec["l1s"]]
            l1s = [e for e in ctx.semantic.get_entries(l1_ids).values()]
            if not l1s:
                continue
            draft = l2_summary(l1s, members, examples=examples)
        vector = ctx.embedder.embed([draft.content])[0]
        renamed[str(spec["id"])] = write_summary(ctx, draft, vector, cycle, now)
        made += 1
    return made

