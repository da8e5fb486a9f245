"""``outcome.report``: how a retrieval's decision went, fed back into memory (SPEC §4, §9, §11).

For the retrieval's *entries* (episodes are append-only and only take part
in the weight learning):

- positive, followed: ``strength + 1`` and the decay clock restarts
  (``decay.reinforce``); for an entry without a structured claim the decision is
  recorded once in its evidence ledger, ``validated_count + 1``, and its confidence
  is the function of its ✓ / ✗ and provenance (``decay.evidence_confidence``, SPEC
  §13); a claim is confirmed only by the episodes the curator judges it on. A
  ``caused_success`` edge entry → decision (the retrieval id).
- negative, followed, same task (the entry's regime and strategy do not
  contradict the retrieval's): for an entry without a structured claim,
  contradiction evidence — the decision recorded once, ``contradicted_count + 1``
  and the confidence of its new counts; an entry with a claim keeps its confidence
  (its claim has its own validator, and a vote or a penalty would be a confidence no
  ✓ / ✗ explains). A ``caused_failure`` edge, and the entry's region quality
  (SPEC §11, from the curator's region model, neutral 0.5 without one) in the
  report: how likely the failure was the entry's fault. A different task: nothing
  (seed 003: it was not relevant).
- returned but not followed (positive or negative): an ``irrelevant`` edge,
  nothing else. Neutral outcomes change no entry.

``followed_ids`` must be a subset of the returned items. Left out, a positive or
neutral report counts every returned item as followed; a negative one blames none
(SPEC §11 penalises an entry only when the agent followed it, and a report that does
not say which item it followed cannot tell): it is recorded on the retrieval (the hit
rate counts it) with no vote, no edge and no weight learning, and its answer says
``attributed: false``. The rerank weights learn from the followed items' factor values
against the pool's mean (``HedgeWeights``; persisted in meta
``rerank_weights``; frozen when ``retrieval.learn_weights`` is false).

One report per retrieval: a second is refused with a ValidationError naming
``retrieval_id`` (feedback counted twice would double strength and votes),
and so is a report on a ``browse`` retrieval. Everything — outcome, entry
updates, edges, weights — commits in one transaction on the writer thread.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from grimoire.context import Context
from grimoire.errors import NotAvailableError, NotFoundError, ValidationError
from grimoire.gate.decay import evidence_confidence, reinforce
from grimoire.logs import get_logger
from grimoire.records import GrimoireEntry
from grimoire.retrieval.rerank import FACTORS
from grimoire.retrieval.stages.region import region_model
from grimoire.retrieval.stages.support import WEIGHTS_META, learned_weights, set_learned_weights
from grimoire.retrieval.stages.writes import wait
from grimoire.retrieval.weights import HedgeWeights
from grimoire.stores.semantic.evidence import decision_unit
from grimoire.stores.semantic.types import CausalEdge, EdgeKind, RetrievalRecord

__all__ = ["OUTCOMES", "decision_unit", "outcome_report"]

log = get_logger(__name__)

OUTCOMES = {"positive": 1.0, "negative": -1.0, "neutral": 0.0}
_PARAMS = {"retrieval_id", "outcome", "pnl", "followed_ids"}
_DERIVED = "derived"  # curator.cycle.transitions.DERIVED_TAG: a rule parameterized from an insight


def _validate(params: Mapping[str, Any]) -> tuple[str, str, float | None, list[str] | None]:
    unknown = set(params) - _PARAMS
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    rid = params.get("retrieval_id")
    if not isinstance(rid, str) or not rid or len(rid) > 256:
        raise ValidationError("is required and must be a retrieval id", field="retrieval_id")
    outcome = params.get("outcome")
    if outcome not in OUTCOMES:
        raise ValidationError(f"{outcome!r} is not one of: positive, negative, neutral",
                              field="outcome")
    pnl = params.get("pnl")
    if pnl is not None and (isinstance(pnl, bool) or not isinstance(pnl, int | float)
                            or not math.isfinite(pnl)):
        raise ValidationError("must be a finite number", field="pnl")
    followed = params.get("followed_ids")
    if followed is not None:
        if not isinstance(followed, list | tuple) or not all(
                isinstance(i, str) and i for i in followed):
            raise ValidationError("must be a list of item ids", field="followed_ids")
        followed = list(dict.fromkeys(followed))
    return rid, str(outcome), None if pnl is None else float(pnl), followed


def _region_quality(ctx: Context, entries: Sequence[GrimoireEntry]) -> dict[str, float]:
    """Each entry's region quality from the curator's model; neutral 0.5 without one."""
    neutral = dict.fromkeys((e.id for e in entries), 0.5)
    model = region_model(ctx) if entries else None  # the one retrieval reads, cached per cycle
    if model is None:  # none stored, unreadable (logged) or not fitted yet
        return neutral
    vectors = ctx.semantic.entry_vectors([e.id for e in entries])
    out = dict(neutral)
    for entry_id, vector in vectors.items():
        try:
            out[entry_id] = model.region_quality(model.assign(vector))
        except (ValidationError, NotAvailableError) as exc:  # e.g. another dimension
            log.warning("feedback.regions.assign_failed", entry_id=entry_id, error=str(exc))
    return out


def _same_task(entry: GrimoireEntry, context: Mapping[str, Any]) -> bool:
    regime, strategy = context.get("regime"), context.get("strategy")
    entry_regime = entry.market_regime.value if entry.market_regime else None
    return (regime is None or entry_regime is None or regime == entry_regime) and (
        strategy is None or entry.strategy is None or strategy == entry.strategy)


def _edge(entry_id: str, rid: str, kind: EdgeKind, outcome: str, pnl: float | None
          ) -> CausalEdge:
    what = {EdgeKind.CAUSED_SUCCESS: "followed in a decision that went well",
            EdgeKind.CAUSED_FAILURE: "followed in a decision that went badly",
            EdgeKind.IRRELEVANT: f"returned but not followed (outcome {outcome})"}[kind]
    return CausalEdge(entry_id, rid, kind, 1.0,
                      what + ("" if pnl is None else f", pnl {pnl:+g}"))


def _counts_decision(ctx: Context, entry: GrimoireEntry, rid: str, verdict: str,
                     now: int) -> bool:
    """Whether this decision is ✓ / ✗ evidence for ``entry``, recorded in its ledger if so.

    One definition of evidence (issue 11): every ✓ / ✗ is a ledger row, counted once. An
    entry with a structured claim is confirmed by what it claims (new episodes, judged by
    the curator); a decision that went well or badly after following it says nothing of
    the claim (cheap gas 02:00–04:00 is not truer because a swap then paid), so it moves
    strength and confidence only. An entry without a claim (told, summarised) has no
    other validator: the decision, once, is its evidence."""
    if entry.claim is not None or (_DERIVED in entry.tags and entry.parent_entry_ids):
        return False  # its claim (or its parent insight's) has its own validator
    return bool(ctx.semantic.record_evidence(entry.id, [decision_unit(rid)], verdict,
                                             cycle=_cycle(ctx), now=now))


def _cycle(ctx: Context) -> int:
    state = ctx.semantic.get_meta("curator_state", None)
    cycle = state.get("cycle", 0) if isinstance(state, Mapping) else 0
    return cycle if isinstance(cycle, int) and not isinstance(cycle, bool) else 0


def _apply(ctx: Context, rid: str, outcome: str, pnl: float | None,
           followed_ids: list[str] | None) -> dict[str, Any]:
    now = ctx.now()
    cfg = ctx.config.decay
    weights_after: HedgeWeights | None = None
    with ctx.semantic.transaction():
        record: RetrievalRecord | None = ctx.semantic.get_retrieval(rid)
        if record is None:
            raise NotFoundError(f"retrieval_id: no retrieval {rid!r}")
        if record.mode == "browse":
            raise ValidationError("a browse retrieval takes no outcome; retrieve with "
                                  "mode=deciding for decisions", field="retrieval_id")
        if record.outcome is not None:
            raise ValidationError(f"already reported ({record.outcome}); one report per "
                                  "retrieval", field="retrieval_id")
        items = {item["id"]: item for item in record.items}
        # A failure nobody says was followed is nobody's fault (module docstring).
        attributed = followed_ids is not None or outcome != "negative"
        followed = (list(items) if attributed else []) if followed_ids is None \
            else followed_ids
        strangers = [i for i in followed if i not in items]
        if strangers:
            raise ValidationError(f"not returned by this retrieval: {', '.join(strangers[:5])}",
                                  field="followed_ids")
        context: Mapping[str, Any] = next(
            (item["context"] for item in record.items if item.get("context")), {})
        entries = {i: e for i in items if items[i].get("kind") == "entry"
                   and (e := ctx.semantic.get_entry(i)) is not None}
        quality = _region_quality(ctx, [entries[i] for i in followed if i in entries]) \
            if outcome == "negative" else {}
        changes: list[dict[str, Any]] = []
        edges: dict[str, int] = {}
        for entry_id, entry in entries.items() if attributed else ():
            kind: EdgeKind | None = None
            updated: GrimoireEntry | None = None
            change: dict[str, Any] = {"id": entry_id, "confidence_before": entry.confidence}
            if entry_id not in followed:
                kind = EdgeKind.IRRELEVANT if outcome != "neutral" else None
            elif outcome == "positive":
                kind = EdgeKind.CAUSED_SUCCESS
                updated = reinforce(entry, now)
                if _counts_decision(ctx, entry, rid, "confirm", now):
                    ups = entry.validated_count + 1
                    updated = dataclasses.replace(updated, validated_count=ups, confidence=(
                        evidence_confidence(entry.provenance, ups, entry.contradicted_count,
                                            cfg)))
            elif outcome == "negative":
                kind = EdgeKind.CAUSED_FAILURE
                if _same_task(entry, context):
                    change["region_quality"] = quality.get(entry_id, 0.5)
                    if _counts_decision(ctx, entry, rid, "contradict", now):
                        downs = entry.contradicted_count + 1
                        updated = dataclasses.replace(
                            entry, contradicted_count=downs, confidence=evidence_confidence(
                                entry.provenance, entry.validated_count, downs, cfg))
                else:
                    change["skipped"] = "different regime or strategy: not evidence against it"
            if updated is not None:
                updated = dataclasses.replace(updated, updated_at=now)
                ctx.semantic.update_entry(updated)
                change.update(confidence_after=updated.confidence, strength=updated.strength,
                              validated_count=updated.validated_count,
                              contradicted_count=updated.contradicted_count)
                changes.append(change)
            if kind is not None:
                ctx.semantic.upsert_edge(_edge(entry_id, rid, kind, outcome, pnl), now=now)
                edges[kind.value] = edges.get(kind.value, 0) + 1
        weights = learned_weights(ctx)
        used = [{name: float(parts["value"]) for name, parts in items[i]["factors"].items()
                 if name in FACTORS} for i in followed if items[i].get("factors")]
        baseline = context.get("baseline") or None
        candidate = weights.update(used, OUTCOMES[outcome], baseline=baseline)
        if candidate is not weights:
            ctx.semantic.set_meta(WEIGHTS_META, candidate.to_dict())
            weights_after = candidate
        detail = {"pnl": pnl, "followed_ids": followed, "entries": changes, "edges": edges}
        ctx.semantic.set_retrieval_outcome(rid, outcome, detail=detail, now=now)
    if weights_after is not None:  # only once the transaction committed
        set_learned_weights(ctx, weights_after)
    log.info("feedback.outcome", retrieval_id=rid, outcome=outcome, updated=len(changes),
             edges=edges, learned=weights_after is not None)
    return {"updated": len(changes), "retrieval_id": rid, "outcome": outcome,
            "followed_ids": followed, "attributed": attributed, "entries": changes,
            "edges": edges,
            "weights": dict((weights_after or learned_weights(ctx)).weights)}


def outcome_report(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """Validate, wait for the retrieval's own log write, then apply on the writer thread."""
    rid, outcome, pnl, followed = _validate(params)
    if not ctx.writer.on_writer_thread():
        wait(ctx, rid)
    result: dict[str, Any] = ctx.writer.call(lambda: _apply(ctx, rid, outcome, pnl, followed))
    return result
