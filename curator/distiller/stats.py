"""Exact and near-exact test statistics for the distiller, in pure ``math`` (no scipy).

Owns: binomial and hypergeometric tails (exact sums in log space), Student's t
tail (regularized incomplete beta by continued fraction), Welch's two-sample
and the one-sample t test, and family-wise corrections (Holm step-down, with
Tarone's exclusion of hypotheses that cannot reach significance).

Every tail is returned as a natural logarithm so that the huge effects the
distiller sees (|t| = 60 over 2,000 episodes) neither underflow to 0 nor tie:
the strongest of several overlapping windows is picked by comparing log-p.
Must not: know about episodes or claims; import numpy (callers vectorise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "LOG_ZERO",
    "binom_logcdf",
    "binom_logpmf",
    "binom_logsf",
    "holm",
    "hypergeom_logcdf",
    "hypergeom_logpmf",
    "hypergeom_logsf",
    "log1mexp",
    "mann_whitney_z",
    "normal_logsf",
    "one_sample_t",
    "t_logsf",
    "testable_weighted",
    "weighted_holm",
    "welch_t",
]

LOG_ZERO = -math.inf
_EPS = 1e-17  # relative size at which a tail term no longer changes a float sum
_MAX_CF_ITER = 500


def log1mexp(x: float) -> float:
    """log(1 - exp(x)) for x <= 0, accurate at both ends (Mächler 2012)."""
    if x > 0:
        raise ValueError("log1mexp needs x <= 0")
    if x == 0:
        return LOG_ZERO
    return math.log(-math.expm1(x)) if x > -math.log(2) else math.log1p(-math.exp(x))


# ---------------------------------------------------------------- binomial


def binom_logpmf(k: int, n: int, p: float) -> float:
    if k < 0 or k > n:
        return LOG_ZERO
    if p <= 0.0:
        return 0.0 if k == 0 else LOG_ZERO
    if p >= 1.0:
        return 0.0 if k == n else LOG_ZERO
    return (
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        + k * math.log(p) + (n - k) * math.log1p(-p)
    )


def _binom_tail_up(k: int, n: int, p: float) -> float:
    """log Σ_{i>=k} pmf(i), for k above the mode (terms fall geometrically)."""
    first = binom_logpmf(k, n, p)
    odds = p / (1.0 - p)
    total, term = 1.0, 1.0
    for i in range(k, n):
        term *= (n - i) / (i + 1) * odds
        total += term
        if term < _EPS * total:
            break
    return first + math.log(total)


def _binom_tail_down(k: int, n: int, p: float) -> float:
    """log Σ_{i<=k} pmf(i), for k below the mode."""
    first = binom_logpmf(k, n, p)
    inv_odds = (1.0 - p) / p
    total, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1) * inv_odds
        total += term
        if term < _EPS * total:
            break
    return first + math.log(total)


def binom_logsf(k: int, n: int, p: float) -> float:
    """log P(X >= k) for X ~ Binomial(n, p), exact."""
    _check_prob(p)
    if k <= 0:
        return 0.0
    if k > n:
        return LOG_ZERO
    if p <= 0.0:
        return LOG_ZERO
    if p >= 1.0:
        return 0.0
    mode = math.floor((n + 1) * p)
    if k > mode:
        return _binom_tail_up(k, n, p)
    return log1mexp(min(0.0, _binom_tail_down(k - 1, n, p)))


def binom_logcdf(k: int, n: int, p: float) -> float:
    """log P(X <= k) for X ~ Binomial(n, p), exact."""
    _check_prob(p)
    if k < 0:
        return LOG_ZERO
    if k >= n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return LOG_ZERO
    mode = math.floor((n + 1) * p)
    if k < mode:
        return _binom_tail_down(k, n, p)
    return log1mexp(min(0.0, _binom_tail_up(k + 1, n, p)))


def _check_prob(p: float) -> None:
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"probability out of [0, 1]: {p!r}")


# ---------------------------------------------------------- hypergeometric


def _hyper_bounds(total: int, good: int, draws: int) -> tuple[int, int]:
    if not 0 <= good <= total or not 0 <= draws <= total:
        raise ValueError(f"bad hypergeometric margins N={total} K={good} n={draws}")
    return max(0, draws + good - total), min(draws, good)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def hypergeom_logpmf(k: int, total: int, good: int, draws: int) -> float:
    """log P(X = k): ``k`` of ``draws`` items drawn without replacement are among ``good``."""
    lo, hi = _hyper_bounds(total, good, draws)
    if k < lo or k > hi:
        return LOG_ZERO
    return (
        _log_comb(good, k) + _log_comb(total - good, draws - k) - _log_comb(total, draws)
    )


def _hyper_ratio_up(i: int, total: int, good: int, draws: int) -> float:
    """pmf(i + 1) / pmf(i)."""
    return (good - i) * (draws - i) / ((i + 1) * (total - good - draws + i + 1))


def hypergeom_logsf(k: int, total: int, good: int, draws: int) -> float:
    """log P(X >= k), exact: the one-sided p-value of Fisher's exact test."""
    lo, hi = _hyper_bounds(total, good, draws)
    if k <= lo:
        return 0.0
    if k > hi:
        return LOG_ZERO
    mode = math.floor((draws + 1) * (good + 1) / (total + 2))
    if k <= mode:
        return log1mexp(min(0.0, hypergeom_logcdf(k - 1, total, good, draws)))
    first = hypergeom_logpmf(k, total, good, draws)
    total_sum, term = 1.0, 1.0
    for i in range(k, hi):
        term *= _hyper_ratio_up(i, total, good, draws)
        total_sum += term
        if term < _EPS * total_sum:
            break
    return first + math.log(total_sum)


