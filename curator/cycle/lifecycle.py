"""Curator phases that age, demote, prune and review knowledge (SPEC §8 steps 4, 5 and 7).

Decay is computed on read, never written back: ``confidence`` stays the
evidence-based value (votes, validations) and every reader (retrieval, the
admission gate, PLAYBOOK.md, these phases) uses
``decay.effective_confidence(entry, now)``. Persisting a decayed confidence
each cycle would decay it twice (once stored, once more on read) and would
rewrite every entry every cycle. So ``decay`` only *measures* this cycle's
decay for the GrimoireDecay event: for each active entry, its effective
confidence at the previous cycle's time (with today's evidence) against the
one now; ``entries_decayed`` counts those that lost something.

- ``demote_and_prune`` (step 5): active below 0.4 → demoted (out of
  PLAYBOOK.md); a derived rule whose insight is no longer active follows it
  out; ``consecutive_low_confidence`` counts cycles below 0.1, and at 3 the
  entry is archived (cold storage: ``entry.get`` still reads it, lists and
  retrieval do not); quality < 0.05 with < 2 accesses is archived too.
  Structural entries, warnings, bloodstains (and summaries, which MUS prunes)
  are exempt.
- ``review_quarantine`` (step 7): a held entry is released (as a candidate)
  when the entry it contradicted has dropped below the firewall's confidence,
  was reversed (its valid time ended) or is gone, or when it gained support
  itself (validated here); after
  ``curator.quarantine_max_cycles`` reviews without either it is rejected
  (archived, kept as the record of why).
- ``compact_episodes`` (step 7): merge the episodic store's fragments once
  enough of them have piled up.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from curator.cycle.promote import parent_active_map
from curator.cycle.state import LIVE, Change, Cycle, apply_changes, list_all, refresh
from curator.cycle.transitions import (
    demotion_reason,
    is_derived,
    is_reversed,
    low_confidence_count,
    prune_reason,
)
from grimoire.context import Context
from grimoire.gate.decay import effective_confidence
from grimoire.records import EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import QuarantineRecord

__all__ = ["compact_episodes", "decay", "demote_and_prune", "prune_edges", "review_quarantine"]


def decay(cy: Cycle) -> dict[str, Any]:
    """Step 4: how much the active entries decayed since the last cycle; GrimoireDecay."""
    cfg = cy.ctx.config.decay
    active = list_all(cy, (EntryStatus.ACTIVE,))
    since = cy.previous.last_now
    before = [effective_confidence(e, since, cfg) if since is not None else e.confidence
              for e in active]
    after = [cy.eff(e) for e in active]
    decayed = sum(1 for b, a in zip(before, after, strict=True) if a < b - 1e-12)
    n = len(active)
    event = {
        "entries_decayed": decayed,
        "avg_confidence_before": round(sum(before) / n, 4) if n else 0.0,
        "avg_confidence_after": round(sum(after) / n, 4) if n else 0.0,
    }
    cy.ctx.events.emit("GrimoireDecay", cy.now, **event)
    return {"active": n, **event}


def _set_status(status: EntryStatus, low: int | None = None) -> Any:
    def mutate(cur: GrimoireEntry) -> GrimoireEntry | None:
        if cur.status in (EntryStatus.ARCHIVED, EntryStatus.QUARANTINED):
            return None  # resolved elsewhere since the snapshot
        return dataclasses.replace(cur, status=status, consecutive_low_confidence=(
            cur.consecutive_low_confidence if low is None else low))
    return mutate


def _set_low(low: int) -> Any:
    def mutate(cur: GrimoireEntry) -> GrimoireEntry:
        return dataclasses.replace(cur, consecutive_low_confidence=low)
    return mutate


def demote_and_prune(cy: Cycle) -> dict[str, Any]:
    """Step 5: demote active < 0.4; archive after 3 cycles < 0.1 or at quality < 0.05."""
    cfg = cy.ctx.config.curator
    entries = list_all(cy, LIVE)
    status_of = {e.id: e.status for e in entries}
    changes: list[Change] = []
    counts: dict[str, Any] = {"demoted": 0, "pruned": 0, "pruned_low_quality": 0,
                              "low_confidence": 0}
    # Plain entries first, so a derived rule sees its insight's new status in this cycle.
    ordered = sorted(entries, key=is_derived)
    for entry in ordered:
        eff = cy.eff(entry)
        parent_ok = True
        if is_derived(entry):
            parent_ok = parent_active_map([entry], status_of)[entry.id]
        low = low_confidence_count(entry, eff, cfg)
        counts["low_confidence"] += int(low > 0)
        pruned = prune_reason(entry, low, cfg)
        demoted = demotion_reason(entry, eff, cfg, parent_active=parent_ok)
        detail = {"effective_confidence": round(eff, 4), "consecutive_low_confidence": low}
        if pruned is not None:
            status_of[entry.id] = EntryStatus.ARCHIVED
            counts["pruned"] += 1
            counts["pruned_low_quality"] += int(pruned.startswith("quality"))
            changes.append(Change(entry.id, "prune", _set_status(EntryStatus.ARCHIVED, low),
                                  why=pruned, detail=detail))
        elif demoted is not None:
            status_of[entry.id] = EntryStatus.DEMOTED
            counts["demoted"] += 1
            changes.append(Change(entry.id, "demote", _set_status(EntryStatus.DEMOTED, low),
                                  why=demoted, detail=detail))
        elif low != entry.consecutive_low_confidence:
            changes.append(Change(entry.id, "low_confidence", _set_low(low), record=False))
    apply_changes(cy, changes)
    return counts


def _reviews(ctx: Context, entry_id: str) -> int:
    return sum(1 for d in ctx.semantic.list_curator_deltas(entry_id=entry_id)
               if d.op == "quarantine_hold")


def _resolve(ctx: Context, record: QuarantineRecord, action: str, why: str, cycle: int,
             now: int) -> None:
    entry_id = record.entry.id
    with ctx.semantic.transaction():
        pending = ctx.semantic.get_quarantine(entry_id)
        if pending is None or pending.resolution is not None:
            return  # resolved since the snapshot
        if action == "release":
            after = ctx.semantic.release_quarantine(entry_id, now=now)
        elif action == "reject":
            after = ctx.semantic.reject_quarantine(entry_id, now=now)
        else:
            after = record.entry
        ctx.semantic.add_curator_delta(
            cycle=cycle, op=f"quarantine_{action}", entry_id=entry_id,
            before={"status": record.entry.status.value},
            after={"status": after.status.value, "why": why,
                   "detail": {"conflicting_id": record.conflicting_id}}, now=now)


def review_quarantine(cy: Cycle) -> dict[str, Any]:
    """Step 7a: release, keep holding, or reject every pending quarantined entry."""
    ctx = cy.ctx
    firewall = ctx.config.admission.firewall_contradicted
    counts = {"reviewed": 0, "released": 0, "rejected": 0, "held": 0}
    for record in ctx.semantic.list_quarantine(pending_only=True):
        counts["reviewed"] += 1
        held = record.entry
        conflict = ctx.semantic.get_entry(record.conflicting_id) if record.conflicting_id else None
        alive = conflict is not None and conflict.status not in (EntryStatus.ARCHIVED,
                                                                 EntryStatus.QUARANTINED)
        conflict_eff = cy.eff(conflict) if alive and conflict is not None else None
        if conflict is not None and alive and is_reversed(conflict):
            action = "release"
            why = "the entry it contradicted was reversed by the new episodes"
        elif conflict_eff is None or conflict_eff < firewall:
            action = "release"
            why = ("the entry it contradicted is gone" if conflict_eff is None else
                   f"the entry it contradicted fell to {conflict_eff:.2f} < {firewall}")
        elif held.validated_count > 0:
            action = "release"
            why = f"validated here {held.validated_count}x while held"
        elif _reviews(ctx, held.id) + 1 >= ctx.config.curator.quarantine_max_cycles:
            action = "reject"
            why = (f"the conflict ({record.conflicting_id} at {conflict_eff:.2f}) did not clear "
                   f"in {ctx.config.curator.quarantine_max_cycles} reviews")
        else:
            action = "hold"
            why = f"still contradicts {record.conflicting_id} at {conflict_eff:.2f}"
        counts["released" if action == "release" else "rejected" if action == "reject"
               else "held"] += 1
        ctx.writer.call(functools.partial(_resolve, ctx, record, action, why, cy.number, cy.now))
        refresh(cy, [held.id])
    return counts


def prune_edges(cy: Cycle) -> dict[str, Any]:
    """Causal edges earn their place: delete the inferred ones (auto, discovered, kg) that
    no decision was served on its causal chain and no discovery confirmed for
    ``retrieval.causal_edge_ttl_hours`` of the cycle's clock (data time). Explicit and
    outcome edges stay."""
    ttl_ms = int(cy.ctx.config.retrieval.causal_edge_ttl_hours * 3_600_000)
    pruned = cy.ctx.writer.call(lambda: cy.ctx.semantic.prune_unused_edges(cy.now - ttl_ms))
    return {"pruned": int(pruned)}


def compact_episodes(cy: Cycle) -> dict[str, Any]:
    """Step 7b: compact the episodic store when it has ``curator.compact_min_fragments``
    fragments or more. Compaction holds the store's write lock (0.3-0.5 s in the simulator
    at a few thousand rows), and the store also compacts itself every
    ``episodes.compact_every_appends`` flushes: compacting every cycle regardless would
    stall appends for nothing."""
    stats = cy.ctx.episodes.stats()
    if stats["fragments"] < cy.ctx.config.curator.compact_min_fragments:
        return {"compacted": 0, "fragments": stats["fragments"]}
    result = cy.ctx.writer.call(cy.ctx.episodes.compact)
    return {"compacted": 1, **{k: v for k, v in result.items()
                               if isinstance(v, int | float) and not isinstance(v, bool)}}
