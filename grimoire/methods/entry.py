"""Knowledge entries: ``entry.add`` through the admission gate, ``entry.get`` / ``entry.list``.

Every candidate entry, whether an agent proposes it or the distiller finds it,
goes through ``admit``: it scores quality, looks up the nearest entries,
runs the admission gate (SPEC §5) and applies its decision (insert, merge
as an upvote, skip, reject, or quarantine), logging the decision with its
five factor values. The gate and the write run together on the writer
thread, so two identical proposals cannot both be admitted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import NotFoundError, ValidationError
from grimoire.gate.admission import AdmissionDecision, Candidate, Neighbour, assess
from grimoire.gate.content import require_content
from grimoire.gate.decay import default_decay_class, effective_confidence
from grimoire.gate.decay import initial_confidence as provenance_confidence
from grimoire.gate.quality import score_quality
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
    parse_enum,
    parse_optional_enum,
)
from grimoire.records.text import require_unicode
from grimoire.retrieval.stages.mentions import index_new_entries
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["Proposal", "add_entry", "admit", "get_entry", "list_entries", "proposal_from_params"]

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


def _str_list(value: object, field: str, limit: int = 200) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError("must be a list of non-empty strings", field=field)
    if len(value) > limit:
        raise ValidationError(f"at most {limit} items", field=field)
    return tuple(value)


def _source(value: object) -> EntrySource:
    if value is None:
        return EntrySource()
    if not isinstance(value, Mapping) or set(value) - {"golem_id", "generation_number",
                                                       "owner_address"}:
        raise ValidationError("must be {golem_id, generation_number?, owner_address?}",
                              field="source")
    gen = value.get("generation_number")
    if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int) or gen < 0):
        raise ValidationError("must be an integer >= 0", field="source.generation_number")
    golem = value.get("golem_id", "local")
    owner = value.get("owner_address")
    if not isinstance(golem, str) or (owner is not None and not isinstance(owner, str)):
        raise ValidationError("golem_id and owner_address must be strings", field="source")
    return EntrySource(golem, gen, owner)


_PARAMS = {"category", "content", "provenance", "confidence", "decay_class", "tags", "strategy",
           "regime", "source", "parent_episode_ids", "emotional_tag"}


def proposal_from_params(params: Mapping[str, Any]) -> Proposal:
    """Validate ``entry.add`` params; the first bad field raises ValidationError naming it."""
    unknown = set(params) - _PARAMS
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    content = params.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("is required and must be a non-empty string", field="content")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(f"longer than {MAX_CONTENT_CHARS} characters", field="content")
    require_unicode(content, "content")
    require_content(content)  # the gate refuses "ok": a word or two with no claim
    if "category" not in params:
        raise ValidationError("is required", field="category")
    confidence = params.get("confidence")
    if confidence is not None and (isinstance(confidence, bool)
                                   or not isinstance(confidence, int | float)
                                   or not math.isfinite(confidence)
                                   or not 0.0 <= confidence <= 1.0):
        raise ValidationError("must be a number in [0, 1]", field="confidence")
    strategy = params.get("strategy")
    if strategy is not None and (not isinstance(strategy, str) or not strategy):
        raise ValidationError("must be a non-empty string", field="strategy")
    mood = params.get("emotional_tag")
    category = parse_enum(Category, params["category"], "category")
    provenance = parse_enum(Provenance, params.get("provenance", Provenance.AGENT.value),
                            "provenance")
    return Proposal(
        category=category,
        content=content.strip(),
        # Told, not learned: without a provenance an entry is the agent's word (the CLI sends
        # "owner" for the owner's); only Grimoire's learners write self_learned.
        provenance=provenance,
        # A warning from a death reflection is a bloodstain (seed 004).
        is_bloodstain=(category is Category.WARNING
                       and provenance is Provenance.DEATH_REFLECTION),
        confidence=None if confidence is None else float(confidence),
        decay_class=parse_optional_enum(DecayClass, params.get("decay_class"), "decay_class"),
        tags=_str_list(params.get("tags"), "tags"),
        strategy=strategy,
        regime=parse_optional_enum(Regime, params.get("regime"), "regime"),
        source=_source(params.get("source")),
        parent_episode_ids=_str_list(params.get("parent_episode_ids"), "parent_episode_ids",
                                     limit=1000),
        emotional_tag=None if mood is None else PAD.from_dict(mood, "emotional_tag"),
    )


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


def admit(ctx: Context, p: Proposal, vector: np.ndarray | None = None, *,
          llm_scores: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Run the gate and apply its decision. Must be called on the writer thread.

    ``llm_scores`` (the optional LLM's future utility, asked off the writer
    thread) override the rule-based factors of the same name.
    """
    now = ctx.now()
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


def add_entry(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    proposal = proposal_from_params(params)
    vector = ctx.embedder.embed([proposal.content])[0]  # off the writer thread
    # The optional LLM's view of future utility, also off the writer thread (SPEC §5).
    scorer = ctx.extras.get("admission_scorer")
    scores = scorer(proposal) if scorer is not None else None

    def job() -> dict[str, Any]:
        out = admit(ctx, proposal, vector, llm_scores=scores)
        if out["id"]:  # its entity mentions now, so the next query's graph backend sees it
            index_new_entries(ctx)
        return out

    result: dict[str, Any] = ctx.writer.call(job)
    if result["id"] and result["decision"] == "admitted":
        ctx.events.emit("GrimoireWrite", ctx.now(), kind="entry", count=1,
                        category=proposal.category.value)
    return result


def get_entry(ctx: Context, id: str) -> dict[str, Any]:
    if not isinstance(id, str) or not id:
        raise ValidationError("must be a non-empty string", field="id")
    entry = ctx.semantic.get_entry(id)
    if entry is None:
        raise NotFoundError(f"no entry with id {id}")
    data = entry.to_dict()
    data["effective_confidence"] = round(
        effective_confidence(entry, ctx.now(), ctx.config.decay), 4)
    return data


def list_entries(ctx: Context, *, category: str | None, status: str | None,
                 strategy: str | None, limit: int) -> dict[str, Any]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValidationError("must be an integer in [1, 1000]", field="limit")
    filters = EntryFilter(
        categories=None if category is None else (parse_enum(Category, category, "category"),),
        statuses=None if status is None else (parse_enum(EntryStatus, status, "status"),),
        strategies=None if strategy is None else (strategy,),
    )
    now = ctx.now()
    entries: Sequence[GrimoireEntry] = ctx.semantic.list_entries(filters, limit=limit)
    return {"entries": [
        {**e.to_dict(), "effective_confidence": round(
            effective_confidence(e, now, ctx.config.decay), 4)} for e in entries]}
