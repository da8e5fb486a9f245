"""Enumerate the distiller's hypotheses (condition × target) and test each one.

Owns: which conditions are tried against which targets (a metric level against
the context: attributes, actions, hours; an outcome rate also against the bands of
measured metrics, each metric at several cut points), and each
hypothesis's statistics: for a metric level, Welch's t test and the
Mann–Whitney rank test of the episodes under the condition against the rest
(two-sided, the larger p-value of the two); for an outcome rate,
Fisher's exact test (hypergeometric, one-sided) of an action's episodes
against all action episodes, and of a condition on an action against that
action's other episodes. Every hypothesis with enough support is
returned, tested or not, because the family-wise correction must count it.
Must not: correct for multiplicity, choose among findings or build claims
(``select`` and ``distiller`` do).

A metric's hour-of-day windows are tested within strata (``distiller.hour_strata``,
the regime by default): on the metric less its stratum's mean, as in an analysis of
covariance with the stratum as a factor. The clock does not choose the regime, so under
"the hour does not matter" the residuals have one distribution inside and outside every
window and both tests keep their level; what the stratification removes is the slow,
autocorrelated swing of levels between regimes, which otherwise dominates the variance
of a window's mean (×3–4 on 4 days of simulated volume). The claim keeps the raw levels.

A measured metric as an outcome's condition ("swaps of more than $6,200 lose") is a scan
too: the metric is cut at each of ``distiller.band_quantiles`` among the action's episodes,
each cut read on both sides. Fixed thirds would dilute any effect whose threshold lies
inside a third (a top third from $5,500 holds a quarter of base-rate swaps under a $6,200
cut). The cuts of one metric share ``distiller.band_scan_weight`` hypotheses' worth of alpha
equally (weighted Holm: Bonferroni over the K cuts within the scan's share), so trying more
cuts makes each one harder to pass and never adds false findings; ``select`` keeps the
most significant cut of a side.

Both tests are then corrected for autocorrelation (``autocorr``):
the statistics of the candidates are scaled down by the variance inflation of
their condition, and a rate's 2×2 table shrinks to its effective counts.

Two shortcuts never change which hypotheses can be rejected: a hypothesis
whose effect is below the configured minimum cannot become a finding, and one
whose normal-approximation p-value already exceeds alpha has an exact
p-value above alpha too (Student's t is less peaked than the normal). Both get
log p = 0 instead of an exact tail, which only ever makes Holm stricter.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.distiller import stats
from curator.distiller.autocorr import variance_inflation
from curator.distiller.features import (
    ATTRIBUTES,
    Mask,
    Table,
    band_cuts,
    days_per_hour,
    hour_window_mask,
    window_recurred,
)
from curator.distiller.operations import NEGATIVE_RATE, POSITIVE_RATE
from grimoire.config import DistillerConfig

__all__ = ["Hypothesis", "ranks_with_ties", "scan"]

METRIC_TEST = "welch_t+mann_whitney"
STRATIFIED_METRIC_TEST = "stratified_welch_t+mann_whitney"
_MARKET_ATTRIBUTES = ("token_pair", "chain")  # what is traded where (not the regime: a state)
RATE_TEST = "fisher_exact"


@dataclass(slots=True)
class Hypothesis:
    condition: dict[str, Any]
    target: str  # metric:<name> | outcome:negative_rate | outcome:positive_rate
    direction: str  # higher | lower
    cell: Mask  # the rows under the condition that carry the target (the support)
    population: Mask  # the rows the condition is compared within (cell ⊂ population)
    support: int
    effect: float  # metric mean or outcome rate under the condition
    baseline: float  # metric mean or outcome rate over the population
    n_base: int
    log_p: float
    log_min_p: float  # smallest attainable log p (-inf for a continuous test)
    passes_effect: bool
    hits: int | None = None  # rates: episodes with the outcome under the condition
    weight: float = 1.0  # share of alpha, relative to an ordinary hypothesis
    detail: dict[str, Any] = field(default_factory=dict)
    cut: float | None = None  # a metric_band's cut point (the scan tries several)


Windows = list[tuple[dict[str, Any], Mask]]
Item = tuple[dict[str, Any], Mask, "float | None"]  # a condition, its rows, its band cut


def scan(table: Table, cfg: DistillerConfig) -> list[Hypothesis]:
    windows: Windows = list(_windows(table, cfg))
    order = np.argsort(table.timestamps, kind="stable")  # for the autocorrelation correction
    hyps = [*_scan_metrics(table, windows, order, cfg),
            *_scan_rates(table, windows, order, cfg)]
    _weigh_window_scans(hyps, cfg.window_scan_weight)
    _weigh_band_scans(hyps, cfg.band_scan_weight)
    return hyps


def _weigh_window_scans(hyps: list[Hypothesis], scan_weight: float) -> None:
    """Each hour-of-day scan (all widths × starts of one metric, or of one action's rate)
    shares ``scan_weight`` ordinary hypotheses' worth of alpha.

    Its windows overlap heavily and ask one question, "does the time of day
    matter here?"; weighing each as a separate question would let the scans,
    more than half of all hypotheses, set the bar for every regime or pair.
    """
    scans: dict[tuple[str, str], list[Hypothesis]] = {}
    for h in hyps:
        if "hour_window" in h.condition:
            rest = {k: v for k, v in h.condition.items() if k != "hour_window"}
            scans.setdefault((h.target, repr(sorted(rest.items()))), []).append(h)
    for members in scans.values():
        weight = min(1.0, scan_weight / len(members))
        for h in members:
            h.weight = weight


def _weigh_band_scans(hyps: list[Hypothesis], scan_weight: float) -> None:
    """Each cut scan (every cut and side of one metric, for one target and action) shares
    ``scan_weight`` ordinary hypotheses' worth of alpha, equally: the best of K cuts is
    corrected for the K it was chosen from (Bonferroni within the scan)."""
    scans: dict[tuple[str, str, str], list[Hypothesis]] = {}
    for h in hyps:
        band = h.condition.get("metric_band")
        if band is not None and h.cut is not None:
            rest = {k: v for k, v in h.condition.items() if k != "metric_band"}
            scans.setdefault((h.target, repr(sorted(rest.items())), str(band[0])),
                             []).append(h)
    for members in scans.values():
        weight = min(1.0, scan_weight / len(members))
        for h in members:
            h.weight = weight


# ----------------------------------------------------------------- conditions


def _windows(table: Table, cfg: DistillerConfig) -> Iterator[tuple[dict[str, Any], Mask]]:
    """Every hour window tried, but those that have not come round yet (each hour seen on
    ``min_days_for_hours`` days, ``features.window_recurred``): no run may report such a
    window (``curator.learn.filter``), and what cannot be reported must not take a share
    of alpha from what can. Which windows qualify depends on the times alone, never on the
    outcomes, so leaving them out keeps the family-wise level."""
    seen = days_per_hour(table.timestamps)
    for width in sorted({int(w) for w in cfg.hour_windows if 1 <= int(w) < 24}):
        for start in range(24):
            window = [start, (start + width) % 24]
            if window_recurred(window, seen, cfg.min_days_for_hours):
                yield {"hour_window": window}, hour_window_mask(table.hours, start, width)


def _bands(table: Table, within: Mask, skip: frozenset[str], cfg: DistillerConfig
           ) -> Iterator[Item]:
    """Each metric (but ``skip``) cut at its ``band_quantiles`` among ``within``, both sides."""
    for metric, values in table.metrics.items():
        if metric in skip:
            continue
        for cut in band_cuts(values, within, cfg.band_quantiles, 3 * cfg.min_support):
            with np.errstate(invalid="ignore"):
                yield {"metric_band": [metric, "lower"]}, values <= cut, cut
                yield {"metric_band": [metric, "upper"]}, values >= cut, cut


def _attr_values(table: Table, name: str, within: Mask) -> list[tuple[str, Mask]]:
    """The values of an attribute present among ``within``, with their rows."""
    return [(value, mask) for value, mask in table.attrs[name].items() if (mask & within).any()]


def _unique(items: Iterator[Item], within: Mask, min_support: int) -> list[Item]:
    """Conditions with support and a non-empty complement, one per distinct row set.

    Two conditions selecting the same rows are one hypothesis, not two (the
    first, simplest description is kept); counting both would only dilute alpha.
    """
    total = int(within.sum())
    seen: set[bytes] = set()
    out: list[Item] = []
    for cond, mask, cut in items:
        cell = mask & within
        n = int(cell.sum())
        if n < min_support or total - n < 2:
            continue
        key = np.packbits(cell).tobytes()
        if key in seen:
            continue
        seen.add(key)
        out.append((cond, cell, cut))
    return out


def _metric_conditions(
    table: Table, metric: str, present: Mask, windows: Windows, cfg: DistillerConfig
) -> list[Item]:
    def items() -> Iterator[Item]:
        for name in ATTRIBUTES:
            for value, mask in _attr_values(table, name, present):
                yield {name: value}, mask, None
        for action, mask in table.action_masks.items():
            yield {"action": action}, mask, None
        for cond, mask in windows:
            yield cond, mask, None
        # No band of another metric: two measurements of one episode are often computed
        # from one another or from common inputs (a fee from gas and size, P&L from size
        # and return), and the data cannot tell that arithmetic from a regularity. A level
        # is conditioned on the context it is observed in; bands condition outcomes.

    return _unique(items(), present, cfg.min_support)


def _rate_conditions(
    table: Table, action: str, own: Mask, windows: Windows, cfg: DistillerConfig
) -> list[Item]:
    """Conditions within one action's rated episodes (compared with that action's own rate)."""

    def items() -> Iterator[Item]:
        for name in ATTRIBUTES:
            for value, mask in _attr_values(table, name, own):
                if name == "tool" and value == action:
                    continue
                yield {"action": action, name: value}, own & mask, None
        for regime, regime_mask in _attr_values(table, "regime", own):
            in_regime = own & regime_mask
            for pair, pair_mask in _attr_values(table, "token_pair", in_regime):
                yield ({"action": action, "regime": regime, "token_pair": pair},
                       in_regime & pair_mask, None)
        for cond, mask in windows:
            yield {"action": action, **cond}, own & mask, None
        # What is traded where × the time of day: a pair (or chain) can be costly at some
        # hours only (its own liquidity hours), a regularity the whole action's hour scan
        # dilutes with the other pairs. Each such scan weighs as one window scan (below).
        for name in _MARKET_ATTRIBUTES:
            values = _attr_values(table, name, own)
            if len(values) < 2:
                continue  # one value: the same rows as the action's own hour scan
            for value, value_mask in values:
                for cond, mask in windows:
                    yield ({"action": action, name: value, **cond}, own & value_mask & mask,
                           None)
        # Not the outcome's own measures (an action is negative exactly when its P&L is):
        # tried here, such a band would be selected first and, overlapping every real
        # finding's episodes, make them look redundant before the leak filter drops it.
        skip = frozenset(cfg.outcome_metrics) | frozenset(cfg.derived_metrics)
        for cond, mask, cut in _bands(table, own, skip, cfg):
            yield {"action": action, **cond}, own & mask, cut

    return _unique(items(), own, cfg.min_support)


# ---------------------------------------------------------------- metric levels


def ranks_with_ties(values: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]:
    """Mid-ranks (1-based, ties averaged) and the tie term Σ(t³ - t)."""
    order = np.argsort(values, kind="stable")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    mid = first + (counts + 1) / 2.0
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(mid, counts)
    c = counts.astype(np.float64)
    return ranks, float((c * c * c - c).sum())


def _scan_metrics(
    table: Table, windows: Windows, order: npt.NDArray[np.intp], cfg: DistillerConfig
) -> list[Hypothesis]:
    out: list[Hypothesis] = []
    for metric, values in table.metrics.items():
        present = ~np.isnan(values)
        total = int(present.sum())
        if total < 2 * cfg.min_support:
            continue
        overall = float(values[present].mean())
        centred = np.where(present, values - overall, 0.0)  # centring keeps sums of squares exact
        conds = _metric_conditions(table, metric, present, windows, cfg)
        if not conds:
            continue
        matrix = np.vstack([cell for _, cell, _ in conds]).astype(np.float64)
        raw = _View.of(centred, present, overall, matrix)
        # An hour window is tested within strata of the market state (distiller.hour_strata):
        # its statistics come from the metric less its stratum's mean. Levels differ by
        # regime, and regimes last hours, so the raw series wanders slowly; the clock does
        # not pick the regime, so those swings are variance (and autocorrelation) the hour
        # cannot explain. Removing them is the stratified comparison (ANCOVA with the
        # stratum as a factor): same null, far less noise.
        residual = _stratum_residuals(table, values, present, cfg.hour_strata)
        adjusted = (raw if residual is None
                    else _View.of(residual, present, overall, matrix))
        is_window = ["hour_window" in cond for cond, _, _ in conds]

        def build(i: int, vif: float) -> Hypothesis | None:
            view = adjusted if is_window[i] else raw  # noqa: B023
            return _metric_hypothesis(
                metric, conds[i][0], conds[i][1], raw.cell(i), view.cell(i),  # noqa: B023
                raw.group, view.group, present, vif, cfg,  # noqa: B023
            )

        hyps = {i: h for i in range(len(conds)) if (h := build(i, 1.0)) is not None}
        # only candidates pay for the autocorrelation correction (an FFT per condition)
        rows = order[present[order]]
        candidates = [i for i, h in hyps.items() if h.log_p < 0.0]
        rows = order[present[order]]
        for view in {id(raw): raw, id(adjusted): adjusted}.values():
            mine = [i for i in candidates if (adjusted if is_window[i] else raw) is view]
            if not mine:
                continue
            vifs = variance_inflation(view.ranks[rows], matrix[mine][:, rows] > 0)
            for i, vif in zip(mine, vifs, strict=True):
                rebuilt = build(i, float(vif))
                if rebuilt is not None:
                    hyps[i] = rebuilt
        out.extend(hyps[i] for i in sorted(hyps))
    return out


def _stratum_residuals(
    table: Table, values: npt.NDArray[np.float64], present: Mask, strata: Sequence[str]
) -> npt.NDArray[np.float64] | None:
    """``values`` less the mean of their stratum (the combination of the ``strata``
    attributes; a missing value is a stratum of its own), 0 where absent; None when
    there are no strata to remove (no attribute configured, or one stratum only)."""
    names = [name for name in strata if name in table.attrs]
    if not names:
        return None
    key = np.zeros(values.size, dtype=np.int64)
    for name in names:
        code = np.zeros(values.size, dtype=np.int64)  # 0: no value
        for j, mask in enumerate(table.attrs[name].values(), start=1):
            code[mask] = j
        key = key * (len(table.attrs[name]) + 1) + code
    labels = np.unique(key[present])
    if labels.size < 2:
        return None
    residual = np.zeros(values.size)
    for label in labels:
        rows = present & (key == label)
        residual[rows] = values[rows] - values[rows].mean()
    return residual


@dataclass(frozen=True, slots=True)
class _Cell:
    """One condition's sums over a metric view: count, sum, sum of squares, rank sum."""

    n: int
    sum: float
    sq_sum: float
    rank_sum: float


