"""The admission path: a proposed entry through the gate and into the semantic store.

Every candidate entry, whether an agent proposes it (``entry.add``), the distiller or
causal discovery finds it, an import brings it or the curator derives it, goes through
``admit``: it scores quality, looks up the nearest entries, runs the gate (``admission``,
SPEC §5) and applies its decision (insert, merge as an upvote, skip, reject, or
quarantine), logging the decision with its five factor values. The gate and the write run
together on the writer thread, so two identical proposals cannot both be admitted.

The one module of the gate that writes: it applies the decision through the context's
semantic store. A proposal whose text instructs a model, or that was made from marked
text, is tagged ``untrusted:instructions`` here, on every path (``grimoire.guard``).
The API method (``grimoire.methods.entry``) validates params into a
``Proposal`` and calls it; so do the curator's learners.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import NotFoundError
from grimoire.gate.admission import AdmissionDecision, Candidate, Neighbour, assess
from grimoire.gate.decay import default_decay_class, effective_confidence
from grimoire.gate.decay import initial_confidence as provenance_confidence
from grimoire.gate.quality import score_quality
from grimoire.guard.instructions import MARK, instructs, is_marked
from grimoire.ids import new_id
from grimoire.logs import get_logger
from grimoire.records import (
    PAD,
    Category,
    Claim,
    DecayClass,
    EntrySource,
    EntryStatus,
    GrimoireEntry,
    Provenance,
    Regime,
)
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["MAX_CONTENT_CHARS", "NEIGHBOURS", "Proposal", "admit"]

log = get_logger(__name__)

MAX_CONTENT_CHARS = 4_000
NEIGHBOURS = 10


@dataclasses.dataclass(frozen=True, slots=True)
class Proposal:
    """A validated candidate entry, before the gate."""

    category: Category
    content: str
    provenance: Provenance = Provenance.SELF_LEARNED
    confidence: float | None = None
    decay_class: DecayClass | None = None
    tags: tuple[str, ...] = ()
    strategy: str | None = None
    regime: Regime | None = None
    source: EntrySource = dataclasses.field(default_factory=EntrySource)
    parent_episode_ids: tuple[str, ...] = ()
    parent_entry_ids: tuple[str, ...] = ()
    emotional_tag: PAD | None = None
    claim: Claim | None = None
    support: int = 1
    event_time: int | None = None
    is_bloodstain: bool = False


def _neighbours(ctx: Context, vector: np.ndarray, now: int) -> list[Neighbour]:
    hits = ctx.semantic.knn(vector, NEIGHBOURS, EntryFilter(
        statuses=(EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)))
    return [Neighbour(entry, sim, effective_confidence(entry, now, ctx.config.decay))
            for entry, sim in hits]


def _new_entry(ctx: Context, p: Proposal, decision: AdmissionDecision, quality: float,
               now: int) -> GrimoireEntry:
    if decision.confidence is not None:  # a low-composite admission: SPEC's 0.3
        confidence = decision.confidence
    elif p.confidence is not None:
        confidence = p.confidence
    else:
        confidence = provenance_confidence(p.provenance, ctx.config.decay)
    cfg = ctx.config.decay
    return GrimoireEntry(
        id=new_id(now), category=p.category, content=p.content,
        confidence=min(cfg.max_confidence, max(cfg.min_confidence, confidence)),
        quality_score=quality, decay_class=p.decay_class or default_decay_class(p.category),
        provenance=p.provenance, created_at=now, last_accessed_at=now,
        market_regime=p.regime, valid_from=p.event_time, parent_episode_ids=p.parent_episode_ids,
        tags=p.tags, source=p.source, emotional_tag=p.emotional_tag, strategy=p.strategy,
        claim=p.claim, parent_entry_ids=p.parent_entry_ids, is_bloodstain=p.is_bloodstain,
        status=EntryStatus.CANDIDATE, updated_at=now,
    )


def _merge(ctx: Context, target_id: str, p: Proposal, now: int) -> None:
    target = ctx.semantic.get_entry(target_id)
    if target is None:
        raise NotFoundError(f"merge target {target_id} vanished")
    parents = tuple(dict.fromkeys(target.parent_episode_ids + p.parent_episode_ids))[-200:]
    # A restatement is not evidence (issue 11): the merge keeps its episodes as provenance
    # but moves neither confidence nor ✓; only newly counted episodes do (curator cycle).
    ctx.semantic.update_entry(dataclasses.replace(
        target, parent_episode_ids=parents, updated_at=now))


def _marked(ctx: Context, p: Proposal) -> Proposal:
    """``p`` with ``MARK`` in its tags when its text instructs a model or it was made from
    marked text (a marked parent entry or episode): such an entry is kept but never made a
    rule (``curator.cycle.transitions``), whoever proposed it."""
    if MARK in p.tags:
        return p
    parents = [ctx.semantic.get_entry(i) for i in p.parent_entry_ids]
    tainted = (instructs(p.content)
               or any(e is not None and is_marked(e.tags) for e in parents)
               or _quotes_marked_episode(ctx, p))
    return dataclasses.replace(p, tags=(*p.tags, MARK)) if tainted else p


def _quotes_marked_episode(ctx: Context, p: Proposal) -> bool:
    """A parent episode is marked and the proposal carries its text (a quote of it)."""
    for episode_id in p.parent_episode_ids[:50]:
        episode = ctx.episodes.get(episode_id)
        if episode is not None and is_marked(episode.marks) and _quotes(p.content, episode.text):
            return True
    return False


def _quotes(content: str, text: str) -> bool:
    words = text.split()
    if len(words) < 4:
        return text.strip().lower() in content.lower()
    folded = " ".join(content.lower().split())
    # any run of four words of the episode's text, as written, inside the entry's text
    return any(" ".join(words[i:i + 4]).lower() in folded for i in range(len(words) - 3))


def admit(ctx: Context, p: Proposal, vector: np.ndarray | None = None, *,
          llm_scores: Mapping[str, float] | None = None, now: int | None = None,
          ) -> dict[str, Any]:
    """Run the gate and apply its decision. Must be called on the writer thread.

    ``llm_scores`` (the optional LLM's future utility, asked off the writer
    thread) override the rule-based factors of the same name. ``now`` is the time the
    entry is learned at (the curator's data time; default the clock): its decay clock
    starts there and the gate's recency is read against it.
    """
    now = ctx.now() if now is None else int(now)
    p = _marked(ctx, p)
    if vector is None:
        vector = ctx.embedder.embed([p.content])[0]
    neighbours = _neighbours(ctx, vector, now)
    nearest = max((n.similarity for n in neighbours), default=None)
    quality = score_quality(p.content, novelty_similarity=nearest, cfg=ctx.config.quality)
    decision = assess(
        Candidate(category=p.category, content=p.content, claim=p.claim, support=p.support,
                  event_time=p.event_time if p.event_time is not None else now,
                  provenance=p.provenance),
        neighbours, now=now, cfg=ctx.config.admission, quality=quality, llm_scores=llm_scores,
    )
    entry_id: str | None = None
    if decision.decision == "admitted":
        entry = _new_entry(ctx, p, decision, quality.total, now)
        ctx.semantic.insert_entry(entry, vector)
        entry_id = entry.id
    elif decision.decision == "merged" and decision.merge_target_id:
        _merge(ctx, decision.merge_target_id, p, now)
        entry_id = decision.merge_target_id
    elif decision.decision == "quarantined":
        entry = _new_entry(ctx, p, decision, quality.total, now)
        ctx.semantic.quarantine(entry, vector, reason="; ".join(decision.reasons) or
                                "contradicts a confident entry",
                                conflicting_id=decision.conflicting_id)
        entry_id = entry.id
    ctx.semantic.log_admission(decision=decision.decision, factors=decision.factors,
                               composite=decision.composite, candidate=p.content,
                               category=p.category.value, entry_id=entry_id, now=now,
                               off_topic=decision.off_topic, reasons=decision.reasons)
    result = {"decision": decision.decision, "id": entry_id, **decision.to_dict(),
              "quality": quality.to_dict()}
    log.info("admission.decision", decision=decision.decision, composite=decision.composite,
             category=p.category.value, entry_id=entry_id)
    return result
