"""Simulator scenarios: the typed, validated form of a scenario YAML file.

Owns loading (a shipped name such as ``default`` / ``null`` / ``reversal``, or a path)
and validation. The format is documented once, in the comments of
``scenarios/default.yaml``. Every problem is a ``ConfigError`` whose message names the
source and the dotted key (``regularities[1].hours``), so a typo never silently
drops a regularity. This module draws no random numbers and knows nothing of ticks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grimoire.errors import ConfigError
from grimoire.feeds.sim.yaml_reader import YamlReader
from grimoire.records.enums import EpisodeType, Importance, Regime

__all__ = [
    "MARKET_METRICS",
    "Event",
    "HourWindow",
    "LeadLag",
    "Level",
    "OutcomeRule",
    "RegimeParams",
    "Scenario",
    "Strategy",
    "load_scenario",
    "parse_scenario",
    "shipped_scenarios",
]

SCENARIO_DIR = Path(__file__).parent / "scenarios"
MARKET_METRICS = ("gas_gwei", "slippage_bps", "volume", "pool_liquidity")
TEMPLATE_FIELDS = {"pair": "WETH/USDC", "chain": "ethereum", "price": "3,400.00",
                   "regime": "sideways", "tick": 0}
# Types the simulator writes itself; an `events` entry may not impersonate them.
_RESERVED_TYPES = {EpisodeType.OBSERVATION, EpisodeType.ACTION, EpisodeType.REGIME_SHIFT}

Hours = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Level:
    """A lognormal level: mean > 0 and coefficient of variation (sd / mean)."""

    mean: float
    cv: float


@dataclass(frozen=True, slots=True)
class RegimeParams:
    drift_bps: float
    vol_bps: float
    gas_mult: float = 1.0
    slippage_mult: float = 1.0
    volume_mult: float = 1.0
    liquidity_mult: float = 1.0


@dataclass(frozen=True, slots=True)
class Strategy:
    name: str
    rate: float
    tool: str
    actions: tuple[tuple[str, float], ...]
    pairs: tuple[tuple[str, float], ...]
    size_usd: tuple[float, float]
    expected_return_bps: float


@dataclass(frozen=True, slots=True)
class Event:
    type: EpisodeType
    rate: float
    importance: Importance
    texts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HourWindow:
    name: str
    metric: str
    hours: Hours
    mean: float
    reversed_mean: float
    reverse_at_tick: int | None


@dataclass(frozen=True, slots=True)
class OutcomeRule:
    name: str
    action: str | None
    token_pair: str | None
    regime: Regime | None
    strategy: str | None
    hours: Hours | None
    negative_rate: float
    reversed_negative_rate: float
    reverse_at_tick: int | None
    # The action's own trade size: above <= size_usd < below (either end may be open).
    size_usd: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class LeadLag:
    name: str
    lead: Event
    follow_regime: Regime | None  # exactly one of follow_regime / follow_event is set
    follow_event: Event | None
    probability: float
    reversed_probability: float
    lag_ticks: tuple[int, int]
    reverse_at_tick: int | None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    source: str
    tick_seconds_hint: float
    # Ticks a run needs for every planted regularity to be learnable (a reversal, for one,
    # needs ticks after it too); None: no claim. Benchmarks run this long by default.
    horizon_ticks: int | None
    chain: str
    pair: str
    start_price: float
    levels: Mapping[str, Level]  # keyed by MARKET_METRICS
    fee_bps: float
    regimes: tuple[Regime, ...]
    initial_regime: Regime
    regime_params: Mapping[Regime, RegimeParams]
    transitions: tuple[tuple[float, ...], ...]  # rows and columns in `regimes` order
    base_negative_rate: float
    return_bps: Level
    strategies: tuple[Strategy, ...]
    events: tuple[Event, ...]
    hour_windows: tuple[HourWindow, ...]
    outcome_rules: tuple[OutcomeRule, ...]
    lead_lags: tuple[LeadLag, ...]
    # P(an episode's regime label is another regime than the true one): the agent writes
    # its estimate of the regime, never the simulator's hidden truth.
    label_noise: float = 0.0
    # Gas each action uses (fees = gas × units × price + size × fee tier); None: the
    # simulator's defaults (sim_market.GAS_UNITS). A scenario states its world's costs.
    gas_units: Mapping[str, float] | None = None
    # P(an action episode carries no regime label at all): the agent acts without writing
    # down its estimate of the regime. Outcome rules still follow the true regime.
    unlabelled_actions: float = 0.0


def shipped_scenarios() -> list[str]:
    """Names of the scenarios that ship inside the package."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(spec: str | Path | None = None) -> Scenario:
    """Load a shipped scenario by name (None = ``default``) or a YAML file by path."""
    name = "default" if spec is None else str(spec)
    shipped = SCENARIO_DIR / f"{name}.yaml"
    path = shipped if "/" not in name and shipped.is_file() else Path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        known = ", ".join(shipped_scenarios())
        raise ConfigError(f"daemon.scenario: cannot read {name!r} ({exc.strerror}); "
                          f"give a path to a YAML file or one of: {known}") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario {path}: not valid YAML: {exc}") from exc
    return parse_scenario(raw, source=str(path))


