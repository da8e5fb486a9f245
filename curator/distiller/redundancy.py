"""Redundant findings: one regularity seen through several overlapping conditions.

Owns the last pruning step of the distiller. Two findings about the same
target and direction whose episode sets overlap may be one regularity:

- nested (``swap`` ⊃ ``swap ∧ high_vol ∧ WETH/USDC``): the general one goes
  when, without the specific one's episodes, it no longer holds (the specific
  condition explains it); otherwise the specific one goes when it is no
  different from the rest of the general one (it adds nothing);
- overlapping but not nested (``swap 20:00–00:00`` and ``swap ∧ high_vol ∧
  WETH/USDC``, when high_vol happened to fall in the evenings): the weaker one
  goes when it no longer holds without the stronger one's episodes;
- contrary findings on one measure over one population, on disjoint episodes
  ("add_liquidity's return is higher" beside "rebalance's return is lower", when
  rebalances lose): the one that no longer holds without the other's episodes goes
  (each one's "otherwise" held the other's episodes) while the other holds without its;
  when neither does, the less significant one;
- two sides of one split, on opposite outcomes, whose conditions cover the
  population between them ("swaps above $6,400 lose" and "swaps up to $6,400
  win", or "on arbitrum lose" and "on ethereum win" when there are two chains):
  one comparison read from both ends. So are the two sides of one metric's split
  read at two cuts ("swaps of $6,200 or more lose" and "swaps up to $5,000 win"):
  the cut scan keeps the best cut of each side, and the far side's best cut need not
  be the near side's; what lies between the cuts belongs to either end. When one of the
  two no longer holds without the other's episodes, the one whose rate moves
  less from the base rate goes (the larger group's); the smaller, sharper
  statement says the same and more.

"Holds" re-runs the finding's own test on the remaining episodes against the
remaining population, with the same effect floor and at the run's Bonferroni
level (alpha / family size): a finding must stand on its own once the
stronger overlapping one is taken out, as it had to stand before. (At alpha
uncorrected, a 1-in-10,000 fluke in the evenings plus a few planted high_vol
swaps kept "avoid swaps 20:00–00:00" beside the real warning.) This step only
removes findings, so it cannot add false ones. Must not: test hypotheses that
were not findings.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from curator.distiller import stats
from curator.distiller.features import Mask, Table, condition_mask
from curator.distiller.operations import NEGATIVE_RATE, POSITIVE_RATE
from curator.distiller.scan import Hypothesis, ranks_with_ties
from grimoire.config import DistillerConfig
from grimoire.records import Claim

__all__ = ["drop_far_sides", "drop_redundant"]

_OPPOSITE = {NEGATIVE_RATE: POSITIVE_RATE, POSITIVE_RATE: NEGATIVE_RATE}


def drop_redundant(
    findings: list[Hypothesis], table: Table, cfg: DistillerConfig, family: int
) -> list[Hypothesis]:
    """``findings`` without the redundant ones; ``family`` is the size of the run's test family."""
    level = math.log(cfg.alpha) - math.log(max(1, family))
    dropped: set[int] = set()
    order = sorted(range(len(findings)), key=lambda i: findings[i].log_p)
    for a_pos, a in enumerate(order):
        for b in order[a_pos + 1:]:
            stronger, weaker = findings[a], findings[b]
            if _opposite_sides(stronger, weaker):
                drop = _one_side(stronger, weaker, table, cfg, level)
            elif _contrary(stronger, weaker):
                drop = _explained(stronger, weaker, table, cfg, level)
            elif (stronger.target != weaker.target or stronger.direction != weaker.direction
                    or not (stronger.cell & weaker.cell).any()):
                continue
            else:
                drop = _judge(stronger, weaker, table, cfg, level)
            if drop is not None:
                dropped.add(a if drop is stronger else b)
    return [h for i, h in enumerate(findings) if i not in dropped]


def drop_far_sides(
    findings: list[Hypothesis], stored: list[Claim], table: Table, cfg: DistillerConfig,
    family: int,
) -> list[Hypothesis]:
    """``findings`` without those that are the far side of a *stored* claim (its metric's
    other side, at another cut, on the opposite outcome; or a contrary finding on the same
    measure, ``_contrary``): the rules of a run (``_one_side``; a contrary finding goes
    when it no longer holds without the stored claim's episodes), with the stored claim
    read on these episodes (at its own cut). A run that sees only the far end
    ("smaller swaps win", "add_liquidity's return is higher") must not add it beside the
    claim learned before ("swaps of $6,200 or more lose", "rebalance's return is lower");
    it goes only when it is the weaker statement of the two and no longer holds without the
    stored claim's episodes (a sharper one is left to stand, and the curator's verdicts
    judge the stored one)."""
    level = math.log(cfg.alpha) - math.log(max(1, family))
    out = []
    for h in findings:
        far = False
        for claim in stored:
            other = _stored_reading(claim, h, table)
            if other is None:
                continue
            if _opposite_sides(h, other):
                far = _one_side(h, other, table, cfg, level) is h
            else:
                far = _contrary(h, other) and not _holds_without(h, other, table, cfg, level)
            if far:
                break
        if not far:
            out.append(h)
    return out


