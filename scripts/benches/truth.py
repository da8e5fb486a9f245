"""The planted truth of a simulator scenario, as tests on a stored claim: what
``scripts/bench_learning.py`` counts as recall (a named regularity), as true but not
counted (an effect its regime multipliers plant) or as spurious (neither), and the rules
that hold only before a reversal. ``scripts/bench_decision.py`` draws its situations from
the same truth. Read from the scenario's own file; never from what a learner stored.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from benches.sim_oracle import size_band_holds
from grimoire.feeds.sim.market import GAS_UNITS, in_hours
from grimoire.records import Claim

__all__ = ["Test", "planted_of"]

Test = Callable[[Claim], bool]
_MULTS = {"gas_gwei": "gas_mult", "slippage_bps": "slippage_mult", "volume": "volume_mult",
          "pool_liquidity": "liquidity_mult", "fees": "gas_mult"}
_PAIR_KEYS = {"token_pair", "chain"}


def _hour_test(metric: str, hours: tuple[int, int], lower: bool) -> Test:
    start, end = hours
    span = (end - start) % 24 or 24

    def test(c: Claim) -> bool:
        w = c.condition.get("hour_window")
        return (c.target == f"metric:{metric}" and isinstance(w, list) and len(w) == 2
                and set(c.condition) - _PAIR_KEYS == {"hour_window"}
                and min((w[0] - start) % 24, (start - w[0]) % 24) <= 1
                and (w[1] - w[0]) % 24 <= span + 2)
    return test


def _outcome_test(rule: Any) -> Test:
    def test(c: Claim) -> bool:
        cond = c.condition
        if not c.target.startswith("outcome:"):
            return False
        if rule.action is not None and cond.get("action") != rule.action:
            return False
        if rule.token_pair is not None and cond.get("token_pair", rule.token_pair) != \
                rule.token_pair:
            return False
        if rule.regime is not None and cond.get("regime") != rule.regime.value:
            return False
        if rule.strategy is not None and c.strategy not in (rule.strategy, None):
            return False
        if rule.hours is not None and "hour_window" not in cond:
            return False
        if not size_band_holds(rule, cond):
            return False
        return set(cond) <= {"action", "regime", "token_pair", "chain", "hour_window", "tool",
                             "metric_band"}
    return test


def _lead_test(lead: Any) -> Test:
    follow = ("event:regime_shift" if lead.follow_regime is not None
              else f"event:{lead.follow_event.type.value}")

    def test(c: Claim) -> bool:
        return (c.condition.get("event") == lead.lead.type.value
                and c.target.startswith(follow))
    return test


def _regime_test(metric: str, regime: str, higher: bool) -> Test:
    def test(c: Claim) -> bool:
        return (c.target == f"metric:{metric}" and c.condition.get("regime") == regime
                and set(c.condition) - _PAIR_KEYS == {"regime"}
                and (c.direction == "higher") == higher)
    return test


def _fee_test(action: str, higher: bool) -> Test:
    def test(c: Claim) -> bool:
        return (c.target == "metric:fees" and c.condition == {"action": action}
                and (c.direction == "higher") == higher)
    return test


def _hours_overlap(rule: Any, window: Any) -> bool:
    """True when an hour window ``[start, end)`` shares an hour with the rule's hours."""
    if rule.hours is None or not isinstance(window, list) or len(window) != 2:
        return False
    start, end = int(window[0]), int(window[1])
    hours = {(start + k) % 24 for k in range((end - start) % 24 or 24)}
    return any(in_hours(h, rule.hours) for h in hours)


def _outcome_metric_test(rule: Any, higher: bool, sole_action: Mapping[str, str]) -> Test:
    """The rule's P&L: mean pnl / return lower (higher) under its condition or a part of it.
    A strategy that takes only one action (``sole_action``) states the action by itself:
    "multi-dca's return is lower 20:00-23:00" is "its swaps' return is", the same claim.
    An hour window must overlap the rule's hours."""
    parts = {"action": rule.action, "token_pair": rule.token_pair,
             "regime": None if rule.regime is None else rule.regime.value}

    def test(c: Claim) -> bool:
        cond = {k: v for k, v in c.condition.items() if k not in ("hour_window", "tool")}
        if ("action" not in cond and c.strategy is not None
                and sole_action.get(c.strategy) == rule.action):
            cond["action"] = rule.action
        window = c.condition.get("hour_window")
        return (c.target in ("metric:pnl", "metric:return_bps")
                and (c.direction == "higher") == higher
                and rule.strategy in (None, c.strategy)
                and (window is None or _hours_overlap(rule, window))
                and bool(cond) and all(parts.get(k) == v for k, v in cond.items()))
    return test


