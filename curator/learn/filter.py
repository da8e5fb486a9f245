"""Drop distilled findings that restate arithmetic, or that the data cannot yet support.

The distiller mines every metric an episode carries against every condition,
metric bands included. Some of those metrics are the outcome itself (an
action is negative exactly when its P&L is), are computed from one another
(pnl = size × return), or are derived from other fields (fees = gas × the
action's gas units × price + size × fee tier). A finding such as "avoid swap
when PnL is below -3: 344 of 344 were negative" or "fees average 16.7 when
gas is above 28 gwei" is true on every data set, noise included, and teaches
the agent nothing (a derived metric's findings restate those of its inputs:
cheap gas at 02:00 is the finding, cheap fees at 02:00 its echo).
``distiller.outcome_metrics``, ``coupled_metrics`` and ``derived_metrics``
name them; this module drops the operations whose claim uses them so.

An hour-of-day finding also needs episodes spanning ``min_days_for_hours``
(every hour seen at least twice): on the first morning, "gas averages 22.9
between 00:00 and 02:00 (vs 15.4 overall)" compares two hours with a baseline
made of the few other hours seen so far, and is gone once a whole day is in.

Dropping after the scan only ever makes the distiller's family-wise
correction stricter (the dropped hypotheses were counted in it). DOWNVOTEs
are never dropped: evidence against a stored claim is always applied.

Pure: operations in, operations out. Must not read or write a store.
"""

from __future__ import annotations

from collections.abc import Sequence

from curator.operations import Operation, OpKind
from grimoire.config import DistillerConfig

__all__ = ["leak_reason", "without_leaks"]

_DAY_MS = 86_400_000


def _coupled(cfg: DistillerConfig) -> set[frozenset[str]]:
    return {frozenset(pair) for pair in cfg.coupled_metrics if len(set(pair)) == 2}


def leak_reason(op: Operation, cfg: DistillerConfig) -> str | None:
    """Why ``op``'s claim restates arithmetic, or None when it is a finding."""
    target = op.claim.target
    band = op.claim.condition.get("metric_band")
    metric = str(band[0]) if isinstance(band, list | tuple) and band else None
    derived = set(cfg.derived_metrics)
    if target.startswith("metric:") and target.removeprefix("metric:") in derived:
        return f"{target.removeprefix('metric:')} is derived from other fields"
    if metric is None:
        return None
    if metric in derived:
        return f"the condition's {metric} is derived from other fields"
    if target.startswith("outcome:") and metric in cfg.outcome_metrics:
        return f"the outcome conditioned on its own measure {metric}"
    if target.startswith("metric:"):
        other = target.removeprefix("metric:")
        if other in cfg.outcome_metrics and metric in cfg.outcome_metrics:
            return f"{other} conditioned on {metric}: both measure the outcome"
        if frozenset((metric, other)) in _coupled(cfg):
            return f"{other} conditioned on {metric}: computed from one another"
    return None


def without_leaks(
    ops: Sequence[Operation], cfg: DistillerConfig, *, span_ms: int | None = None
) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """(kept operations, dropped operations with the reason).

    ``span_ms``: the time the distilled episodes cover (None: not checked).
    """
    kept: list[Operation] = []
    dropped: list[tuple[Operation, str]] = []
    short = span_ms is not None and span_ms < cfg.min_days_for_hours * _DAY_MS
    for op in ops:
        reason = None if op.op is OpKind.DOWNVOTE else leak_reason(op, cfg)
        if reason is None and short and op.op is not OpKind.DOWNVOTE \
                and "hour_window" in op.claim.condition:
            reason = f"hour-of-day window from less than {cfg.min_days_for_hours:g} days"
        if reason is None:
            kept.append(op)
        else:
            dropped.append((op, reason))
    return kept, dropped
