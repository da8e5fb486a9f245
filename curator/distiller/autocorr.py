"""Variance inflation from autocorrelation: episodes in a row are not independent draws.

Owns one correction of the distiller's tests. Gas in one tick resembles gas
in the next; a regime lasts hours; a losing streak lasts several trades.
When both the target series y (a metric, or "this action went badly") and
the condition's indicator z are autocorrelated in time, the difference of
means between z = 1 and z = 0 varies far more than the independent-draw
formulas say, and tests built on them find "gas is 30% higher in crisis"
in a month where gas merely wandered while a few crisis blocks came by
(10% of null runs with AR(1) gas, φ = 0.9, at alpha 0.01; 12% with sticky
outcomes).

Bartlett's formula for the regression of y on z gives the inflation
``1 + 2 Σ_k ρ_y(k) ρ_z(k)``, with ρ the autocorrelations in time order.
ρ_y is taken on y's residuals after the condition's own mean shift, so that
a real effect (gas low every night at 02:00) does not inflate its own
variance. Lags are summed with Bartlett's taper up to a quarter of the
series; the factor is never below 1 (a correction may only make tests
stricter). Must not: test anything; callers scale their statistics.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["variance_inflation"]

FloatArray = npt.NDArray[np.float64]


def _autocorrelations(rows: FloatArray, max_lag: int) -> FloatArray:
    """ρ(1..max_lag) of each row (rows already centred), via FFT; 0 for a constant row."""
    n = rows.shape[1]
    spectrum = np.fft.rfft(rows, n=2 * n, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), n=2 * n, axis=1)[:, : max_lag + 1]
    var = acov[:, :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(var > 0, acov[:, 1:] / var, 0.0)
    result: FloatArray = rho
    return result


def variance_inflation(y: FloatArray, cells: npt.NDArray[np.bool_]) -> FloatArray:
    """Inflation factor (>= 1) of the variance of mean(y | cell) - mean(y | not cell), per cell.

    ``y`` is the target over a population in time order (n,); ``cells`` the
    conditions' indicators over the same rows (C, n).
    """
    n = y.size
    if cells.size == 0 or n < 8:
        return np.ones(cells.shape[0])
    z = cells.astype(np.float64)
    counts = z.sum(axis=1, keepdims=True)
    safe_in = np.maximum(counts, 1.0)
    safe_out = np.maximum(n - counts, 1.0)
    mean_in = (z @ y)[:, None] / safe_in
    mean_out = ((1.0 - z) @ y)[:, None] / safe_out
    residuals = y[None, :] - (z * mean_in + (1.0 - z) * mean_out)
    residuals -= residuals.mean(axis=1, keepdims=True)
    z -= counts / n
    max_lag = max(1, n // 4)
    taper = 1.0 - np.arange(1, max_lag + 1) / (max_lag + 1)
    rho_y = _autocorrelations(residuals, max_lag)
    rho_z = _autocorrelations(z, max_lag)
    factor: FloatArray = np.maximum(1.0, 1.0 + 2.0 * (rho_y * rho_z * taper).sum(axis=1))
    return factor
