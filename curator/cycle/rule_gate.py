"""The admission gate for rules the curator derives from an insight (SPEC §5 applied to §8 step 3).

Owns ``admit_rule``: the same gate as ``grimoire.gate.admit.admit`` (the five
factors, the firewall, skip/merge, the composite thresholds, the admission
log), with one difference: a derived rule is judged for novelty and
agreement against *rules* (heuristics and warnings) only. Against its own
parent insight it is always a near-duplicate (same condition, same numbers),
so ``admit`` would merge it back into the insight (an upvote) and no
heuristic could ever be derived; against other rules the gate's judgement
is exactly what it should be (a restatement of a known rule upvotes it, a
rule contradicting a confident one is quarantined).

Must run on the writer thread (like ``admit``). Must not decide what the rule
says: ``curator.cycle.derive`` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.context import Context
from grimoire.errors import NotFoundError
from grimoire.gate.admission import Candidate, Neighbour, assess
from grimoire.gate.decay import default_decay_class, effective_confidence
from grimoire.gate.quality import score_quality
from grimoire.ids import new_id
from grimoire.records import (
    Category,
    EntryStatus,
    GrimoireEntry,
    Provenance,
)
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["RULE_CATEGORIES", "admit_rule"]

RULE_CATEGORIES = (Category.HEURISTIC, Category.WARNING)
_NEIGHBOURS = 10


def admit_rule(ctx: Context, rule: GrimoireEntry, vector: npt.NDArray[np.float32],
               *, support: int, now: int) -> dict[str, Any]:
    """Gate ``rule`` (a fully built candidate entry) and apply the decision.

    ``rule.confidence`` is used as-is unless the gate admits at low confidence
    (SPEC: 0.3). A merge upvotes the matching rule and adds this rule's parents
    to it. Returns ``{"decision", "id", ...factors}`` like ``admit``.
    """
    hits = ctx.semantic.knn(vector, _NEIGHBOURS, EntryFilter(
        categories=RULE_CATEGORIES,
        statuses=(EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)))
    neighbours = [Neighbour(e, sim, effective_confidence(e, now, ctx.config.decay))
                  for e, sim in hits]
    nearest = max((n.similarity for n in neighbours), default=None)
    quality = score_quality(rule.content, novelty_similarity=nearest, cfg=ctx.config.quality)
    decision = assess(
        Candidate(category=rule.category, content=rule.content, claim=rule.claim,
                  support=support, event_time=now, provenance=Provenance.SELF_LEARNED),
        neighbours, now=now, cfg=ctx.config.admission, quality=quality)
    cfg = ctx.config.decay
    entry = dataclasses.replace(
        rule, id=new_id(now), quality_score=quality.total, created_at=now, last_accessed_at=now,
        updated_at=now, decay_class=rule.decay_class or default_decay_class(rule.category),
        confidence=min(cfg.max_confidence, max(cfg.min_confidence, (
            decision.confidence if decision.confidence is not None else rule.confidence))),
        status=EntryStatus.CANDIDATE)
    entry_id: str | None = None
    with ctx.semantic.transaction():
        if decision.decision == "admitted":
            ctx.semantic.insert_entry(entry, vector)
            entry_id = entry.id
        elif decision.decision == "merged" and decision.merge_target_id:
            entry_id = decision.merge_target_id
            _merge(ctx, entry_id, entry, now)
        elif decision.decision == "quarantined":
            ctx.semantic.quarantine(entry, vector, reason="; ".join(decision.reasons)
                                    or "contradicts a confident rule",
                                    conflicting_id=decision.conflicting_id, now=now)
            entry_id = entry.id
        ctx.semantic.log_admission(decision=decision.decision, factors=decision.factors,
                                   composite=decision.composite, candidate=entry.content,
                                   category=entry.category.value, entry_id=entry_id, now=now,
                                   off_topic=decision.off_topic, reasons=decision.reasons)
    return {"decision": decision.decision, "id": entry_id, **decision.to_dict(),
            "quality": quality.to_dict()}


def _merge(ctx: Context, target_id: str, rule: GrimoireEntry, now: int) -> None:
    target = ctx.semantic.get_entry(target_id)
    if target is None:
        raise NotFoundError(f"merge target {target_id} vanished")
    ctx.semantic.update_entry(dataclasses.replace(
        target,  # a merge restates: not evidence (issue 11), so neither ✓ nor confidence
        parent_entry_ids=tuple(dict.fromkeys(target.parent_entry_ids + rule.parent_entry_ids)),
        parent_episode_ids=tuple(dict.fromkeys(
            target.parent_episode_ids + rule.parent_episode_ids))[-200:],
        updated_at=now))
