"""Findings against stored claims: ADD, UPVOTE or EDIT, and which stored claims are contradicted.

Owns: matching new claims to existing ones (exact ``Claim.key`` first, then a
refined hour window of the same claim), the "meaningfully different effect"
rule that turns an UPVOTE into an EDIT, and the test of a stored metric or
outcome-rate claim against the current episodes (evidence against → DOWNVOTE).
Shared by the distiller and by causal discovery (matching only).
Must not: mine new findings or render text.

Evidence against a claim is a one-sided test of what the claim still asserts
when read modestly: an effect of at least half the one it was stored with,
and never less than the minimum effect of a finding. "Gas averages 6 gwei
(vs 24) between 02:00 and 04:00" asserts a mean at least 37% below the
overall mean; "swaps in high_vol: 90% negative (vs 30%)" a rate at least 30
points above the rate of the other swaps (the rest, as the scan measured it). A
DOWNVOTE needs the current episodes to reject that at family-wise ``alpha`` (Holm
over the claims checked), so a handful of unlucky episodes never contradicts a claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curator.distiller import stats
from curator.distiller.features import (
    Mask,
    Table,
    condition_mask,
    rate_population,
    window_width,
)
from curator.distiller.operations import NEGATIVE_RATE, POSITIVE_RATE, ExistingClaim, OpKind
from grimoire.config import DistillerConfig
from grimoire.records import Claim

__all__ = ["Against", "Match", "effect_changed", "find_against", "match_claims"]


@dataclass(frozen=True, slots=True)
class Match:
    kind: OpKind  # ADD, UPVOTE or EDIT
    existing: ExistingClaim | None


@dataclass(frozen=True, slots=True)
class Against:
    existing: ExistingClaim
    observed: Claim  # the claim's key, with the numbers observed now
    cell: Mask
    hits: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def effect_changed(old: Claim, new: Claim, edit_change: float) -> bool:
    """True when the effect-vs-baseline gap moved by more than ``edit_change`` of the old gap."""
    old_gap = old.effect - old.baseline
    new_gap = new.effect - new.baseline
    if old_gap == 0.0:
        return new_gap != 0.0
    return abs(new_gap - old_gap) / abs(old_gap) > edit_change


def _family(claim: Claim) -> tuple[str | None, str, str, str] | None:
    if "hour_window" not in claim.condition:
        return None
    rest = {k: v for k, v in claim.condition.items() if k != "hour_window"}
    refined = Claim(rest, claim.target, claim.direction, 0.0, 0.0, 0, strategy=claim.strategy)
    return claim.strategy, claim.target, claim.direction, refined.key


def _hours(window: Sequence[int]) -> set[int]:
    start = int(window[0])
    return {(start + i) % 24 for i in range(window_width(window))}


def _overlap(a: Claim, b: Claim) -> bool:
    try:
        return bool(_hours(a.condition["hour_window"]) & _hours(b.condition["hour_window"]))
    except (TypeError, ValueError, IndexError):
        return False  # a malformed stored window is never a refinement of anything


def match_claims(
    new: Sequence[Claim], existing: Sequence[ExistingClaim], edit_change: float
) -> tuple[list[Match], list[ExistingClaim]]:
    """One match per new claim, and the existing claims no new claim matched.

    Exact key matches are settled first so that a refined window never steals
    the entry of a claim that was confirmed as it stands.
    """
    used: set[int] = set()
    by_key: dict[str, list[int]] = {}
    for i, ex in enumerate(existing):
        by_key.setdefault(ex.claim.key, []).append(i)
    matches: list[Match | None] = [None] * len(new)
    for j, claim in enumerate(new):
        free = [i for i in by_key.get(claim.key, []) if i not in used]
        if free:
            used.add(free[0])
            old = existing[free[0]].claim
            kind = OpKind.EDIT if effect_changed(old, claim, edit_change) else OpKind.UPVOTE
            matches[j] = Match(kind, existing[free[0]])
    for j, claim in enumerate(new):
        if matches[j] is not None:
            continue
        family = _family(claim)
        for i, ex in enumerate(existing):
            if (family is not None and i not in used and _family(ex.claim) == family
                    and _overlap(ex.claim, claim)):
                used.add(i)
                matches[j] = Match(OpKind.EDIT, ex)
                break
        else:
            matches[j] = Match(OpKind.ADD, None)
    unmatched = [ex for i, ex in enumerate(existing) if i not in used]
    return [m for m in matches if m is not None], unmatched


def find_against(
    table: Table, claims: Sequence[ExistingClaim], cfg: DistillerConfig
) -> list[Against]:
    """The stored metric / outcome-rate claims that the current episodes contradict."""
    tested: list[tuple[Against, float]] = []
    for ex in claims:
        result = _test_against(table, ex, cfg)
        if result is not None:
            tested.append(result)
    rejected = stats.holm([log_p for _, log_p in tested], cfg.alpha)
    return [a for (a, _), r in zip(tested, rejected, strict=True) if r]


def _test_against(
    table: Table, ex: ExistingClaim, cfg: DistillerConfig
) -> tuple[Against, float] | None:
    claim = ex.claim
    if claim.direction not in ("higher", "lower"):
        return None
    mask = condition_mask(table, claim.condition, band_cut=claim.band_cut)
    if mask is None:
        return None
    if claim.target.startswith("metric:"):
        return _metric_against(table, ex, mask, cfg)
    if claim.target in (NEGATIVE_RATE, POSITIVE_RATE):
        return _rate_against(table, ex, mask, cfg)
    return None


def _metric_against(
    table: Table, ex: ExistingClaim, mask: Mask, cfg: DistillerConfig
) -> tuple[Against, float] | None:
    claim = ex.claim
    values = table.metrics.get(claim.target.removeprefix("metric:"))
    if values is None:
        return None
    present = ~np.isnan(values)
    cell = mask & present
    n = int(cell.sum())
    if n < max(2, cfg.min_support):
        return None
    base = float(values[present].mean())
    sample = values[cell]
    mean, var = float(sample.mean()), float(sample.var(ddof=1))
    claimed = abs(claim.effect - claim.baseline) / abs(claim.baseline) if claim.baseline else 0.0
    least = max(cfg.min_effect, claimed / 2.0) * abs(base)
    mu0 = base - least if claim.direction == "lower" else base + least
    t, df = stats.one_sample_t(mean, var, n, mu0)
    # against "lower": the mean is significantly above mu0; against "higher": below it
    log_p = stats.t_logsf(t if claim.direction == "lower" else -t, df)
    observed = Claim(dict(claim.condition), claim.target, claim.direction, mean, base, n,
                     math.exp(log_p), claim.strategy, band_cut=claim.band_cut)
    return Against(ex, observed, cell, None, {"test": "one_sample_t", "statistic": t,
                                              "df": df, "asserted_at_least": mu0}), log_p


def _rate_against(
    table: Table, ex: ExistingClaim, mask: Mask, cfg: DistillerConfig
) -> tuple[Against, float] | None:
    claim = ex.claim
    hits_col = table.negative if claim.target == NEGATIVE_RATE else table.positive
    population = rate_population(table, claim.condition)
    total = int(population.sum())
    cell = mask & population
    n = int(cell.sum())
    if n < cfg.min_support or total == 0:
        return None
    k = int((cell & hits_col).sum())
    good = int((population & hits_col).sum())
    base = good / total
    # What the claim asserts is what the scan required of it: a gap of at least
    # ``min_rate_gap`` (or half its own) against the rest of the population now.
    rest = (good - k) / (total - n) if total > n else base
    least = max(cfg.min_rate_gap, abs(claim.effect - claim.baseline) / 2.0)
    if claim.direction == "higher":
        r0 = min(1.0, rest + least)
        log_p = stats.binom_logcdf(k, n, r0)
    else:
        r0 = max(0.0, rest - least)
        log_p = stats.binom_logsf(k, n, r0)
    observed = Claim(dict(claim.condition), claim.target, claim.direction, k / n, base, n,
                     math.exp(log_p), claim.strategy, band_cut=claim.band_cut)
    return Against(ex, observed, cell, k, {"test": "binomial", "asserted_at_least": r0}), log_p
