"""From tested hypotheses to the distiller's findings: significance, then redundancy.

Owns three choices, in order:

1. Significance at family-wise ``alpha``: Tarone's rule drops discrete
   hypotheses that cannot reach significance at all (a 3-episode cell), then
   Holm's step-down runs over every remaining hypothesis of the run (all
   metrics, all outcome rates). A finding also needs ``min_support`` episodes
   and the minimum effect, so that noise yields no rule.
2. One hour window per family (same target, direction and other condition
   terms): the most significant one. The scan statistic peaks at the window
   that matches the effect: a wider window dilutes the effect faster than it
   gains support, a narrower one loses support, so 02–04 beats 01–05 for gas
   that is low from 02:00 to 04:00.
3. Nested outcome-rate conditions (swap ⊂ swap ∧ high_vol ⊂ swap ∧ high_vol ∧
   WETH/USDC): the general one is dropped when the rest of it, outside the
   specific one, shows no effect (the specific condition explains it); the
   specific one is dropped when it is no different from the rest of the
   general one (it adds nothing).

Must not: build claims or compare with stored entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from curator import stats
from curator.distiller_features import Table, window_width
from curator.distiller_scan import Hypothesis
from curator.operations import NEGATIVE_RATE
from grimoire.config import DistillerConfig

__all__ = ["select"]


def select(
    hyps: Sequence[Hypothesis], table: Table, cfg: DistillerConfig
) -> tuple[list[Hypothesis], int]:
    """The findings among ``hyps`` and the size of the family they were corrected over."""
    significant, family = _significant(hyps, cfg)
    findings = _best_windows(significant)
    findings = _explain_away(findings, table, cfg)
    findings.sort(key=lambda h: (h.target, _cond_key(h.condition), h.direction))
    return findings, family


def _significant(hyps: Sequence[Hypothesis], cfg: DistillerConfig) -> tuple[list[Hypothesis], int]:
    if not hyps:
        return [], 0
    threshold = stats.tarone_threshold([h.log_min_p for h in hyps], cfg.alpha)
    testable = [h for h in hyps if h.log_min_p <= threshold]
    rejected = stats.holm([h.log_p for h in testable], cfg.alpha)
    out = [
        h for h, r in zip(testable, rejected, strict=True)
        if r and h.passes_effect and h.support >= cfg.min_support
    ]
    return out, len(testable)


def _cond_key(cond: dict[str, Any]) -> str:
    return json.dumps(cond, sort_keys=True, separators=(",", ":"))


def _best_windows(findings: list[Hypothesis]) -> list[Hypothesis]:
    best: dict[tuple[str, str, str], Hypothesis] = {}
    out: list[Hypothesis] = []
    for h in findings:
        window = h.condition.get("hour_window")
        if window is None:
            out.append(h)
            continue
        rest = {k: v for k, v in h.condition.items() if k != "hour_window"}
        family = (h.target, h.direction, _cond_key(rest))
        current = best.get(family)
        if current is None or _window_rank(h) < _window_rank(current):
            best[family] = h
    return out + list(best.values())


def _window_rank(h: Hypothesis) -> tuple[float, int, int]:
    window = h.condition["hour_window"]
    return (h.log_p, window_width(window), int(window[0]))


def _is_nested(general: Hypothesis, specific: Hypothesis) -> bool:
    if general is specific or general.target != specific.target:
        return False
    if general.direction != specific.direction or len(general.condition) >= len(
            specific.condition):
        return False
    return all(specific.condition.get(k) == v for k, v in general.condition.items())


def _explain_away(
    findings: list[Hypothesis], table: Table, cfg: DistillerConfig
) -> list[Hypothesis]:
    rates = [h for h in findings if h.hits is not None]
    dropped: set[int] = set()
    log_alpha = math.log(cfg.alpha)
    for general in rates:
        for specific in rates:
            if not _is_nested(general, specific):
                continue
            hits = table.negative if general.target == NEGATIVE_RATE else table.positive
            rest = general.cell & ~specific.cell
            n_rest = int(rest.sum())
            k_rest = int((rest & hits).sum())
            # Does the general condition still stand without the specific rows?
            total, good = general.n_base, int((table.rated & hits).sum())
            rest_holds = n_rest >= cfg.min_support and (
                k_rest / n_rest - general.baseline >= cfg.min_rate_gap
                and stats.hypergeom_logsf(k_rest, total, good, n_rest) <= log_alpha
            )
            if not rest_holds:
                dropped.add(id(general))
                continue
            # Is the specific condition different from the rest of the general one?
            k_spec = int(specific.hits or 0)
            within_good = k_spec + k_rest
            within_total = specific.support + n_rest
            distinct = (
                k_spec / specific.support - k_rest / n_rest >= cfg.min_rate_gap
                and stats.hypergeom_logsf(k_spec, within_total, within_good,
                                          specific.support) <= log_alpha
            )
            if not distinct:
                dropped.add(id(specific))
    return [h for h in findings if id(h) not in dropped]