@dataclass(frozen=True, slots=True)
class _Group:
    """One metric over every row that carries it (centred sums, for the complement)."""

    total: int
    sum: float
    sq_sum: float
    mean: float
    tie_term: float


@dataclass(frozen=True, slots=True)
class _View:
    """A metric as one test sees it (raw, or less its stratum means), with every
    condition's sums: the statistics are computed from these."""

    group: _Group
    ranks: npt.NDArray[np.float64]
    counts: npt.NDArray[np.float64]
    sums: npt.NDArray[np.float64]
    sq_sums: npt.NDArray[np.float64]
    rank_sums: npt.NDArray[np.float64]

    @classmethod
    def of(cls, centred: npt.NDArray[np.float64], present: Mask, mean: float,
           matrix: npt.NDArray[np.float64]) -> _View:
        """``centred``: the view's values, 0 where absent; ``mean``: the metric's own mean."""
        ranks = np.zeros(centred.size)
        ranks[present], tie_term = ranks_with_ties(centred[present])
        group = _Group(int(present.sum()), float(centred.sum()),
                       float((centred * centred).sum()), mean, tie_term)
        return cls(group, ranks, matrix.sum(axis=1), matrix @ centred,
                   matrix @ (centred * centred), matrix @ ranks)

    def cell(self, i: int) -> _Cell:
        return _Cell(int(self.counts[i]), float(self.sums[i]), float(self.sq_sums[i]),
                     float(self.rank_sums[i]))


