"""The simulator's market model: one tick of regime, price and market levels.

Pure functions of (scenario, state, rng, tick, now_ms): no episodes, no text, no
wall clock. ``sim.py`` owns the state across ticks and turns ticks into
episodes; this module only draws numbers, in a fixed order so that the same
generator state always yields the same tick.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from grimoire.feeds.sim.scenario import HourWindow, Level, Scenario
from grimoire.records.enums import Regime

__all__ = [
    "GAS_UNITS",
    "VOL_WINDOW",
    "MarketState",
    "MarketTick",
    "hour_of",
    "in_hours",
    "is_reversed",
    "lognormal",
    "realized_vol_bps",
    "step_market",
    "step_regime",
    "update_estimates",
]

MS_PER_HOUR = 3_600_000
VOL_WINDOW = 20  # ticks of returns behind the realized volatility in regime_shift texts
EMA_ALPHA = 0.1  # the policy's running estimate of gas and slippage (its predictions)
REFERENCE_SWAP_USD = 1_000.0  # observation `fees` = the cost of a swap of this size
# Gas used per action: roughly Uniswap v3 figures; unknown actions cost 200k.
GAS_UNITS = {"swap": 150_000, "add_liquidity": 300_000, "remove_liquidity": 250_000,
             "rebalance": 400_000}


@dataclass(slots=True)
class MarketState:
    """What carries over between ticks."""

    regime: Regime
    price: float
    gas_ema: float
    slippage_ema: float
    returns: deque[float] = field(default_factory=lambda: deque(maxlen=VOL_WINDOW))


@dataclass(frozen=True, slots=True)
class MarketTick:
    """The market levels of one tick (the observation's metrics)."""

    price: float
    return_bps: float
    gas_gwei: float
    slippage_bps: float
    volume: float
    pool_liquidity: float
    fees: float
    hour: int

    def metrics(self) -> dict[str, float]:
        return {"price": round(self.price, 2), "return_bps": round(self.return_bps, 2),
                "volume": round(self.volume, 0), "gas_gwei": round(self.gas_gwei, 2),
                "slippage_bps": round(self.slippage_bps, 2),
                "pool_liquidity": round(self.pool_liquidity, 0), "fees": round(self.fees, 2)}


def hour_of(now_ms: int) -> int:
    """UTC hour of day of a unix-ms timestamp."""
    return (now_ms // MS_PER_HOUR) % 24


def in_hours(hour: int, hours: tuple[int, int]) -> bool:
    """Whether ``hour`` lies in [start, end), wrapping past midnight when start > end."""
    start, end = hours
    return start <= hour < end if start < end else hour >= start or hour < end


def is_reversed(reverse_at_tick: int | None, tick: int) -> bool:
    return reverse_at_tick is not None and tick >= reverse_at_tick


def lognormal(rng: np.random.Generator, level: Level, mean: float | None = None) -> float:
    """A lognormal draw with the level's cv and the given mean (default the level's)."""
    m = level.mean if mean is None else mean
    if level.cv == 0.0:
        rng.standard_normal()  # keep the draw count independent of the parameters
        return m
    sigma2 = math.log1p(level.cv * level.cv)
    return m * math.exp(math.sqrt(sigma2) * rng.standard_normal() - sigma2 / 2.0)


def step_regime(scenario: Scenario, regime: Regime, rng: np.random.Generator) -> Regime:
    """One Markov step from ``regime`` using the scenario's transition row."""
    row = scenario.transitions[scenario.regimes.index(regime)]
    u = rng.random()
    acc = 0.0
    for target, p in zip(scenario.regimes, row, strict=True):
        acc += p
        if u < acc:
            return target
    return regime  # rounding left u above the row's sum: stay


def _window_mean(windows: tuple[HourWindow, ...], metric: str, base: float, hour: int,
                 tick: int) -> float:
    for w in windows:
        if w.metric == metric and in_hours(hour, w.hours):
            return w.reversed_mean if is_reversed(w.reverse_at_tick, tick) else w.mean
    return base


def step_market(scenario: Scenario, state: MarketState, rng: np.random.Generator, tick: int,
                now_ms: int) -> MarketTick:
    """Advance the price one tick in the current regime and draw the market levels."""
    params = scenario.regime_params[state.regime]
    hour = hour_of(now_ms)
    log_return_bps = params.drift_bps + params.vol_bps * rng.standard_normal()
    price = state.price * math.exp(log_return_bps / 10_000.0)
    mults = {"gas_gwei": params.gas_mult, "slippage_bps": params.slippage_mult,
             "volume": params.volume_mult, "pool_liquidity": params.liquidity_mult}
    levels: dict[str, float] = {}
    for metric, level in scenario.levels.items():
        mean = _window_mean(scenario.hour_windows, metric, level.mean, hour, tick)
        levels[metric] = lognormal(rng, level, mean * mults[metric])
    gas = levels["gas_gwei"]
    fees = gas * GAS_UNITS["swap"] * 1e-9 * price + REFERENCE_SWAP_USD * scenario.fee_bps / 1e4
    state.price = price
    state.returns.append(log_return_bps)
    return MarketTick(price=price, return_bps=log_return_bps, gas_gwei=gas,
                      slippage_bps=levels["slippage_bps"], volume=levels["volume"],
                      pool_liquidity=levels["pool_liquidity"], fees=fees, hour=hour)


def update_estimates(state: MarketState, tick: MarketTick) -> None:
    """Fold this tick into the policy's running gas / slippage estimates (after acting)."""
    state.gas_ema += EMA_ALPHA * (tick.gas_gwei - state.gas_ema)
    state.slippage_ema += EMA_ALPHA * (tick.slippage_bps - state.slippage_ema)


def realized_vol_bps(state: MarketState) -> float:
    """Standard deviation of the last VOL_WINDOW per-tick returns (0 before two ticks)."""
    if len(state.returns) < 2:
        return 0.0
    return float(np.std(np.fromiter(state.returns, dtype=float), ddof=1))
