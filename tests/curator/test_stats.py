"""The distiller's statistics against brute-force sums and closed forms."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator.distiller import stats


def brute_binom_sf(k: int, n: int, p: float) -> float:
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def brute_hyper_sf(k: int, total: int, good: int, draws: int) -> float:
    denom = math.comb(total, draws)
    return float(sum(
        Fraction(math.comb(good, i) * math.comb(total - good, draws - i), denom)
        for i in range(max(k, 0), min(draws, good) + 1)
    ))


# --------------------------------------------------------------------- binomial


def test_binomial_tail_n10_k9_p035() -> None:
    """P(X >= 9) for Binomial(10, 0.35): 10·0.35⁹·0.65 + 0.35¹⁰."""
    expected = 10 * 0.35**9 * 0.65 + 0.35**10
    assert expected == pytest.approx(brute_binom_sf(9, 10, 0.35), rel=1e-12)
    assert math.exp(stats.binom_logsf(9, 10, 0.35)) == pytest.approx(expected, rel=1e-12)
    assert math.exp(stats.binom_logsf(9, 10, 0.35)) == pytest.approx(5.3989e-4, rel=1e-4)


@given(n=st.integers(1, 60), p=st.floats(0.01, 0.99), data=st.data())
@settings(max_examples=120, deadline=None)
def test_binomial_tails_match_brute_force(n: int, p: float, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    sf = brute_binom_sf(k, n, p)
    cdf = brute_binom_sf(0, n, p) - brute_binom_sf(k + 1, n, p)
    assert math.exp(stats.binom_logsf(k, n, p)) == pytest.approx(sf, rel=1e-9, abs=1e-300)
    assert math.exp(stats.binom_logcdf(k, n, p)) == pytest.approx(cdf, rel=1e-9, abs=1e-15)


def test_binomial_far_tail_does_not_underflow() -> None:
    """2,000 of 2,000 at p = 0.3: log p = 2000·ln 0.3, far below the smallest float."""
    assert stats.binom_logsf(2000, 2000, 0.3) == pytest.approx(2000 * math.log(0.3), rel=1e-12)


def test_binomial_edges() -> None:
    assert stats.binom_logsf(0, 5, 0.5) == 0.0
    assert stats.binom_logsf(6, 5, 0.5) == stats.LOG_ZERO
    assert stats.binom_logsf(1, 5, 0.0) == stats.LOG_ZERO
    assert stats.binom_logsf(5, 5, 1.0) == 0.0
    assert stats.binom_logcdf(-1, 5, 0.5) == stats.LOG_ZERO
    with pytest.raises(ValueError):
        stats.binom_logsf(1, 5, 1.5)


# --------------------------------------------------------------- hypergeometric


@given(total=st.integers(2, 80), data=st.data())
@settings(max_examples=120, deadline=None)
def test_hypergeometric_tails_match_exact_fractions(total: int, data: st.DataObject) -> None:
    good = data.draw(st.integers(0, total))
    draws = data.draw(st.integers(0, total))
    k = data.draw(st.integers(0, min(good, draws)))
    sf = brute_hyper_sf(k, total, good, draws)
    cdf = 1.0 - brute_hyper_sf(k + 1, total, good, draws)
    assert math.exp(stats.hypergeom_logsf(k, total, good, draws)) == pytest.approx(
        sf, rel=1e-9, abs=1e-300)
    assert math.exp(stats.hypergeom_logcdf(k, total, good, draws)) == pytest.approx(
        cdf, rel=1e-9, abs=1e-14)


def test_fisher_exact_known_value() -> None:
    """Fisher's tea tasting: 4 of 4 cups right out of 8 → p = 1/70."""
    assert math.exp(stats.hypergeom_logsf(4, 8, 4, 4)) == pytest.approx(1 / 70, rel=1e-12)
    assert math.exp(stats.hypergeom_logpmf(4, 8, 4, 4)) == pytest.approx(1 / 70, rel=1e-12)


def test_hypergeometric_rejects_impossible_margins() -> None:
    with pytest.raises(ValueError):
        stats.hypergeom_logsf(1, 5, 6, 2)


# ----------------------------------------------------------------- t and normal