def _level(r: YamlReader, value: Any, key: str) -> Level:
    m = r.mapping(value, key, {"mean", "cv"}, {"mean", "cv"})
    return Level(r.number(m["mean"], f"{key}.mean", 0.0, strict_lo=True),
                 r.number(m["cv"], f"{key}.cv", 0.0, 10.0))


def _event(r: YamlReader, value: Any, key: str, *, with_rate: bool = True) -> Event:
    """A background, lead or follow-up event (a follow-up has no rate of its own)."""
    rate_key = {"rate"} if with_rate else set()
    m = r.mapping(value, key, {"type", "importance", "texts", *rate_key},
                  {"type", "texts", *rate_key})
    kinds = [t for t in EpisodeType if t not in _RESERVED_TYPES]
    if m["type"] not in {t.value for t in kinds}:
        raise r.fail(f"{key}.type", f"{m['type']!r} is not one of: "
                                    f"{', '.join(t.value for t in kinds)}")
    importance = m.get("importance", "routine")
    if importance not in {i.value for i in Importance}:
        raise r.fail(f"{key}.importance", f"{importance!r} is not one of: "
                                          f"{', '.join(i.value for i in Importance)}")
    texts = m["texts"]
    if not isinstance(texts, list) or not texts:
        raise r.fail(f"{key}.texts", "expected a non-empty list of strings")
    for i, t in enumerate(texts):
        r.template(t, f"{key}.texts[{i}]", TEMPLATE_FIELDS)
    rate = r.prob(m["rate"], f"{key}.rate") if with_rate else 1.0
    return Event(EpisodeType(m["type"]), rate, Importance(importance), tuple(texts))