def _metric_hypothesis(
    metric: str, cond: dict[str, Any], cell: Mask, shown: _Cell, tested: _Cell,
    shown_group: _Group, tested_group: _Group, present: Mask, vif: float,
    cfg: DistillerConfig,
) -> Hypothesis | None:
    """The hypothesis's effect from the raw metric (``shown``), its test from ``tested``
    (the same rows, raw or less their stratum means)."""
    n1 = shown.n
    n2 = shown_group.total - n1
    overall = shown_group.mean
    mean1 = shown.sum / n1
    rest_mean = (shown_group.sum - shown.sum) / n2
    t_mean1, t_mean2, var1, var2 = _moments(tested, tested_group)
    raw_t, raw_df = stats.welch_t(t_mean1, var1, n1, t_mean2, var2, n2)
    if math.isnan(raw_t):
        return None  # both groups constant: nothing to test
    raw_z = stats.mann_whitney_z(tested.rank_sum, n1, n2, tested_group.tie_term)
    # autocorrelated episodes carry less information than their count says
    scale = math.sqrt(vif)
    t, z, df = raw_t / scale, raw_z / scale, max(1.0, raw_df / vif)
    effect = overall + mean1
    gap = effect - overall
    relative = abs(gap) / abs(overall) if overall else math.inf
    passes = relative >= cfg.min_effect and gap != 0.0
    if tested is not shown:
        # the stratified gap (window against the rest, both less their strata) must agree:
        # a window whose raw gap is only its strata's mix is not the clock's doing
        tested_gap = t_mean1 - t_mean2
        passes = (passes and tested_gap * gap > 0
                  and (abs(tested_gap) / abs(overall) if overall else math.inf)
                  >= cfg.min_effect)
    log_two = math.log(2.0)
    log_p = 0.0
    # The mean must differ (Welch) and the ranks too (Mann–Whitney): skewed
    # metrics (gas, volumes) make Welch alone anticonservative in small cells,
    # while the rank test is exact under "no association" whatever the shape.
    # The larger p-value of the two is valid because each one is.
    if passes and t * z > 0 and t * gap > 0:
        log_p_rank = log_two + stats.normal_logsf(abs(z))
        if (log_p_rank <= math.log(cfg.alpha)
                and log_two + stats.normal_logsf(abs(t)) <= math.log(cfg.alpha)):
            log_p_mean = log_two + stats.t_logsf(abs(t), df)
            log_p = min(0.0, max(log_p_mean, log_p_rank))
    return Hypothesis(
        condition=cond, target=f"metric:{metric}",
        direction="lower" if gap < 0 else "higher", cell=cell, population=present,
        support=n1,
        effect=effect, baseline=overall, n_base=shown_group.total, log_p=log_p,
        log_min_p=-math.inf, passes_effect=passes,
        detail={"test": METRIC_TEST if tested is shown else STRATIFIED_METRIC_TEST,
                "statistic": t, "df": df, "rank_z": z,
                "variance_inflation": vif, "relative_effect": relative,
                "rest_mean": overall + rest_mean},
    )