def _stored_reading(claim: Claim, h: Hypothesis, table: Table) -> Hypothesis | None:
    """A stored claim read on ``table`` as a finding over ``h``'s population, when it can be
    ``h``'s far side or contrary (a rate of either outcome, or ``h``'s own metric); None
    when its condition cannot be read here (a band stored without its cut, another
    extractor's term) or it covers none or all of the population."""
    if claim.target in _OPPOSITE:
        if h.target not in _OPPOSITE:
            return None
        values = None
    elif claim.target == h.target and claim.target.startswith("metric:"):
        values = table.metrics.get(claim.target.removeprefix("metric:"))
        if values is None:
            return None
    else:
        return None
    if "metric_band" in claim.condition and claim.band_cut is None:
        return None
    cell = condition_mask(table, claim.condition, claim.band_cut)
    if cell is None:
        return None
    cell = cell & h.population
    n, total = int(cell.sum()), int(h.population.sum())
    if n == 0 or n == total:
        return None
    if values is None:
        hits = table.negative if claim.target == NEGATIVE_RATE else table.positive
        effect = int((cell & hits).sum()) / n
        base = int((h.population & hits).sum()) / total
    else:
        effect, base = float(values[cell].mean()), float(values[h.population].mean())
    return Hypothesis(
        condition=dict(claim.condition), target=claim.target, direction=claim.direction,
        cell=cell, population=h.population, support=n, effect=effect, baseline=base,
        n_base=total, log_p=0.0, log_min_p=0.0, passes_effect=True, cut=claim.band_cut)


def _opposite_sides(a: Hypothesis, b: Hypothesis) -> bool:
    """Rates of opposite outcomes, both "higher", over one population, that are the two
    ends of one split: conditions that cover the population between them (a metric below
    and above one cut, an attribute's two values), or one metric's two sides at two cuts
    (``_one_metric_split``). Two values of a many-valued attribute ("bear" and
    "sideways") leave the other values out: ``_contrary`` reads them."""
    return (_OPPOSITE.get(a.target) == b.target and a.direction == b.direction == "higher"
            and bool(np.array_equal(a.population, b.population))
            and (not bool((a.population & ~(a.cell | b.cell)).any())
                 or _one_metric_split(a, b)))


def _contrary(a: Hypothesis, b: Hypothesis) -> bool:
    """Two findings on one measure in opposite senses (a metric lower under one condition,
    higher under another; one outcome's rate higher under one, the other outcome's under
    another) over one population, on disjoint episodes: each one's "otherwise" holds the
    other's episodes. When one of them is only the other seen from the rest of the
    population ("add_liquidity's return is higher" because rebalances, in the same
    population, lose), it no longer holds without the other's episodes, and ``_explained``
    drops it; two regularities each hold without the other and both stay. Two values of a
    many-valued attribute ("bear swaps lose", "bull swaps win") are read this way too."""
    same_measure = ((a.target == b.target and a.target.startswith("metric:")
                     and a.direction != b.direction)
                    or (_OPPOSITE.get(a.target) == b.target
                        and a.direction == b.direction == "higher"))
    return (same_measure and not bool((a.cell & b.cell).any())
            and bool(np.array_equal(a.population, b.population)))


def _one_metric_split(a: Hypothesis, b: Hypothesis) -> bool:
    """The same metric's lower and upper bands under the same other terms, at cuts that do
    not overlap (the lower one's at or below the upper one's): one ordering of the
    population read from its two ends, whatever the cut each end was best read at."""
    band_a, band_b = a.condition.get("metric_band"), b.condition.get("metric_band")
    if (not isinstance(band_a, list | tuple) or not isinstance(band_b, list | tuple)
            or band_a[0] != band_b[0] or {band_a[1], band_b[1]} != {"lower", "upper"}
            or a.cut is None or b.cut is None):
        return False
    rest_a = {k: v for k, v in a.condition.items() if k != "metric_band"}
    rest_b = {k: v for k, v in b.condition.items() if k != "metric_band"}
    lower, upper = (a, b) if band_a[1] == "lower" else (b, a)
    assert lower.cut is not None and upper.cut is not None
    return rest_a == rest_b and lower.cut <= upper.cut