def _gas_units(r: YamlReader, raw: Any) -> Mapping[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise r.fail("market.gas_units", f"expected a mapping of action: units, got {raw!r}")
    return {str(k): r.number(v, f"market.gas_units.{k}", 0.0, strict_lo=True)
            for k, v in raw.items()}


def parse_scenario(raw: Any, *, source: str = "<scenario>") -> Scenario:
    """Validate a parsed YAML document and build the Scenario (ConfigError on any problem)."""
    r = YamlReader(source)
    top = r.mapping(raw, "", {"name", "description", "tick_seconds_hint", "horizon_ticks",
                              "market", "regimes", "outcomes", "strategies", "events",
                              "regularities"},
                    {"name", "tick_seconds_hint", "market", "regimes", "outcomes", "strategies"})
    market = r.mapping(top["market"], "market",
                       {"chain", "pair", "start_price", "fee_bps", "gas_units",
                        *MARKET_METRICS},
                       {"chain", "pair", "start_price", *MARKET_METRICS})
    levels = {m: _level(r, market[m], f"market.{m}") for m in MARKET_METRICS}
    regimes, initial, params, transitions, label_noise, unlabelled = _regimes(
        r, top["regimes"])
    outcomes = r.mapping(top["outcomes"], "outcomes", {"base_negative_rate", "return_bps"},
                         {"base_negative_rate", "return_bps"})
    raw_strategies = top["strategies"]
    if not isinstance(raw_strategies, Mapping):
        raise r.fail("strategies", f"expected a mapping of name: strategy, got {raw_strategies!r}")
    strategies = tuple(_strategy(r, name, value, f"strategies.{name}")
                       for name, value in raw_strategies.items())
    events = top.get("events") or []
    regularities = top.get("regularities") or []
    for key, value in (("events", events), ("regularities", regularities)):
        if not isinstance(value, list):
            raise r.fail(key, f"expected a list, got {value!r}")
    hour_windows: list[HourWindow] = []
    outcome_rules: list[OutcomeRule] = []
    lead_lags: list[LeadLag] = []
    names: set[str] = set()
    for i, item in enumerate(regularities):
        key = f"regularities[{i}]"
        kind = item.get("kind") if isinstance(item, Mapping) else None
        if kind == "hour_window":
            hour_windows.append(_hour_window(r, item, key, levels))
        elif kind == "outcome_rate":
            outcome_rules.append(_outcome_rule(r, item, key, regimes, strategies))
        elif kind == "lead_lag":
            lead_lags.append(_lead_lag(r, item, key, regimes))
        else:
            raise r.fail(f"{key}.kind", f"{kind!r} is not one of: hour_window, outcome_rate, "
                                        "lead_lag")
        if item["name"] in names:
            raise r.fail(f"{key}.name", f"duplicate regularity name {item['name']!r}")
        names.add(item["name"])
    return Scenario(
        name=r.text(top["name"], "name"),
        description=str(top.get("description") or ""),
        source=source,
        tick_seconds_hint=r.number(top["tick_seconds_hint"], "tick_seconds_hint", 0.0,
                                   strict_lo=True),
        horizon_ticks=(None if top.get("horizon_ticks") is None
                       else r.integer(top["horizon_ticks"], "horizon_ticks", 1)),
        chain=r.text(market["chain"], "market.chain"),
        pair=r.text(market["pair"], "market.pair"),
        start_price=r.number(market["start_price"], "market.start_price", 0.0, strict_lo=True),
        levels=levels,
        fee_bps=r.number(market.get("fee_bps", 0.0), "market.fee_bps", 0.0, 10_000.0),
        regimes=regimes,
        initial_regime=initial,
        regime_params=params,
        transitions=transitions,
        base_negative_rate=r.prob(outcomes["base_negative_rate"], "outcomes.base_negative_rate"),
        return_bps=_level(r, outcomes["return_bps"], "outcomes.return_bps"),
        strategies=strategies,
        events=tuple(_event(r, e, f"events[{i}]") for i, e in enumerate(events)),
        hour_windows=tuple(hour_windows),
        outcome_rules=tuple(outcome_rules),
        lead_lags=tuple(lead_lags),
        label_noise=label_noise,
        gas_units=_gas_units(r, market.get("gas_units")),
        unlabelled_actions=unlabelled,
    )


def _regimes(r: YamlReader, raw: Any) -> tuple[tuple[Regime, ...], Regime,
                                            dict[Regime, RegimeParams],
                                            tuple[tuple[float, ...], ...], float, float]:
    m = r.mapping(raw, "regimes", {"initial", "params", "stay", "transitions", "label_noise",
                                   "unlabelled_actions"},
                  {"initial", "params"})
    raw_params = m["params"]
    if not isinstance(raw_params, Mapping) or not raw_params:
        raise r.fail("regimes.params", "expected a non-empty mapping of regime: parameters")
    params: dict[Regime, RegimeParams] = {}
    fields = {"drift_bps", "vol_bps", "gas_mult", "slippage_mult", "volume_mult",
              "liquidity_mult"}
    for name, value in raw_params.items():
        key = f"regimes.params.{name}"
        regime = r.regime(name, key)
        p = r.mapping(value, key, fields, {"drift_bps", "vol_bps"})
        params[regime] = RegimeParams(
            drift_bps=r.number(p["drift_bps"], f"{key}.drift_bps", -1000.0, 1000.0),
            vol_bps=r.number(p["vol_bps"], f"{key}.vol_bps", 0.0, 2000.0),
            **{f: r.number(p[f], f"{key}.{f}", 0.0, strict_lo=True)
               for f in fields - {"drift_bps", "vol_bps"} if f in p})
    regimes = tuple(params)
    initial = r.regime(m["initial"], "regimes.initial", regimes)
    stay = r.prob(m.get("stay", 0.985), "regimes.stay")
    rows_raw = m.get("transitions") or {}
    if not isinstance(rows_raw, Mapping):
        raise r.fail("regimes.transitions", "expected a mapping of regime: {regime: p}")
    rows: dict[Regime, dict[Regime, float]] = {}
    for name, row in rows_raw.items():
        key = f"regimes.transitions.{name}"
        source = r.regime(name, key, regimes)
        if not isinstance(row, Mapping):
            raise r.fail(key, f"expected a mapping of regime: probability, got {row!r}")
        rows[source] = {r.regime(to, f"{key}.{to}", regimes): r.prob(p, f"{key}.{to}")
                        for to, p in row.items()}
        total = sum(rows[source].values())
        if abs(total - 1.0) > 1e-6:
            raise r.fail(key, f"probabilities sum to {total:.6g}, not 1")
    n = len(regimes)
    matrix = []
    for source in regimes:
        if source in rows:
            matrix.append(tuple(rows[source].get(to, 0.0) for to in regimes))
        else:  # shorthand: sticky diagonal, the rest spread evenly
            off = (1.0 - stay) / (n - 1) if n > 1 else 0.0
            matrix.append(tuple(stay if to == source or n == 1 else off for to in regimes))
    label_noise = r.prob(m.get("label_noise", 0.0), "regimes.label_noise")
    if label_noise > 0 and n < 2:
        raise r.fail("regimes.label_noise", "needs at least two regimes to mistake one for "
                                            "another")
    unlabelled = r.prob(m.get("unlabelled_actions", 0.0), "regimes.unlabelled_actions")
    return regimes, initial, params, tuple(matrix), label_noise, unlabelled


def _strategy(r: YamlReader, name: str, raw: Any, key: str) -> Strategy:
    m = r.mapping(raw, key, {"rate", "tool", "actions", "pairs", "size_usd",
                             "expected_return_bps"}, {"rate", "tool", "actions", "pairs",
                                                      "size_usd"})
    return Strategy(
        name=r.text(name, key), rate=r.prob(m["rate"], f"{key}.rate"),
        tool=r.text(m["tool"], f"{key}.tool"),
        actions=r.weights(m["actions"], f"{key}.actions"),
        pairs=r.weights(m["pairs"], f"{key}.pairs"),
        size_usd=r.pair_range(m["size_usd"], f"{key}.size_usd"),
        expected_return_bps=r.number(m.get("expected_return_bps", 10.0),
                                     f"{key}.expected_return_bps", -10_000.0, 10_000.0))


def _reverse_at(r: YamlReader, m: Mapping[str, Any], key: str) -> int | None:
    value = m.get("reverse_at_tick")
    return None if value is None else r.integer(value, f"{key}.reverse_at_tick")


def _hour_window(r: YamlReader, raw: Any, key: str, levels: Mapping[str, Level]) -> HourWindow:
    m = r.mapping(raw, key, {"name", "kind", "metric", "hours", "mean", "reversed_mean",
                             "reverse_at_tick"}, {"name", "metric", "hours", "mean"})
    metric = m["metric"]
    if metric not in MARKET_METRICS:
        raise r.fail(f"{key}.metric", f"{metric!r} is not one of: {', '.join(MARKET_METRICS)}")
    mean = r.number(m["mean"], f"{key}.mean", 0.0, strict_lo=True)
    mirrored = max(2.0 * levels[metric].mean - mean, 0.05 * levels[metric].mean)
    return HourWindow(
        name=r.text(m["name"], f"{key}.name"), metric=metric,
        hours=r.hours(m["hours"], f"{key}.hours"), mean=mean,
        reversed_mean=r.number(m.get("reversed_mean", mirrored), f"{key}.reversed_mean", 0.0,
                               strict_lo=True),
        reverse_at_tick=_reverse_at(r, m, key))


def _outcome_rule(r: YamlReader, raw: Any, key: str, regimes: tuple[Regime, ...],
                  strategies: tuple[Strategy, ...]) -> OutcomeRule:
    m = r.mapping(raw, key, {"name", "kind", "when", "negative_rate", "reversed_negative_rate",
                             "reverse_at_tick"}, {"name", "when", "negative_rate"})
    when = r.mapping(m["when"], f"{key}.when",
                     {"action", "token_pair", "regime", "strategy", "hours", "size_usd"})
    if not when:
        raise r.fail(f"{key}.when", "needs at least one condition")
    rate = r.prob(m["negative_rate"], f"{key}.negative_rate")

    # A condition no strategy can meet would make the rule silently dead: refuse it.
    known = {"action": {a for s in strategies for a, _ in s.actions},
             "token_pair": {p for s in strategies for p, _ in s.pairs},
             "strategy": {s.name for s in strategies}}

    def opt_text(name: str) -> str | None:
        if when.get(name) is None:
            return None
        value = r.text(when[name], f"{key}.when.{name}")
        if value not in known[name]:
            raise r.fail(f"{key}.when.{name}", f"{value!r} is not used by any strategy "
                                               f"(known: {', '.join(sorted(known[name]))})")
        return value

    strategy = opt_text("strategy")
    size = None if when.get("size_usd") is None else _size_range(
        r, when["size_usd"], f"{key}.when.size_usd",
        [s for s in strategies if strategy in (None, s.name)])
    return OutcomeRule(
        name=r.text(m["name"], f"{key}.name"), action=opt_text("action"),
        token_pair=opt_text("token_pair"),
        regime=None if when.get("regime") is None else r.regime(
            when["regime"], f"{key}.when.regime", regimes),
        strategy=strategy,
        hours=None if when.get("hours") is None else r.hours(when["hours"],
                                                             f"{key}.when.hours"),
        negative_rate=rate,
        reversed_negative_rate=r.prob(m.get("reversed_negative_rate", 1.0 - rate),
                                      f"{key}.reversed_negative_rate"),
        reverse_at_tick=_reverse_at(r, m, key), size_usd=size)


def _size_range(r: YamlReader, raw: Any, key: str, strategies: list[Strategy]
                ) -> tuple[float, float]:
    """``{above: x, below: y}`` (at least one): above <= size < below, in USD. Some
    strategy the rule covers must trade sizes on both sides of a given bound, or the
    condition would hold for all of its actions or for none."""
    m = r.mapping(raw, key, {"above", "below"})
    if not m:
        raise r.fail(key, "needs above, below or both (USD)")
    lo = 0.0 if m.get("above") is None else r.number(m["above"], f"{key}.above", 0.0)
    hi = math.inf if m.get("below") is None else r.number(m["below"], f"{key}.below", 0.0,
                                                           strict_lo=True)
    if hi <= lo:
        raise r.fail(key, f"above {lo:g} is not below {hi:g}")
    if not any(s.size_usd[0] < bound < s.size_usd[1] for s in strategies
               for bound in (lo, hi) if 0.0 < bound < math.inf):
        ranges = ", ".join(f"{s.name} {s.size_usd[0]:g}-{s.size_usd[1]:g}" for s in strategies)
        raise r.fail(key, f"no strategy of the rule trades sizes on both sides of it "
                          f"(size_usd: {ranges})")
    return lo, hi


def _lead_lag(r: YamlReader, raw: Any, key: str, regimes: tuple[Regime, ...]) -> LeadLag:
    m = r.mapping(raw, key, {"name", "kind", "lead", "follow", "probability", "lag_ticks",
                             "reversed_probability", "reverse_at_tick"},
                  {"name", "lead", "follow", "probability", "lag_ticks"})
    follow = m["follow"]
    follow_regime: Regime | None = None
    follow_event: Event | None = None
    if isinstance(follow, Mapping) and "regime" in follow:
        r.mapping(follow, f"{key}.follow", {"regime"})
        follow_regime = r.regime(follow["regime"], f"{key}.follow.regime", regimes)
    else:
        follow_event = _event(r, follow, f"{key}.follow", with_rate=False)
    lo, hi = r.pair_range(m["lag_ticks"], f"{key}.lag_ticks", integer=True)
    return LeadLag(
        name=r.text(m["name"], f"{key}.name"), lead=_event(r, m["lead"], f"{key}.lead"),
        follow_regime=follow_regime, follow_event=follow_event,
        probability=r.prob(m["probability"], f"{key}.probability"),
        reversed_probability=r.prob(m.get("reversed_probability", 0.0),
                                    f"{key}.reversed_probability"),
        lag_ticks=(int(lo), int(hi)), reverse_at_tick=_reverse_at(r, m, key))