def _moments(c: _Cell, g: _Group) -> tuple[float, float, float, float]:
    """Means and unbiased variances of the cell and of its complement."""
    n2 = g.total - c.n
    s2, q2 = g.sum - c.sum, g.sq_sum - c.sq_sum
    mean1, mean2 = c.sum / c.n, s2 / n2
    var1 = max(0.0, (c.sq_sum - c.sum * mean1) / (c.n - 1))
    var2 = max(0.0, (q2 - s2 * mean2) / (n2 - 1))
    return mean1, mean2, var1, var2


# ---------------------------------------------------------------- outcome rates


def _scan_rates(
    table: Table, windows: Windows, order: npt.NDArray[np.intp], cfg: DistillerConfig
) -> list[Hypothesis]:
    """An action against every action; a condition on an action against that action's own rate.

    Comparing "swap at 20:00–00:00" with all actions would credit the window
    with whatever makes swaps differ from rebalances; the null that matters is
    "the time of day does not change how swaps go".
    """
    out: list[Hypothesis] = []
    if int(table.rated.sum()) < 2 * cfg.min_support:
        return out
    for action, mask in table.action_masks.items():
        own = mask & table.rated
        top = _unique(iter([({"action": action}, own, None)]), table.rated, cfg.min_support)
        out.extend(_rate_family(table, top, table.rated, order, cfg))
        if int(own.sum()) >= 2 * cfg.min_support:
            conds = _rate_conditions(table, action, own, windows, cfg)
            out.extend(_rate_family(table, conds, own, order, cfg))
    return out