def hypergeom_logcdf(k: int, total: int, good: int, draws: int) -> float:
    """log P(X <= k), exact."""
    lo, hi = _hyper_bounds(total, good, draws)
    if k < lo:
        return LOG_ZERO
    if k >= hi:
        return 0.0
    mode = math.floor((draws + 1) * (good + 1) / (total + 2))
    if k >= mode:
        return log1mexp(min(0.0, hypergeom_logsf(k + 1, total, good, draws)))
    first = hypergeom_logpmf(k, total, good, draws)
    total_sum, term = 1.0, 1.0
    for i in range(k, lo, -1):
        term /= _hyper_ratio_up(i - 1, total, good, draws)
        total_sum += term
        if term < _EPS * total_sum:
            break
    return first + math.log(total_sum)


# ------------------------------------------------------------ t and normal


def normal_logsf(z: float) -> float:
    """log P(Z > z) for a standard normal Z."""
    if z < 37.0:
        return math.log(0.5 * math.erfc(z / math.sqrt(2.0)))
    # erfc underflows past z ~ 38: asymptotic series of the Mills ratio (error < 1e-12 here).
    z2 = z * z
    series = 1.0 - 1.0 / z2 + 3.0 / z2**2 - 15.0 / z2**3 + 105.0 / z2**4
    return -0.5 * z2 - math.log(z * math.sqrt(2.0 * math.pi)) + math.log(series)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, _MAX_CF_ITER + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 3e-16:
            break
    return h


def _log_betainc(a: float, b: float, x: float) -> float:
    """log of the regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return LOG_ZERO
    if x >= 1.0:
        return 0.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return log_front + math.log(_betacf(a, b, x)) - math.log(a)
    other = log_front + math.log(_betacf(b, a, 1.0 - x)) - math.log(b)
    return log1mexp(min(0.0, other))


def t_logsf(t: float, df: float) -> float:
    """log P(T > t) for Student's t with ``df`` (> 0, may be fractional) degrees of freedom."""
    if not df > 0 or math.isnan(t):
        raise ValueError(f"bad t test input t={t!r} df={df!r}")
    if math.isinf(t):
        return LOG_ZERO if t > 0 else 0.0
    x = df / (df + t * t)
    upper_half = math.log(0.5) + _log_betainc(df / 2.0, 0.5, x)  # P(T > |t|)
    return upper_half if t >= 0 else log1mexp(min(0.0, upper_half))


def welch_t(
    mean1: float, var1: float, n1: int, mean2: float, var2: float, n2: int
) -> tuple[float, float]:
    """Welch's t statistic and Welch–Satterthwaite degrees of freedom for mean1 - mean2.

    Variances are the unbiased sample variances. Returns (nan, nan) when both
    groups have zero variance (no test is possible).
    """
    if n1 < 2 or n2 < 2:
        raise ValueError("Welch's test needs at least 2 values per group")
    a, b = var1 / n1, var2 / n2
    se2 = a + b
    if se2 <= 0.0:
        return math.nan, math.nan
    t = (mean1 - mean2) / math.sqrt(se2)
    df = se2 * se2 / ((a * a / (n1 - 1) if a else 0.0) + (b * b / (n2 - 1) if b else 0.0))
    return t, df


