"""ExpeL distillation without an LLM: conditional regularities → insight operations (SPEC §7).

``distill`` mines a batch of episodes for conditions (hour-of-day windows,
regime, token pair, chain, tool, action, a metric below / above a cut point, and
action ∧ regime ∧ token pair) under which a metric level or an action's
outcome rate differs from its base, keeps what survives a family-wise test,
an effect floor and redundancy pruning, and compares the findings with the
stored claims: ADD (new), UPVOTE (confirmed), EDIT (same claim, refined window
or moved effect), DOWNVOTE (the episodes now contradict a stored claim).

Pipeline: ``features`` (columns) → ``scan`` (hypotheses
and tests, corrected by ``autocorr`` for episodes that are not
independent) → ``select`` (family-wise significance, one window per
family, then ``redundancy``; a far side of a stored claim's split goes too)
→ ``match`` (stored claims)
→ ``render``.

Pure: a list of episodes and claims in, a list of operations out. Must not:
read or write a store, set confidences (the facade does: ADD at 0.5) or
compress clusters (the curator does, SPEC §8 step 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from curator.distiller.features import ATTRIBUTES, Mask, Table, build_table
from curator.distiller.match import Against, find_against, match_claims
from curator.distiller.operations import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    ExistingClaim,
    Operation,
    OpKind,
    category_for_claim,
)
from curator.distiller.redundancy import drop_far_sides
from curator.distiller.scan import Hypothesis, scan
from curator.distiller.select import select
from curator.views.render import render_against, render_claim
from grimoire.config import DistillerConfig
from grimoire.errors import ValidationError
from grimoire.logs import get_logger
from grimoire.records import Claim, Episode, Regime

__all__ = ["distill"]

log = get_logger(__name__)


def distill(
    episodes: Sequence[Episode],
    existing: Sequence[ExistingClaim],
    cfg: DistillerConfig,
    *,
    strategy: str | None,
) -> list[Operation]:
    """Operations that bring the stored claims of ``strategy`` in line with ``episodes``.

    ``existing`` may hold claims of any learner and strategy: only this
    strategy's metric and outcome-rate claims are matched or contradicted.
    """
    _check(cfg)
    table = build_table(episodes, min_band_values=3 * cfg.min_support)
    hyps = scan(table, cfg)
    findings, family = select(hyps, table, cfg)
    mine = [ex for ex in existing if ex.claim.strategy == strategy
            and (ex.claim.target.startswith("metric:")
                 or ex.claim.target in (NEGATIVE_RATE, POSITIVE_RATE))]
    findings = drop_far_sides(findings, [ex.claim for ex in mine], table, cfg, family)
    claims = [_claim(h, strategy, h.cut) for h in findings]
    matches, unmatched = match_claims(claims, mine, cfg.edit_change)
    ops: list[Operation] = []
    for hyp, claim, match in zip(findings, claims, matches, strict=True):
        evidence = _evidence(hyp, family)
        ops.append(Operation(
            op=match.kind, category=category_for_claim(claim),
            claim=claim, content=render_claim(claim, evidence),
            target_entry_id=match.existing.entry_id if match.existing else None,
            parent_episode_ids=_parents(table, _support_rows(hyp, table), cfg),
            tags=_tags(claim), strategy=strategy, regime=_regime(claim),
            evidence=evidence,
        ))
    for against in find_against(table, unmatched, cfg):
        ops.append(_downvote(against, table, cfg, strategy))
    log.info("distiller.run.complete", episodes=table.size, hypotheses=len(hyps),
             family=family, findings=len(findings), strategy=strategy,
             **{kind.value.lower(): sum(op.op is kind for op in ops) for kind in OpKind})
    return ops


def _check(cfg: DistillerConfig) -> None:
    if not 0.0 < cfg.alpha < 1.0:
        raise ValidationError("must be in (0, 1)", field="distiller.alpha")
    if cfg.min_support < 2:
        raise ValidationError("must be at least 2", field="distiller.min_support")
    if cfg.min_effect < 0 or cfg.min_rate_gap < 0:
        raise ValidationError("must be >= 0", field="distiller.min_effect")
    if not all(0.0 < q < 1.0 for q in cfg.band_quantiles):
        raise ValidationError("every quantile must be in (0, 1)",
                              field="distiller.band_quantiles")
    unknown = sorted(set(cfg.hour_strata) - set(ATTRIBUTES))
    if unknown:
        raise ValidationError(f"unknown attributes {unknown}; choose from {list(ATTRIBUTES)}",
                              field="distiller.hour_strata")


def _claim(h: Hypothesis, strategy: str | None, band_cut: float | None) -> Claim:
    # A band's cut point is part of what the claim says ("when gas is above 31 gwei"):
    # kept in the claim, so that the curator can judge new episodes by it.
    return Claim(
        condition=dict(h.condition), target=h.target, direction=h.direction,
        effect=h.effect, baseline=h.baseline, support=h.support,
        p_value=math.exp(h.log_p), strategy=strategy, band_cut=band_cut,
    )


def _evidence(h: Hypothesis, family: int) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "support": h.support, "p_value": math.exp(h.log_p), "log_p": h.log_p,
        "effect": h.effect, "baseline": h.baseline, "n_base": h.n_base,
        "family_size": family, **h.detail,
    }
    if h.hits is not None:
        evidence["hits"] = h.hits
    if h.cut is not None:
        evidence["band_cut"] = h.cut
    return evidence


def _support_rows(h: Hypothesis, table: Table) -> Mask:
    """The episodes that make the case: the outcome's episodes for a rate, the cell for a level."""
    if h.target == NEGATIVE_RATE:
        rows: Mask = h.cell & table.negative
        return rows
    if h.target == POSITIVE_RATE:
        rows = h.cell & table.positive
        return rows
    return h.cell