def _rate_family(
    table: Table, conds: list[Item], population: Mask,
    order: npt.NDArray[np.intp], cfg: DistillerConfig,
) -> list[Hypothesis]:
    if not conds:
        return []
    total = int(population.sum())
    matrix = np.vstack([cell for _, cell, _ in conds]).astype(np.float64)
    counts = matrix.sum(axis=1)
    rows = order[population[order]]
    out: list[Hypothesis] = []
    for target, hits in ((NEGATIVE_RATE, table.negative), (POSITIVE_RATE, table.positive)):
        in_pop = hits & population
        good = int(in_pop.sum())
        if not 0 < good < total:
            continue  # an outcome that never (or always) happens here has no rate to test
        hit_counts = matrix @ in_pop.astype(np.float64)
        base = good / total
        family: list[Hypothesis] = []
        for i, (cond, cell, cut) in enumerate(conds):
            n, k = int(counts[i]), round(float(hit_counts[i]))
            rate = k / n
            # The effect is against the rest of the population, not the pooled rate (which
            # holds the condition's own episodes): "adds in low_vol lose 8% vs 35% of the
            # other adds" is a gap of 0.27 however common low_vol is; against the pooled
            # rate it shrank by the condition's share (0.20 at a quarter of the adds).
            passes = total > n and rate - (good - k) / (total - n) >= cfg.min_rate_gap
            family.append(Hypothesis(
                condition=cond, target=target, direction="higher", cell=cell,
                population=population, support=n, effect=rate, baseline=base, n_base=total,
                log_p=_fisher(k, n, good, total, 1.0) if passes else 0.0,
                # margins before any correction: the bar Tarone sets must not see the outcomes
                log_min_p=stats.hypergeom_logpmf(min(n, good), total, good, n),
                passes_effect=passes, hits=k, detail={"test": RATE_TEST, "base_hits": good},
                cut=cut,
            ))
        candidates = [i for i, h in enumerate(family) if h.log_p < 0.0]
        if candidates:
            vifs = variance_inflation(in_pop[rows].astype(np.float64),
                                      matrix[candidates][:, rows] > 0)
            for i, vif in zip(candidates, vifs, strict=True):
                h = family[i]
                h.log_p = _fisher(int(h.hits or 0), h.support, good, total, float(vif))
                h.detail["variance_inflation"] = float(vif)
        out.extend(family)
    return out


def _fisher(k: int, n: int, good: int, total: int, vif: float) -> float:
    """One-sided Fisher test of the 2×2 table, each cell divided by ``vif`` (Kish's design effect).

    Dividing the counts by the variance inflation gives the table the
    information it really holds; rounding keeps it a table of counts.
    """
    if vif <= 1.0:
        return stats.hypergeom_logsf(k, total, good, n)
    cells = [k, n - k, good - k, total - n - good + k]
    a, b, c, d = (math.floor(x / vif + 0.5) for x in cells)
    if a + b < 1 or c + d < 1:
        return 0.0
    return stats.hypergeom_logsf(a, a + b + c + d, a + c, a + b)
