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

An hour-of-day finding also needs its window to have come round: each of its hours seen on
``min_days_for_hours`` different days. On the first morning "gas averages 22.9 between
00:00 and 02:00 (vs 15.4 overall)" is a stretch of time that differed, which no test on
one day can tell from a time of day that differs: only the window's recurrence can. Once
it recurred, a day has passed, so every other hour has been seen too and the baseline is a
whole day's. The window's own hours decide, not the clock's: a 02:00-04:00 window has come
round by 04:00 on the second day, an 18:00-21:00 one only by 21:00 (a span of two whole
days, the rule before, held every finding back to the third morning).

A metric computed from another one the same episodes carry (a fee from gas × price
+ size × fee tier) shows every finding of its input again, a little diluted by its
other terms: "fees are lower 02:00–04:00" is the echo of "gas is lower 02:00–04:00".
No list of such metrics is configured by default (which metrics a data source
computes from which is the source's own business); the general rule
(``without_echoes``): two metrics are *coupled* when, over the episodes carrying
both, one is a near-monotone function of the other (|Spearman ρ| ≥
``distiller.echo_correlation``). Of two findings with the same condition and scope
on coupled metrics, only the one with the larger relative effect stays (a quantity
built from its input plus other terms moves less than the input does), and a finding
that conditions a metric on a band of a metric coupled with it is arithmetic.
``distiller.derived_metrics`` still names metrics a deployment knows to be derived.

Dropping after the scan only ever makes the distiller's family-wise
correction stricter (the dropped hypotheses were counted in it). DOWNVOTEs
are never dropped: evidence against a stored claim is always applied.

Pure: operations in, operations out. Must not read or write a store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from curator.distiller.features import days_per_hour, window_recurred
from curator.distiller.operations import Operation, OpKind
from curator.distiller.scan import ranks_with_ties
from grimoire.config import DistillerConfig
from grimoire.records import Episode

__all__ = ["coupled", "leak_reason", "without_echoes", "without_leaks"]



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
    ops: Sequence[Operation], cfg: DistillerConfig, *,
    timestamps: Sequence[int] | None = None,
) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """(kept operations, dropped operations with the reason).

    ``timestamps``: the times of the distilled episodes, for the hour windows' recurrence
    (None: not checked).
    """
    kept: list[Operation] = []
    dropped: list[tuple[Operation, str]] = []
    seen = None if timestamps is None else days_per_hour(np.asarray(timestamps, dtype=np.int64))
    for op in ops:
        reason = None if op.op is OpKind.DOWNVOTE else leak_reason(op, cfg)
        window = op.claim.condition.get("hour_window")
        if (reason is None and seen is not None and op.op is not OpKind.DOWNVOTE
                and isinstance(window, list | tuple) and len(window) == 2
                and not window_recurred(window, seen, cfg.min_days_for_hours)):
            reason = (f"hour-of-day window not yet seen on {cfg.min_days_for_hours:g} "
                      "different days")
        if reason is None:
            kept.append(op)
        else:
            dropped.append((op, reason))
    return kept, dropped


_MIN_SHARED = 20  # episodes carrying both metrics before their coupling is judged


def coupled(episodes: Sequence[Episode], a: str, b: str, threshold: float) -> bool:
    """True when, over the episodes carrying both, ``a`` is a near-monotone function of
    ``b`` (|Spearman ρ| ≥ ``threshold``): one is computed from the other (and maybe from
    other fields), so their findings are one regularity. ρ is taken within each kind of
    episode (type and action: a swap's fee and a deposit's are different functions of
    gas) and averaged, weighted by the episodes of each kind."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for e in episodes:
        if a in e.metrics and b in e.metrics:
            kind = (e.type.value, e.actions[0] if e.actions else (e.tool or ""))
            groups.setdefault(kind, []).append((e.metrics[a], e.metrics[b]))
    total, weighted = 0, 0.0
    for pairs in groups.values():
        if len(pairs) < _MIN_SHARED:
            continue
        x = np.array([p[0] for p in pairs], dtype=np.float64)
        y = np.array([p[1] for p in pairs], dtype=np.float64)
        if not (np.isfinite(x).all() and np.isfinite(y).all()) or x.std() == 0 or y.std() == 0:
            continue
        rho = np.corrcoef(ranks_with_ties(x)[0], ranks_with_ties(y)[0])[0, 1]
        if np.isfinite(rho):
            total += len(pairs)
            weighted += abs(float(rho)) * len(pairs)
    return total > 0 and weighted / total >= threshold


def _relative_effect(op: Operation) -> float:
    base = op.claim.baseline
    return abs(op.claim.effect - base) / abs(base) if base else float("inf")


def without_echoes(
    ops: Sequence[Operation], episodes: Sequence[Episode], cfg: DistillerConfig
) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """(kept operations, dropped echoes with the reason): see the module docstring."""
    cache: dict[frozenset[str], bool] = {}

    def linked(a: str, b: str) -> bool:
        key = frozenset((a, b))
        if key not in cache:
            cache[key] = coupled(episodes, a, b, cfg.echo_correlation)
        return cache[key]

    groups: dict[tuple[str | None, str], list[Operation]] = {}
    for op in ops:
        if op.op is not OpKind.DOWNVOTE and op.claim.target.startswith("metric:"):
            where = json.dumps(op.claim.condition, sort_keys=True, default=str)
            groups.setdefault((op.claim.strategy, where), []).append(op)
    dropped: dict[int, str] = {}
    for members in groups.values():
        ranked = sorted(members, key=_relative_effect, reverse=True)
        for i, weaker in enumerate(ranked):
            name = weaker.claim.target.removeprefix("metric:")
            for stronger in ranked[:i]:
                other = stronger.claim.target.removeprefix("metric:")
                if id(stronger) not in dropped and other != name and linked(name, other):
                    dropped[id(weaker)] = (f"{name} moves with {other} (coupled): the echo "
                                           f"of the {other} finding under the same condition")
                    break
    for op in ops:
        band = op.claim.condition.get("metric_band")
        if (id(op) in dropped or op.op is OpKind.DOWNVOTE or not op.claim.target.startswith(
                "metric:") or not isinstance(band, list | tuple) or not band):
            continue
        name, other = op.claim.target.removeprefix("metric:"), str(band[0])
        if name != other and linked(name, other):
            dropped[id(op)] = f"{name} conditioned on {other}: computed from one another"
    kept = [op for op in ops if id(op) not in dropped]
    return kept, [(op, dropped[id(op)]) for op in ops if id(op) in dropped]