def _parents(table: Table, rows: Mask, cfg: DistillerConfig) -> tuple[str, ...]:
    idx = np.flatnonzero(rows)
    if idx.size > cfg.max_parent_episodes:
        # the most recent ones: they are what the owner can still look up
        order = np.argsort(table.timestamps[idx], kind="stable")
        idx = np.sort(idx[order[-cfg.max_parent_episodes:]])
    return tuple(table.episodes[i].id for i in idx)


def _tags(claim: Claim) -> tuple[str, ...]:
    tags = ["distiller", claim.target.split(":", 1)[1]]
    for key in sorted(claim.condition):
        value = claim.condition[key]
        if key == "hour_window":
            tags.append("hour_window")
        elif key == "metric_band":
            tags.append(f"band:{value[0]}")
        else:
            tags.append(str(value))
    return tuple(dict.fromkeys(tags))


def _regime(claim: Claim) -> Regime | None:
    value = claim.condition.get("regime")
    try:
        return Regime(value) if isinstance(value, str) else None
    except ValueError:
        return None  # a regime name this build does not know stays in the claim only


def _downvote(
    against: Against, table: Table, cfg: DistillerConfig, strategy: str | None
) -> Operation:
    claim = against.observed
    evidence: dict[str, Any] = {
        "support": claim.support, "p_value": claim.p_value, "effect": claim.effect,
        "baseline": claim.baseline, "claimed_effect": against.existing.claim.effect,
        "claimed_baseline": against.existing.claim.baseline, **against.detail,
    }
    if against.hits is not None:
        evidence["hits"] = against.hits
    if claim.band_cut is not None:
        evidence["band_cut"] = claim.band_cut
    return Operation(
        op=OpKind.DOWNVOTE, category=category_for_claim(against.existing.claim),
        claim=claim, content=render_against(claim, evidence),
        target_entry_id=against.existing.entry_id,
        parent_episode_ids=_parents(table, against.cell, cfg),
        tags=_tags(claim), strategy=strategy, regime=_regime(claim), evidence=evidence,
    )