def mann_whitney_z(rank_sum: float, n1: int, n2: int, tie_term: float) -> float:
    """Normal score of the Mann–Whitney U of group 1, from its rank sum among all n1 + n2 values.

    ``tie_term`` is Σ(t³ - t) over groups of tied values (0 without ties). A
    continuity correction of 1/2 moves U towards its mean. The rank sum is a
    bounded statistic with lighter tails than the normal, so the normal tail is
    conservative far out, where the family-wise thresholds live.
    """
    if n1 < 1 or n2 < 1:
        raise ValueError("Mann-Whitney needs both groups non-empty")
    total = n1 + n2
    u = rank_sum - n1 * (n1 + 1) / 2.0
    mean = n1 * n2 / 2.0
    var = n1 * n2 / 12.0 * ((total + 1) - tie_term / (total * (total - 1)))
    if var <= 0.0:
        return 0.0
    diff = u - mean
    diff = math.copysign(max(0.0, abs(diff) - 0.5), diff)
    return diff / math.sqrt(var)


def one_sample_t(mean: float, var: float, n: int, mu0: float) -> tuple[float, float]:
    """t statistic of H0: mean == mu0, and its n - 1 degrees of freedom."""
    if n < 2:
        raise ValueError("a one-sample t test needs at least 2 values")
    if var <= 0.0:
        if mean == mu0:
            return 0.0, float(n - 1)
        return (math.inf if mean > mu0 else -math.inf), float(n - 1)
    return (mean - mu0) / math.sqrt(var / n), float(n - 1)


# -------------------------------------------------- family-wise correction


def holm(log_ps: Sequence[float], alpha: float, m: int | None = None) -> list[bool]:
    """Holm–Bonferroni step-down: which hypotheses are rejected at family-wise ``alpha``.

    ``m`` is the size of the family when it is larger than ``len(log_ps)`` (the
    caller dropped hypotheses it knows cannot be rejected).
    """
    size = len(log_ps) if m is None else m
    if size < len(log_ps):
        raise ValueError("family size smaller than the number of p-values")
    rejected = [False] * len(log_ps)
    log_alpha = math.log(alpha)
    for rank, idx in enumerate(sorted(range(len(log_ps)), key=lambda i: log_ps[i])):
        if log_ps[idx] > log_alpha - math.log(size - rank):
            break
        rejected[idx] = True
    return rejected


def weighted_holm(log_ps: Sequence[float], weights: Sequence[float], alpha: float) -> list[bool]:
    """Holm's weighted step-down (Holm 1979): family-wise ``alpha`` for any fixed weights > 0.

    Hypotheses are taken in order of p / w; the next one is rejected while
    p_i <= alpha * w_i / (total weight of those not yet rejected). Equal
    weights give the ordinary Holm procedure.
    """
    if len(log_ps) != len(weights):
        raise ValueError("one weight per p-value")
    if any(w <= 0 for w in weights):
        raise ValueError("weights must be > 0")
    log_w = [math.log(w) for w in weights]
    remaining = math.fsum(weights)
    rejected = [False] * len(log_ps)
    log_alpha = math.log(alpha)
    for idx in sorted(range(len(log_ps)), key=lambda i: log_ps[i] - log_w[i]):
        if remaining <= 0 or log_ps[idx] > log_alpha + log_w[idx] - math.log(remaining):
            break
        rejected[idx] = True
        remaining -= weights[idx]
    return rejected


def testable_weighted(
    log_min_ps: Sequence[float], weights: Sequence[float], alpha: float
) -> list[bool]:
    """Tarone's exclusion with weights: drop what cannot reach its share of alpha, until stable.

    A hypothesis whose smallest attainable p-value exceeds alpha * w_i / W
    (W = the weight still in the family) can never be rejected; dropping it
    raises everyone else's share, which may make others droppable in turn. The
    set depends only on the attainable minima and the weights, never on the
    observed p-values, so any weighted Holm over it keeps the family-wise level.
    """
    keep = [True] * len(log_min_ps)
    log_alpha = math.log(alpha)
    while True:
        total = math.fsum(w for w, k in zip(weights, keep, strict=True) if k)
        if total <= 0:
            return keep
        log_total = math.log(total)
        changed = False
        for i, (lmp, w) in enumerate(zip(log_min_ps, weights, strict=True)):
            if keep[i] and lmp > log_alpha + math.log(w) - log_total:
                keep[i] = False
                changed = True
        if not changed:
            return keep