@pytest.mark.parametrize("t", [-30.0, -2.0, -0.5, 0.0, 0.3, 1.0, 4.0, 50.0, 1e4])
def test_t_tail_df1_is_cauchy(t: float) -> None:
    expected = 0.5 - math.atan(t) / math.pi
    assert math.exp(stats.t_logsf(t, 1.0)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("t", [-3.0, -0.7, 0.0, 0.9, 2.5, 12.0, 300.0])
def test_t_tail_df2_closed_form(t: float) -> None:
    expected = 0.5 - t / (2 * math.sqrt(2 + t * t))
    assert math.exp(stats.t_logsf(t, 2.0)) == pytest.approx(expected, rel=1e-9)


def test_t_tail_textbook_quantiles() -> None:
    assert math.exp(stats.t_logsf(2.228138851986, 10)) == pytest.approx(0.025, rel=1e-6)
    assert math.exp(stats.t_logsf(2.570581835636, 5)) == pytest.approx(0.025, rel=1e-6)
    assert math.exp(stats.t_logsf(1.644853626951, 1e7)) == pytest.approx(0.05, rel=1e-5)


def test_t_tail_far_out_is_finite_and_heavier_than_normal() -> None:
    log_t = stats.t_logsf(60.0, 1900.0)
    assert math.isfinite(log_t) and log_t < -700
    assert log_t > stats.normal_logsf(60.0)


@given(z=st.floats(0.0, 36.0))
def test_normal_tail_matches_erfc(z: float) -> None:
    expected = 0.5 * math.erfc(z / math.sqrt(2))
    assert math.exp(stats.normal_logsf(z)) == pytest.approx(expected, rel=1e-9)


def test_normal_far_tail_series_joins_erfc() -> None:
    near = math.log(0.5 * math.erfc(37.0 / math.sqrt(2)))
    assert stats.normal_logsf(37.0) == pytest.approx(near, rel=1e-12)
    assert stats.normal_logsf(60.0) == pytest.approx(
        -1800.0 - math.log(60.0 * math.sqrt(2 * math.pi)), rel=1e-6)


@given(x=st.floats(0.05, 20.0), df=st.floats(1.0, 200.0))
def test_t_is_less_peaked_than_normal(x: float, df: float) -> None:
    """The shortcut in distiller_scan relies on it: P(T > x) >= P(Z > x)."""
    assert stats.t_logsf(x, df) >= stats.normal_logsf(x) - 1e-12


def test_welch_by_hand() -> None:
    t, df = stats.welch_t(10.0, 4.0, 5, 7.0, 9.0, 10)
    se2 = 4 / 5 + 9 / 10
    assert t == pytest.approx(3.0 / math.sqrt(se2))
    assert df == pytest.approx(se2**2 / ((4 / 5) ** 2 / 4 + (9 / 10) ** 2 / 9))
    assert all(math.isnan(v) for v in stats.welch_t(1.0, 0.0, 3, 2.0, 0.0, 3))


def test_one_sample_t() -> None:
    t, df = stats.one_sample_t(5.0, 4.0, 16, 4.0)
    assert (t, df) == (pytest.approx(2.0), 15.0)
    assert stats.one_sample_t(5.0, 0.0, 4, 4.0)[0] == math.inf


def test_mann_whitney_z_against_exact_small_sample() -> None:
    """Group 1 holds the 3 lowest of 8 distinct values: U = 0; z from the normal formula."""
    z = stats.mann_whitney_z(rank_sum=6.0, n1=3, n2=5, tie_term=0.0)
    mean, var = 7.5, 3 * 5 * 9 / 12
    assert z == pytest.approx((0 - mean + 0.5) / math.sqrt(var))
    # exact one-sided p is 1 / C(8, 3); the normal tail is conservative far out
    exact = 1 / math.comb(8, 3)
    assert math.exp(stats.normal_logsf(-z)) > exact


def test_log1mexp() -> None:
    for x in (-1e-10, -0.1, -0.7, -5.0, -50.0):
        assert stats.log1mexp(x) == pytest.approx(math.log(-math.expm1(x)), rel=1e-12)
    assert stats.log1mexp(0.0) == stats.LOG_ZERO


# ----------------------------------------------------------- multiple testing


def test_holm_textbook_example() -> None:
    """p = 0.01, 0.04, 0.03, 0.004 at alpha 0.05: thresholds 0.0125, 0.0167, 0.025, 0.05."""
    log_ps = [math.log(p) for p in (0.01, 0.04, 0.03, 0.004)]
    assert stats.holm(log_ps, 0.05) == [True, False, False, True]
    assert stats.holm(log_ps, 0.05, m=10) == [False, False, False, True]
    with pytest.raises(ValueError):
        stats.holm(log_ps, 0.05, m=2)


def test_weighted_holm_reduces_to_holm_and_respects_weights() -> None:
    log_ps = [math.log(p) for p in (0.01, 0.04, 0.03, 0.004)]
    assert stats.weighted_holm(log_ps, [1, 1, 1, 1], 0.05) == stats.holm(log_ps, 0.05)
    # a light hypothesis needs a proportionally smaller p-value
    assert stats.weighted_holm([math.log(0.02), math.log(0.5)], [0.1, 1.9], 0.05) == [
        False, False]
    assert stats.weighted_holm([math.log(0.002), math.log(0.5)], [0.1, 1.9], 0.05) == [
        True, False]


@given(st.lists(st.floats(-50.0, 0.0), min_size=1, max_size=30))
def test_holm_rejects_a_prefix_of_the_sorted_p_values(log_ps: list[float]) -> None:
    rejected = stats.holm(log_ps, 0.05)
    worst_rejected = max((p for p, r in zip(log_ps, rejected, strict=True) if r), default=None)
    best_kept = min((p for p, r in zip(log_ps, rejected, strict=True) if not r), default=None)
    if worst_rejected is not None and best_kept is not None:
        assert worst_rejected <= best_kept


def test_tarone_drops_hypotheses_that_cannot_reach_significance() -> None:
    # 3 testable (min p tiny) and 97 cells too small to ever reach 0.05/3
    log_min = [math.log(1e-9)] * 3 + [math.log(0.2)] * 97
    keep = stats.testable_weighted(log_min, [1.0] * 100, 0.05)
    assert sum(keep) == 3 and all(keep[:3])
    # continuous tests (min p = 0) always stay
    assert all(stats.testable_weighted([stats.LOG_ZERO] * 5, [1.0] * 5, 0.05))
    # a light hypothesis is dropped sooner than a heavy one with the same minimum
    keep = stats.testable_weighted([math.log(0.004)] * 2 + [stats.LOG_ZERO] * 8,
                                   [0.1, 1.0] + [1.0] * 8, 0.05)
    assert keep[:2] == [False, True]