def _explained(stronger: Hypothesis, weaker: Hypothesis, table: Table, cfg: DistillerConfig,
               level: float) -> Hypothesis | None:
    """Of two contrary findings (``_contrary``), the one the other explains: the one that no
    longer holds without the other's episodes while the other still holds without its (the
    size of the two gaps from the base says nothing here: "bear rebalances lose, 84% vs 63%"
    holds without the sideways ones, "sideways rebalances win, 66% vs 37%" does not without
    the bear ones); when neither holds without the other, the less significant one. None:
    each holds without the other, two regularities."""
    strong_holds = _holds_without(stronger, weaker, table, cfg, level)
    weak_holds = _holds_without(weaker, stronger, table, cfg, level)
    if strong_holds and weak_holds:
        return None
    return stronger if weak_holds else weaker


def _one_side(a: Hypothesis, b: Hypothesis, table: Table, cfg: DistillerConfig,
              level: float) -> Hypothesis | None:
    """Of two findings on opposite outcomes, the one that is the other read from the far
    end (it no longer holds without the other's episodes), keeping the sharper one."""
    if _holds_without(a, b, table, cfg, level) and _holds_without(b, a, table, cfg, level):
        return None  # two regularities (bull swaps win, bear swaps lose)
    return min((a, b), key=lambda h: abs(h.effect - h.baseline))


def _judge(
    stronger: Hypothesis, weaker: Hypothesis, table: Table, cfg: DistillerConfig, level: float
) -> Hypothesis | None:
    """The finding of the pair that is redundant, if any."""
    if _subset(weaker.cell, stronger.cell) or _subset(stronger.cell, weaker.cell):
        general, specific = ((stronger, weaker) if _subset(weaker.cell, stronger.cell)
                             else (weaker, stronger))
        if not _holds_without(general, specific, table, cfg, level):
            return general
        if not _distinct_within(specific, general, table, cfg, level):
            return specific
        return None
    return None if _holds_without(weaker, stronger, table, cfg, level) else weaker


def _subset(a: Mask, b: Mask) -> bool:
    return not bool((a & ~b).any())


def _values(h: Hypothesis, table: Table) -> npt.NDArray[np.float64] | None:
    if h.target in (NEGATIVE_RATE, POSITIVE_RATE):
        return None
    return table.metrics[h.target.removeprefix("metric:")]


def _holds_without(
    h: Hypothesis, other: Hypothesis, table: Table, cfg: DistillerConfig, level: float
) -> bool:
    """Does ``h`` hold on its episodes outside ``other``, against the rest outside ``other``?"""
    population = h.population & ~other.cell
    return _holds(h, h.cell & population, population, _values(h, table), table, cfg, level)


def _distinct_within(
    specific: Hypothesis, general: Hypothesis, table: Table, cfg: DistillerConfig, level: float
) -> bool:
    """Does ``specific`` differ from the rest of ``general``, in the same direction?"""
    values = _values(specific, table)
    return _holds(specific, specific.cell, general.cell, values, table, cfg, level)


def _holds(
    h: Hypothesis, cell: Mask, population: Mask, values: npt.NDArray[np.float64] | None,
    table: Table, cfg: DistillerConfig, level: float,
) -> bool:
    n, total = int(cell.sum()), int(population.sum())
    if n < cfg.min_support or total - n < 2:
        return False
    if values is None:
        hits = table.negative if h.target == NEGATIVE_RATE else table.positive
        k, good = int((cell & hits).sum()), int((population & hits).sum())
        rest_rate = (good - k) / (total - n)
        if k / n - rest_rate < cfg.min_rate_gap:
            return False
        return stats.hypergeom_logsf(k, total, good, n) <= level
    x, y = values[cell], values[population & ~cell]
    gap = float(x.mean() - y.mean())
    scale = abs(h.baseline) if h.baseline else 1.0
    if (gap < 0) != (h.direction == "lower") or abs(gap) / scale < cfg.min_effect:
        return False
    t, df = stats.welch_t(float(x.mean()), float(x.var(ddof=1)), x.size,
                          float(y.mean()), float(y.var(ddof=1)), y.size)
    if math.isnan(t):
        return False
    ranks, tie_term = ranks_with_ties(np.concatenate([x, y]))
    z = stats.mann_whitney_z(float(ranks[: x.size].sum()), x.size, y.size, tie_term)
    if t * z <= 0:
        return False
    log_p = math.log(2.0) + max(stats.t_logsf(abs(t), df), stats.normal_logsf(abs(z)))
    return log_p <= level
