"""The built-in market simulator feed (the daemon's default tick feed).

Owns the simulator's state across ticks and the order of its random draws:
per poll it steps the regime (Markov, or forced by a due lead-lag follow-up),
the market, the strategies' actions and the rare events, and returns the
tick's ``episode.write`` parameter dicts. Output is a pure function of
(scenario, seed, the sequence of (tick, now_ms) it is polled with): it never
reads the wall clock, the environment or a file. It must not write episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.feeds.sim.market import (
    GAS_UNITS,
    MarketState,
    MarketTick,
    in_hours,
    is_reversed,
    lognormal,
    realized_vol_bps,
    step_market,
    step_regime,
    update_estimates,
)
from grimoire.feeds.sim.render import (
    action_params,
    event_params,
    observation_params,
    shift_params,
)
from grimoire.feeds.sim.scenario import Event, LeadLag, Level, OutcomeRule, Scenario, Strategy
from grimoire.records.enums import Regime

__all__ = ["SimFeed", "rule_holds"]

_GAS_JITTER = Level(1.0, 0.05)  # execution gas vs the tick's level
_SLIPPAGE_JITTER = Level(1.0, 0.10)
_PREDICTION_JITTER = Level(1.0, 0.20)
_DEFAULT_GAS_UNITS = 200_000


@dataclass(slots=True)
class _Pending:
    due_tick: int
    link: LeadLag


class SimFeed:
    """Synthetic WETH/USDC-style market with the scenario's planted regularities."""

    name = "sim"

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self.tick_seconds_hint: float | None = scenario.tick_seconds_hint
        self._rng = np.random.Generator(np.random.PCG64(seed))
        # A stream of its own, so that label noise leaves every other draw as it was.
        self._label_rng = np.random.Generator(np.random.PCG64([seed, 0x4C4142454C]))
        # And one for which actions go unlabelled (scenario.unlabelled_actions).
        self._bare_rng = np.random.Generator(np.random.PCG64([seed, 0x42415245]))
        self._label = scenario.initial_regime
        gas, slippage = scenario.levels["gas_gwei"], scenario.levels["slippage_bps"]
        self._state = MarketState(regime=scenario.initial_regime, price=scenario.start_price,
                                  gas_ema=gas.mean, slippage_ema=slippage.mean)
        self._pending: dict[str, _Pending] = {}
        self._last_tick: int | None = None
        self._closed = False

    @property
    def regime(self) -> Regime:
        return self._state.regime

    def close(self) -> None:
        self._closed = True

    def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        """The episodes of this tick; ``tick`` must increase from one poll to the next."""
        if self._closed:
            raise NotAvailableError("the simulator feed is closed")
        for name, value in (("tick", tick), ("now_ms", now_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"must be a non-negative integer, got {value!r}",
                                      field=name)
        if self._last_tick is not None and tick <= self._last_tick:
            raise ValidationError(f"must increase: {tick} after {self._last_tick}", field="tick")
        self._last_tick = tick
        return self._tick(tick, now_ms)

    # One tick. The order of the draws below is part of the determinism contract.
    def _tick(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        sc, st, rng = self.scenario, self._state, self._rng
        out: list[dict[str, Any]] = []
        forced: Regime | None = None
        follow_events: list[Event] = []
        for name, pending in list(self._pending.items()):
            if pending.due_tick <= tick:
                del self._pending[name]
                if pending.link.follow_regime is not None:
                    forced = pending.link.follow_regime
                elif pending.link.follow_event is not None:
                    follow_events.append(pending.link.follow_event)
        old = st.regime
        new = step_regime(sc, old, rng)
        if forced is not None:
            new = forced
        st.regime = new  # the new regime already governs this tick's market
        market = step_market(sc, st, rng, tick, now_ms)
        label = self._label = self._estimate(new)
        if new is not old:
            out.append(shift_params(sc, tick, now_ms, old, new, market.price,
                                    realized_vol_bps(st)))
        out.append(observation_params(sc, tick, now_ms, label, market))
        for strategy in sc.strategies:
            if rng.random() < strategy.rate:
                out.append(self._action(strategy, tick, now_ms, market, len(out)))
        events = [*follow_events, *(e for e in sc.events if rng.random() < e.rate)]
        events.extend(self._leads(tick))
        for event in events:
            template = event.texts[int(rng.integers(len(event.texts)))]
            out.append(event_params(sc, tick, now_ms, label, len(out), kind=event.type,
                                    importance=event.importance, template=template,
                                    price=market.price))
        update_estimates(st, market)
        return out

    def _estimate(self, true: Regime) -> Regime:
        """This tick's regime as the agent would label it: the true one with probability
        1 − ``label_noise``, otherwise one of the scenario's other regimes, uniformly.
        A regime_shift episode still announces the true switch (the detector fired); every
        other episode of the tick carries this estimate."""
        sc = self.scenario
        if sc.label_noise <= 0 or self._label_rng.random() >= sc.label_noise:
            return true
        others = [r for r in sc.regimes if r is not true]
        return others[int(self._label_rng.integers(len(others)))]

    def _leads(self, tick: int) -> list[Event]:
        """Lead events fired this tick; each may schedule its follow-up."""
        fired: list[Event] = []
        for link in self.scenario.lead_lags:
            if link.name in self._pending or link.follow_regime is self._state.regime:
                continue  # the follow-up would not be news: keep the lead honest
            if self._rng.random() >= link.lead.rate:
                continue
            fired.append(link.lead)
            p = link.reversed_probability if is_reversed(link.reverse_at_tick, tick) else (
                link.probability)
            if self._rng.random() < p:
                lo, hi = link.lag_ticks
                lag = int(self._rng.integers(lo, hi + 1))
                self._pending[link.name] = _Pending(tick + lag, link)
        return fired

    def _negative_rate(self, strategy: Strategy, action: str, pair: str, tick: int,
                       hour: int, size_usd: float) -> float:
        for rule in self.scenario.outcome_rules:
            if rule_holds(rule, strategy=strategy.name, action=action, pair=pair,
                          regime=self._state.regime, hour=hour, size_usd=size_usd):
                if is_reversed(rule.reverse_at_tick, tick):
                    return rule.reversed_negative_rate
                return rule.negative_rate
        return self.scenario.base_negative_rate

    def _action(self, strategy: Strategy, tick: int, now_ms: int, market: MarketTick,
                index: int) -> dict[str, Any]:
        sc, st, rng = self.scenario, self._state, self._rng
        action = _choose(rng, strategy.actions)
        pair = _choose(rng, strategy.pairs)
        size = float(rng.uniform(*strategy.size_usd))
        negative = rng.random() < self._negative_rate(strategy, action, pair, tick, market.hour,
                                                      size)
        magnitude = lognormal(rng, sc.return_bps)
        return_bps = -magnitude if negative else magnitude
        gain = round(size * return_bps / 10_000.0, 2)
        if gain == 0.0:  # never let rounding contradict the outcome
            gain = -0.01 if negative else 0.01
        gas = market.gas_gwei * lognormal(rng, _GAS_JITTER)
        slippage = market.slippage_bps * lognormal(rng, _SLIPPAGE_JITTER)
        units = (sc.gas_units or GAS_UNITS).get(action, _DEFAULT_GAS_UNITS)
        fees = gas * units * 1e-9 * market.price + size * sc.fee_bps / 10_000.0
        expected = strategy.expected_return_bps * lognormal(rng, _PREDICTION_JITTER)
        prediction = {"expected_return_bps": expected, "expected_gas_gwei": st.gas_ema,
                      "expected_slippage_bps": st.slippage_ema}
        # Whether this action carries the agent's regime estimate at all (its own stream,
        # drawn only when the scenario leaves some actions unlabelled).
        label: Regime | None = self._label
        if sc.unlabelled_actions > 0 and self._bare_rng.random() < sc.unlabelled_actions:
            label = None
        return action_params(sc, tick, now_ms, label, index, strategy=strategy.name,
                             tool=strategy.tool, action=action, pair=pair, size_usd=size,
                             return_bps=return_bps, gain=gain, gas_gwei=gas,
                             slippage_bps=slippage, fees=fees, prediction=prediction)


def rule_holds(rule: OutcomeRule, *, strategy: str, action: str, pair: str, regime: Regime,
               hour: int, size_usd: float) -> bool:
    """Whether an action meets every condition of an outcome rule (``regime``: the true one,
    not the label the agent writes; ``hour``: UTC hour of the action's timestamp)."""
    return ((rule.action is None or rule.action == action)
            and (rule.token_pair is None or rule.token_pair == pair)
            and (rule.regime is None or rule.regime is regime)
            and (rule.strategy is None or rule.strategy == strategy)
            and (rule.hours is None or in_hours(hour, rule.hours))
            and (rule.size_usd is None
                 or rule.size_usd[0] <= size_usd < rule.size_usd[1]))


def _choose(rng: np.random.Generator, weighted: tuple[tuple[str, float], ...]) -> str:
    total = math.fsum(w for _, w in weighted)
    u = rng.random() * total
    acc = 0.0
    for name, weight in weighted:
        acc += weight
        if u < acc:
            return name
    return weighted[-1][0]