def _complement_test(rule: Any, bad: bool) -> Test:
    """Measured against the action's own rate (which the rule pulls), the same action in
    another regime or on another pair is the better one (worse, for a winning rule): its
    outcome rate, and its mean pnl / return, differ accordingly. True, not spurious."""
    own = {"regime": None if rule.regime is None else rule.regime.value,
           "token_pair": rule.token_pair}

    def test(c: Claim) -> bool:
        cond = c.condition
        other = [k for k, v in own.items() if v is not None and k in cond and cond[k] != v]
        if not other or set(cond) - {"action", "regime", "token_pair", "chain", "tool"}:
            return False
        if rule.action is not None and cond.get("action", rule.action) != rule.action:
            return False
        if c.target.startswith("outcome:"):
            better = (c.target == "outcome:positive_rate") == (c.direction == "higher")
        elif c.target in ("metric:pnl", "metric:return_bps"):
            better = c.direction == "higher"
        else:
            return False
        return rule.strategy in (None, c.strategy) and better == bad
    return test


def _outcome_part_test(rule: Any, bad: bool) -> Test:
    """An outcome rule moves the outcome rate of any part of its condition the same way.

    The simulator draws an action's outcome negative with the rule's rate q when the action
    meets the rule's condition C (action, pair, *true* regime, strategy, hours) and with the
    base rate b otherwise (``SimFeed._negative_rate``); which action, pair and size a
    strategy draws does not depend on the regime or the hour (``SimFeed._action``). So for a
    condition C' made of some of C's terms, P(negative | C') = b + (q − b)·P(C | C'), and
    the population the distiller compares it with (every rated action, or the action's
    own for a condition on one) is wider than C', so P(C | C') > P(C | population)
    whenever C' leaves anything out: C' loses more often than its population when q > b
    (less often when q < b). For slippage_evening (q = 0.85 for weth-usdc-lp rebalances
    in bear, b = 0.35) "rebalances lose more often" follows with a gap of 0.5·P(bear) ×
    (1 − the rebalances' share): the planted lead-lag forces bear after 85% of replicant
    reports, and the Markov chain with that push spends about half its ticks in bear
    (≈0.49 stationary; 58–66% of the 2,000 ticks of seeds 1–3), so rebalances lose
    ≈0.35 + 0.5·0.5 ≈ 60% against ≈40% for all actions: true of the world, not spurious.
    An hour window must overlap the rule's hours, and one term at least must be the
    rule's own (a tool or chain alone restricts nothing)."""
    own = {"action": rule.action, "token_pair": rule.token_pair,
           "regime": None if rule.regime is None else rule.regime.value}

    def test(c: Claim) -> bool:
        cond = c.condition
        if not c.target.startswith("outcome:") or set(cond) - {*own, "hour_window", "tool",
                                                               "chain"}:
            return False
        if not any(k in own for k in cond):
            return False
        if any(k in own and own[k] != v for k, v in cond.items()):
            return False
        if "hour_window" in cond and not _hours_overlap(rule, cond["hour_window"]):
            return False
        worse = (c.target == "outcome:negative_rate") == (c.direction == "higher")
        return worse == bad and (rule.strategy is None or c.strategy in (rule.strategy, None))
    return test


def _band_outcome_test(rule: Any, bad: bool, metric: str, higher_in_regime: bool) -> Test:
    """A band of a metric the rule's regime multiplies moves the rule's action's outcomes.

    The simulator draws each metric as a lognormal around level × the *true* regime's
    multiplier (``sim_market.step_market``), so the metric's distribution in the rule's
    regime is the others' scaled up (down): its top third holds more (fewer) of that
    regime's ticks than the whole run does, its bottom third fewer (more). Outcomes follow
    the true regime (``SimFeed._negative_rate``), so by the part-of-condition argument
    (``_outcome_part_test``) the rule's action in the band the regime crowds into loses
    more often when the rule loses more (and wins more often in the other band). In the
    default scenario (swaps on WETH/USDC lose 80% in high_vol, slippage ×1.8 there) seed 3
    shows it: swaps at slippage ≤ 12.1 bps are positive 69% of the time (6% of them in
    high_vol) against 42% above it (61% in high_vol). A true effect of the world, and an
    observable one where the regime is only estimated; not spurious. The criterion for
    "the regime multiplies the metric" is the regime-effect one of ``planted_of``."""
    own = {"action": rule.action, "token_pair": rule.token_pair}

    def test(c: Claim) -> bool:
        cond = c.condition
        band = cond.get("metric_band")
        if (not c.target.startswith("outcome:") or not isinstance(band, list | tuple)
                or len(band) != 2 or band[0] != metric or rule.action is None
                or cond.get("action") != rule.action
                or set(cond) - {"metric_band", *own, "tool", "chain"}
                or any(k in own and own[k] != v for k, v in cond.items())):
            return False
        crowded = (band[1] == "upper") == higher_in_regime
        worse = (c.target == "outcome:negative_rate") == (c.direction == "higher")
        return (worse == (bad == crowded)
                and (rule.strategy is None or c.strategy in (rule.strategy, None)))
    return test


def _stationary(scenario: Any) -> dict[str, float]:
    """The long-run share of ticks in each regime: the stationary distribution of the
    scenario's regime chain (rows and columns in ``scenario.regimes`` order)."""
    matrix = np.array(scenario.transitions, dtype=np.float64)
    if matrix.size == 0:
        return {}
    values, vectors = np.linalg.eig(matrix.T)
    pi = np.abs(np.real(vectors[:, int(np.argmin(np.abs(values - 1.0)))]))
    pi = pi / pi.sum()
    return {r.value: float(p) for r, p in zip(scenario.regimes, pi, strict=True)}


