"""Curator phases that move knowledge up the hierarchy (SPEC §8 step 3).

- ``parameterize``: every *active* insight about a cost or gain metric
  yields one derived rule (``curator.cycle.derive``), a heuristic for a good window,
  a warning for a bad one, whose parent is the insight. It starts at the
  insight's effective confidence (a rule cannot be surer than what it was
  derived from) and goes through the rule gate (``curator.cycle.rule_gate``). An
  insight derives one rule in its lifetime; when the insight's numbers are
  later edited the rule's sentence is refreshed instead. Outside knowledge
  (an insight with clade / marketplace / ... provenance) must have been
  validated here at least once before a rule is derived from it.
- ``promote`` (runs first, so an insight promoted now is parameterized in
  the same cycle): candidate or demoted entries that meet their threshold
  become active (``curator.cycle.transitions.promotion_reason``); a newly derived
  rule is judged for promotion as soon as it is admitted.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.cycle.derive import derive_rule
from curator.cycle.rule_gate import RULE_CATEGORIES, admit_rule
from curator.cycle.state import (
    ALL_STATUSES,
    LIVE,
    Change,
    Cycle,
    apply_changes,
    entries,
    list_all,
    refresh,
)
from curator.cycle.transitions import (
    LOCAL_PROVENANCE,
    derived_from,
    is_established,
    promotion_reason,
)
from grimoire.gate.decay import default_decay_class, evidence_confidence
from grimoire.records import Category, EntryStatus, GrimoireEntry, Provenance

__all__ = ["TRIED_KEY", "parameterize", "parent_active_map", "promote", "promotion_change"]

#: meta: {insight id: the rule last proposed from it}, so a rule the gate skipped or
#: rejected is not proposed again every cycle (only once the insight's numbers change).
TRIED_KEY = "curator_parameterized"


def _children(cy: Cycle) -> dict[str, list[GrimoireEntry]]:
    out: dict[str, list[GrimoireEntry]] = {}
    for rule in list_all(cy, ALL_STATUSES, RULE_CATEGORIES):
        for parent in rule.parent_entry_ids:
            out.setdefault(parent, []).append(rule)
    return out


def _refresh(cy: Cycle, child: GrimoireEntry, content: str) -> Change:
    vector = cy.ctx.embedder.embed([content])[0]

    def mutate(cur: GrimoireEntry) -> GrimoireEntry | None:
        return None if cur.content == content else dataclasses.replace(cur, content=content)

    return Change(child.id, "refresh", mutate, embedding=vector,
                  why="the insight it was derived from was edited: sentence refreshed")


def _derive(cy: Cycle, entry: GrimoireEntry, vector: npt.NDArray[np.float32],
            insight: GrimoireEntry) -> dict[str, Any]:
    """Writer thread: the rule gate and the audit record, one job."""
    assert insight.claim is not None
    result = admit_rule(cy.ctx, entry, vector, support=insight.claim.support, now=cy.now)
    if result.get("id") and result.get("decision") == "admitted":
        _inherit_evidence(cy, str(result["id"]), insight)
    if result.get("id"):
        cy.ctx.semantic.add_curator_delta(
            cycle=cy.number, op="derive", entry_id=result["id"], before=None,
            after={"why": f"{result['decision']}: {entry.category.value} derived from insight "
                          f"{insight.id}",
                   "detail": {"parent": insight.id, "confidence": entry.confidence,
                              "composite": result.get("composite")}}, now=cy.now)
    return result


def _inherit_evidence(cy: Cycle, rule_id: str, insight: GrimoireEntry) -> None:
    """Writer thread: a derived rule starts from its parent's evidence (issue 11), the
    same counted episodes and so the same ✓ / ✗ and the confidence they give, never a bare
    confidence with ✓0."""
    semantic = cy.ctx.semantic
    rows = semantic.list_evidence(insight.id)
    ups = semantic.record_evidence(rule_id, [r[0] for r in rows if r[1] == "confirm"],
                                   "confirm", cycle=cy.number, now=cy.now)
    downs = semantic.record_evidence(rule_id, [r[0] for r in rows if r[1] == "contradict"],
                                     "contradict", cycle=cy.number, now=cy.now)
    rule = semantic.get_entry(rule_id)
    if rule is not None and (ups or downs):
        semantic.update_entry(dataclasses.replace(
            rule, validated_count=len(ups), contradicted_count=len(downs), updated_at=cy.now,
            confidence=evidence_confidence(rule.provenance, len(ups), len(downs),
                                           cy.ctx.config.decay)))


def parameterize(cy: Cycle) -> dict[str, Any]:
    """Step 3b: active cost/gain insights → derived heuristics (good window) or warnings."""
    counts: dict[str, Any] = {"insights": 0, "proposed": 0, "heuristics": 0, "warnings": 0,
                              "admitted": 0, "merged": 0, "skipped": 0, "rejected": 0,
                              "quarantined": 0, "refreshed": 0, "unvalidated": 0, "tried": 0}
    insights = [e for e in list_all(cy, (EntryStatus.ACTIVE,), (Category.INSIGHT,))
                if e.claim is not None and e.claim.target.startswith("metric:")]
    tried: dict[str, str] = dict(cy.ctx.semantic.get_meta(TRIED_KEY, None) or {})
    if not insights and not tried:
        return counts
    children = _children(cy)
    refreshes: list[Change] = []
    pending: list[tuple[GrimoireEntry, GrimoireEntry]] = []
    for insight in insights:
        rule = derive_rule(insight, cy.ctx.config.distiller)
        if rule is None:
            continue
        counts["insights"] += 1
        # Its own rule: derived from it (a merge may add more parents to a rule).
        mine = [c for c in children.get(insight.id, []) if derived_from(c) == insight.id]
        if mine:
            live = [c for c in mine if c.status is not EntryStatus.ARCHIVED
                    and c.content != rule.content and c.category is rule.category]
            refreshes.extend(_refresh(cy, c, rule.content) for c in live)
            continue
        if children.get(insight.id):
            continue  # an existing rule already absorbed this insight (a merge)
        if tried.get(insight.id) == rule.content:
            counts["tried"] += 1  # the gate skipped or rejected this very rule before
            continue
        if insight.provenance not in LOCAL_PROVENANCE and insight.validated_count < 1:
            counts["unvalidated"] += 1
            continue
        entry = GrimoireEntry(
            id="pending", category=rule.category, content=rule.content,
            confidence=cy.eff(insight), quality_score=0.0,
            decay_class=default_decay_class(rule.category), provenance=Provenance.SELF_LEARNED,
            created_at=cy.now, last_accessed_at=cy.now, market_regime=insight.market_regime,
            valid_from=insight.valid_from, parent_episode_ids=insight.parent_episode_ids[-50:],
            tags=rule.tags, source=insight.source, strategy=insight.strategy,
            parent_entry_ids=(insight.id,), status=EntryStatus.CANDIDATE, updated_at=cy.now)
        pending.append((insight, entry))
    counts["refreshed"] = len(apply_changes(cy, refreshes))
    admitted: list[str] = []
    if pending:
        vectors = cy.ctx.embedder.embed([e.content for _, e in pending])
        for (insight, entry), vector in zip(pending, vectors, strict=True):
            assert insight.claim is not None
            result = cy.ctx.writer.call(functools.partial(
                _derive, cy, entry, vector, insight))
            refresh(cy, [result.get("id")])
            tried[insight.id] = entry.content
            counts["proposed"] += 1
            counts["heuristics" if entry.category is Category.HEURISTIC else "warnings"] += 1
            decision = str(result["decision"])
            counts[decision] = counts.get(decision, 0) + 1
            if decision == "admitted" and result.get("id"):
                admitted.append(str(result["id"]))
    # Remember what was proposed, for the insights that are still active (bounded).
    active = {i.id for i in insights}
    kept = {k: v for k, v in sorted(tried.items()) if k in active}
    if kept != cy.ctx.semantic.get_meta(TRIED_KEY, None):
        cy.ctx.writer.call(functools.partial(cy.ctx.semantic.set_meta, TRIED_KEY, kept))
    # A rule derived from an active insight is judged for promotion at once (same cycle).
    known = entries(cy)
    fresh = [known[i] for i in admitted if i in known]
    changes = [c for e in fresh if (c := promotion_change(cy, e)) is not None]
    counts["promoted"] = len(apply_changes(cy, changes))
    return counts


def parent_active_map(entries: list[GrimoireEntry],
                      status_of: dict[str, EntryStatus]) -> dict[str, bool]:
    """For each derived rule: is the insight it was derived from (``derived_from``) active?

    Not any parent: one a merge added states another claim, and kept a rule listed whose
    own insight had been archived (its sentence no longer refreshed, its ✓ still growing)."""
    return {e.id: status_of.get(source) is EntryStatus.ACTIVE
            for e in entries if (source := derived_from(e)) is not None}


def promotion_change(cy: Cycle, entry: GrimoireEntry, parent_ok: bool = True) -> Change | None:
    """The change that makes ``entry`` active, if it qualifies now (re-checked when applied)."""
    cfg = cy.ctx.config.curator
    alpha = cy.ctx.config.distiller.alpha
    eff = cy.eff(entry)
    reason = promotion_reason(entry, eff, cfg, parent_active=parent_ok,
                              established=is_established(entry, alpha))
    if reason is None:
        return None

    def mutate(cur: GrimoireEntry) -> GrimoireEntry | None:
        if promotion_reason(cur, cy.eff(cur), cfg, parent_active=parent_ok,
                            established=is_established(cur, alpha)) is None:
            return None  # changed since the snapshot: no longer qualifies
        return dataclasses.replace(cur, status=EntryStatus.ACTIVE)

    return Change(entry.id, "promote", mutate, why=reason,
                  detail={"effective_confidence": round(eff, 4)})


def _counted(applied: list[Any]) -> dict[str, Any]:
    counts: dict[str, Any] = {"promoted": len(applied)}
    for item in applied:
        key = item.after.category.value
        counts[key] = counts.get(key, 0) + 1
    return counts


def promote(cy: Cycle) -> dict[str, Any]:
    """Step 3a: candidate / demoted entries that reached their threshold become active."""
    entries = list_all(cy, LIVE)
    status_of = {e.id: e.status for e in entries}
    parents = parent_active_map(entries, status_of)
    changes = [c for e in entries
               if (c := promotion_change(cy, e, parents.get(e.id, True))) is not None]
    return _counted(apply_changes(cy, changes))
