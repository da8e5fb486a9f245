"""From tested hypotheses to the distiller's findings: significance, then redundancy.

Owns three choices, in order:

1. Significance at family-wise ``alpha``: Tarone's rule drops discrete
   hypotheses that cannot reach significance at all (a 3-episode cell), then
   Holm's weighted step-down runs over every remaining hypothesis of the run
   (all metrics, all outcome rates; each hour-of-day scan shares the weight
   of ``window_scan_weight`` hypotheses). A finding also needs
   ``min_support`` episodes and the minimum effect, so that noise yields no
   rule.
2. One hour window per family (same target, direction and other condition
   terms): the most significant one. The scan statistic peaks at the window
   that matches the effect: a wider window dilutes the effect faster than it
   gains support, a narrower one loses support, so 02–04 beats 01–05 for gas
   that is low from 02:00 to 04:00. Likewise one cut per metric band (same
   condition, side included): the most significant of the cuts tried, for the
   same reason (a cut below the true threshold dilutes, one above loses support).
3. Redundancy (``redundancy``): of two findings that are one
   regularity seen through overlapping conditions, only the one that
   explains the other stays.

Must not: build claims or compare with stored entries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from curator.distiller import stats
from curator.distiller.features import Table, window_width
from curator.distiller.redundancy import drop_redundant
from curator.distiller.scan import Hypothesis
from grimoire.config import DistillerConfig

__all__ = ["select"]


def select(
    hyps: Sequence[Hypothesis], table: Table, cfg: DistillerConfig
) -> tuple[list[Hypothesis], int]:
    """The findings among ``hyps`` and the size of the family they were corrected over."""
    significant, family = _significant(hyps, cfg)
    findings = _best_of_scans(significant)
    findings = drop_redundant(findings, table, cfg, family)
    findings.sort(key=lambda h: (h.target, _cond_key(h.condition), h.direction))
    return findings, family


def _significant(hyps: Sequence[Hypothesis], cfg: DistillerConfig) -> tuple[list[Hypothesis], int]:
    if not hyps:
        return [], 0
    keep = stats.testable_weighted([h.log_min_p for h in hyps], [h.weight for h in hyps],
                                   cfg.alpha)
    testable = [h for h, k in zip(hyps, keep, strict=True) if k]
    rejected = stats.weighted_holm([h.log_p for h in testable], [h.weight for h in testable],
                                   cfg.alpha)
    out = [
        h for h, r in zip(testable, rejected, strict=True)
        if r and h.passes_effect and h.support >= cfg.min_support
    ]
    # the family's size in ordinary hypotheses (a window scan counts as window_scan_weight)
    return out, max(1, round(sum(h.weight for h in testable)))


def _cond_key(cond: dict[str, Any]) -> str:
    return json.dumps(cond, sort_keys=True, separators=(",", ":"))


def _best_of_scans(findings: list[Hypothesis]) -> list[Hypothesis]:
    """One finding per hour-window family and one per band (condition and side): the most
    significant window or cut."""
    best: dict[tuple[str, str, str], Hypothesis] = {}
    out: list[Hypothesis] = []
    for h in findings:
        if "hour_window" in h.condition:
            rest = {k: v for k, v in h.condition.items() if k != "hour_window"}
        elif "metric_band" in h.condition and h.cut is not None:
            rest = dict(h.condition)  # the cut is not in the condition: its cuts compete
        else:
            out.append(h)
            continue
        family = (h.target, h.direction, _cond_key(rest))
        current = best.get(family)
        if current is None or _scan_rank(h) < _scan_rank(current):
            best[family] = h
    return out + list(best.values())


def _scan_rank(h: Hypothesis) -> tuple[float, float, float]:
    window = h.condition.get("hour_window")
    if window is not None:
        return (h.log_p, window_width(window), int(window[0]))
    return (h.log_p, -h.support, h.cut or 0.0)