def planted_of(scenario: Any) -> tuple[dict[str, Test], list[Test], dict[str, Test]]:
    """The scenario's named regularities (recall is over these), the effects its regime
    multipliers plant (true, so not spurious, but not counted for recall), and the rules
    that hold before a reversal (they must leave PLAYBOOK.md after it), from its own file."""
    named: dict[str, Test] = {}
    old: dict[str, Test] = {}
    effects: list[Test] = []
    for w in scenario.hour_windows:
        lower = w.mean < scenario.levels[w.metric].mean
        named[w.name] = _hour_test(w.metric, w.hours, lower)
        if w.metric == "gas_gwei":
            # The observation `fees` is gas × a swap's gas units × price plus a fixed fee
            # (sim_market.step_market) and price does not depend on the hour, so an hour
            # window of gas is one of fees too, in the same direction: true, not spurious.
            effects.append(_hour_test("fees", w.hours, lower))
        if w.reverse_at_tick is not None:
            old[w.name] = (lambda low: lambda c: (c.direction == "lower") == low)(lower)
    for r in scenario.outcome_rules:
        named[r.name] = _outcome_test(r)
        if r.reverse_at_tick is not None:
            bad = r.negative_rate > scenario.base_negative_rate
            old[r.name] = (lambda b: lambda c: ((c.target == "outcome:negative_rate")
                                                == (c.direction == "higher")) == b)(bad)
    for lead in scenario.lead_lags:
        named[lead.name] = _lead_test(lead)
    # A regime's multiplier against the mean of the others' is a true effect of the world
    # (sideways slippage is lower than elsewhere when high_vol and crisis multiply it).
    # (against their mean, and against their median: high_vol's gas ×1.2 is 20% above the
    # ×1.0 of most regimes even though crisis' ×1.6 lifts the others' mean to 1.12)
    # (and against their mean weighted by how long the market stays in each: "otherwise" is
    # mostly the common regimes, so in lp_lowvol, where low_vol ×0.7 is common, bull volume
    # ×1.3 is 1.6× the rest as observed, though within 10% of the plain mean and median)
    share = _stationary(scenario)
    for metric, mult in _MULTS.items():
        values = {r.value: getattr(p, mult) for r, p in scenario.regime_params.items()}
        for regime, value in values.items():
            others = sorted(v for r, v in values.items() if r != regime)
            if not others:
                continue
            weights = {r: share.get(r, 0.0) for r in values if r != regime}
            references = [sum(others) / len(others), statistics.median(others)]
            if sum(weights.values()) > 0:
                references.append(sum(values[r] * w for r, w in weights.items())
                                  / sum(weights.values()))
            for rest in references:
                if abs(value - rest) >= 0.1 * rest:
                    effects.append(_regime_test(metric, regime, value > rest))
    # An action's fees follow the gas it uses (market.gas_units): one that uses more gas
    # than its strategy's other actions costs more, a true effect of the world too.
    units = scenario.gas_units or GAS_UNITS
    for strategy in scenario.strategies:
        acts = dict(strategy.actions)
        for action in acts:
            others = [(units.get(a, 200_000), w) for a, w in acts.items() if a != action]
            if not others:
                continue
            rest = sum(u * w for u, w in others) / sum(w for _, w in others)
            mine = units.get(action, 200_000)
            if abs(mine - rest) >= 0.1 * rest:
                effects.append(_fee_test(action, mine > rest))
    # An outcome rule moves the P&L of the actions it covers: their mean pnl / return under
    # the rule's condition (or a part of it) is lower when it loses more, higher when less.
    # (and, for a rule that reverses, the reversed one's as well: both held in the run)
    sole_action = {st.name: st.actions[0][0] for st in scenario.strategies
                   if len(st.actions) == 1}
    for r in scenario.outcome_rules:
        rates = [r.negative_rate] + ([r.reversed_negative_rate]
                                     if r.reverse_at_tick is not None else [])
        for rate in rates:
            if rate != scenario.base_negative_rate:
                effects.append(_outcome_metric_test(r, rate < scenario.base_negative_rate,
                                                    sole_action))
                effects.append(_complement_test(r, rate > scenario.base_negative_rate))
                effects.append(_outcome_part_test(r, rate > scenario.base_negative_rate))
                if r.regime is None:
                    continue
                for metric, mult in _MULTS.items():
                    values = {g: getattr(p, mult) for g, p in scenario.regime_params.items()}
                    mine = values[r.regime]
                    others = sorted(v for g, v in values.items() if g is not r.regime)
                    rests = (sum(others) / len(others), statistics.median(others)) \
                        if others else ()
                    if rests and all(abs(mine - rest) >= 0.1 * rest for rest in rests) and \
                            len({mine > rest for rest in rests}) == 1:
                        effects.append(_band_outcome_test(
                            r, rate > scenario.base_negative_rate, metric, mine > rests[0]))
    return named, effects, old
