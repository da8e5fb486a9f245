"""Decisions on the simulator: what the agent gets when it asks before acting (issue 24, part 7).

Usage: python scripts/bench_decision.py [--quick] [--scenarios ...] [--seeds 1 2 3]
                                        [--ticks N] [--draws 20] [--real-model]

For every shipped scenario × seed it runs the simulator through the daemon's tick path with
the curator on (as scripts/bench_learning.py does) to the scenario's horizon, then, at data
time just after it, draws situations from the scenario's planted truth and asks:

- planted: a situation that meets a planted outcome rule's condition (the other fields drawn
  as its strategies draw them). ``rules.applicable`` recall@3: of the learned rules that
  match the planted regularity (bench_learning's test) and whose condition holds there (read
  here, independently of ``curator.claims.applies``), the share in its first 3 places (a
  place serves its rule and the rules of the same advice folded into it, ``also``; every
  count below reads them the same way). Goal ≥ 0.95.
  Situations whose regularity has no such rule count under "unlearned", not in recall.
- near miss: the same situation with one of the planted condition's fields moved just out of
  it (another regime, pair or action, an hour outside the window, a size across the bound):
  the share of calls that still return one of that regularity's rules as applying.
- neutral: a situation in which no true regularity can be stated as a rule: no planted
  outcome rule holds, its hour is outside every planted window, and no claim a rule can
  stand on (an outcome rate on its action, alone or with up to two of its pair, regime,
  chain and tool; a cost or gain metric of ``distiller.metric_actions`` on its action, or
  on one of its other fields when the config ties the metric to its action) is true of
  the scenario by bench_learning's own tests (``planted_of``: the planted regularities, a
  part of an outcome rule's condition, a regime multiplier's effect on a metric, an
  action's gas). Rules that apply, per call (goal ≤ 0.05), are then spurious; "untrue"
  counts those that match no planted regularity nor effect.
- exact text: ``retrieve(query=<an episode's text>)`` puts that episode at rank 1. Goal ≥ 0.99.
- paraphrase: ``retrieve(query=<the planted regularity in other words>)`` puts an entry that
  matches it in the top 3 (goal ≥ 0.9), over the regularities with such an entry. The words
  come from the planted condition by one rule for every scenario (``paraphrase``).
- latency: p50 of ``rules.applicable`` and of ``retrieve(situation=...)`` beside the floor
  (embedding the situation's text + a numpy dot over every entry's and episode's vector, and
  the top 10). Goal ≤ 1.5×. Text questions are asked as an agent asks them: retrieve's
  defaults (summaries included), ``explain: false`` as over the socket.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import yaml
from bench_learning import T0
from benches.sim_oracle import claim_for
from benches.truth import planted_of

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario, shipped_scenarios
from grimoire.feeds.sim.feed import rule_holds
from grimoire.feeds.sim.market import in_hours
from grimoire.feeds.sim.scenario import HourWindow, LeadLag, OutcomeRule, Scenario
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import Embedder, FastEmbedEmbedder, HashEmbedder
from grimoire.records import Category, Claim, EntryStatus, Regime
from grimoire.stores.semantic.types import EntryFilter

MS_PER_HOUR = 3_600_000
DAY_MS = 24 * MS_PER_HOUR
RULES = (Category.WARNING, Category.HEURISTIC)
Test = Callable[[Claim], bool]


# ------------------------------------------------------------------ paraphrases

_REGIME_WORDS = {Regime.BULL: "prices keep rising", Regime.BEAR: "prices keep falling",
                 Regime.SIDEWAYS: "the market goes nowhere",
                 Regime.HIGH_VOL: "volatility is high", Regime.LOW_VOL: "the market is calm",
                 Regime.CRISIS: "the market is in crisis"}
_UNITS = {"gwei", "bps", "usd"}


def _gerund(verb: str) -> str:
    """swap → swapping, rebalance → rebalancing, add → adding (plain English rules)."""
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    if (len(verb) <= 4 and len(verb) >= 3 and verb[-1] not in "aeiouwxy"
            and verb[-2] in "aeiou" and verb[-3] not in "aeiou"):
        return verb + verb[-1] + "ing"
    return verb + "ing"


def _doing(action: str) -> str:
    first, *rest = action.split("_")
    return " ".join([_gerund(first), *rest])


def _metric_words(metric: str) -> str:
    return " ".join(w for w in metric.split("_") if w not in _UNITS) or metric


def _pair_words(pair: str) -> str:
    base, _, quote = pair.partition("/")
    return f"{base} against {quote}" if quote else pair


def _hours_words(hours: tuple[int, int]) -> str:
    return f"from {hours[0]} o'clock to {hours[1]} o'clock UTC"


def paraphrase(reg: HourWindow | OutcomeRule | LeadLag, scenario: Scenario) -> str:
    """The planted regularity as an agent would ask about it, in words of its own: one rule
    for every scenario, from the condition's fields (never a stored text)."""
    if isinstance(reg, HourWindow):
        low = reg.mean < scenario.levels[reg.metric].mean
        return (f"What time of day is the {_metric_words(reg.metric)} "
                f"{'lowest' if low else 'highest'}?")
    if isinstance(reg, OutcomeRule):
        what = _doing(reg.action) if reg.action else "trading"
        parts = [what]
        if reg.token_pair:
            parts.append(_pair_words(reg.token_pair))
        if reg.size_usd is not None:
            lo, hi = reg.size_usd
            parts.append(f"with more than ${lo:,.0f}" if lo > 0 else f"with under ${hi:,.0f}")
        if reg.strategy:
            parts.append(f"for {reg.strategy}")
        if reg.regime is not None:
            parts.append(f"when {_REGIME_WORDS[reg.regime]}")
        if reg.hours is not None:
            parts.append(_hours_words(reg.hours))
        bad = reg.negative_rate > scenario.base_negative_rate
        ask = "a bad idea" if bad else "a good bet"
        return f"Is {' '.join(parts)} {ask}?"
    follow = (f"a switch to a market where {_REGIME_WORDS[reg.follow_regime]}"
              if reg.follow_regime is not None else
              f"a {_metric_words(reg.follow_event.type.value) if reg.follow_event else ''}")
    return f"What warns ahead of {follow}?"


# ------------------------------------------------------------------ the run


@dataclass
class World:
    scenario: Scenario
    end_ms: int
    texts: list[tuple[str, str]]  # (ref, text) of every episode written
    last_metrics: dict[str, float]  # the last observation's market levels


def learn(g: Grimoire, clock: FrozenClock, scenario: Scenario, seed: int, ticks: int) -> World:
    feed = SimFeed(scenario, seed)
    step = int((feed.tick_seconds_hint or 180.0) * 1000)
    texts: list[tuple[str, str]] = []
    last: dict[str, float] = {}
    now = clock()
    for tick in range(1, ticks + 1):
        now = clock.advance(step)
        params = feed.poll(tick, now)
        g.tick(now=now, feed_episodes=params)
        for p in params:
            texts.append((p["ref"], p["text"]))
            if p["type"] == "observation":
                last = {k: float(v) for k, v in p["metrics"].items()}
    return World(scenario, now, texts, last)


def _strategies_for(sc: Scenario, rule: OutcomeRule) -> list[Any]:
    return [s for s in sc.strategies if rule.strategy in (None, s.name)
            and (rule.action is None or rule.action in dict(s.actions))
            and (rule.token_pair is None or rule.token_pair in dict(s.pairs))]


def _situation(world: World, rng: np.random.Generator, *, strategy: Any, action: str,
               pair: str, regime: Regime, hour: int, size: float) -> dict[str, Any]:
    day = (world.end_ms // DAY_MS + 1) * DAY_MS
    minute = int(rng.integers(0, 60))
    return {"actions": [action], "token_pair": pair, "regime": regime.value,
            "strategy": strategy.name, "tool": strategy.tool, "chain": world.scenario.chain,
            "timestamp": day + hour * MS_PER_HOUR + minute * 60_000,
            "metrics": {"size_usd": round(size, 2),
                        **{k: world.last_metrics[k] for k in ("gas_gwei", "slippage_bps")
                           if k in world.last_metrics}}}


def _fields(sit: Mapping[str, Any]) -> dict[str, Any]:
    return {"strategy": sit["strategy"], "action": sit["actions"][0], "pair": sit["token_pair"],
            "regime": Regime(sit["regime"]),
            "hour": int(sit["timestamp"] // MS_PER_HOUR % 24),
            "size_usd": float(sit["metrics"]["size_usd"])}


def _draw(world: World, rng: np.random.Generator, rule: OutcomeRule | None) -> dict[str, Any]:
    """A situation meeting ``rule`` (None: any), its other fields drawn at random."""
    sc = world.scenario
    strategies = _strategies_for(sc, rule) if rule is not None else list(sc.strategies)
    s = strategies[int(rng.integers(len(strategies)))]

    def pick(options: list[str]) -> str:
        return options[int(rng.integers(len(options)))]

    action = rule.action if rule and rule.action else pick([a for a, _ in s.actions])
    pair = rule.token_pair if rule and rule.token_pair else pick([p for p, _ in s.pairs])
    regime = (rule.regime if rule and rule.regime
              else sc.regimes[int(rng.integers(len(sc.regimes)))])
    hours = [h for h in range(24) if rule is None or rule.hours is None
             or in_hours(h, rule.hours)]
    lo, hi = s.size_usd
    if rule is not None and rule.size_usd is not None:
        lo, hi = max(lo, rule.size_usd[0]), min(hi, rule.size_usd[1] - 0.01)
    return _situation(world, rng, strategy=s, action=action, pair=pair, regime=regime,
                      hour=hours[int(rng.integers(len(hours)))], size=float(rng.uniform(lo, hi)))


def _near_miss(world: World, rng: np.random.Generator, rule: OutcomeRule,
               sit: dict[str, Any]) -> dict[str, Any] | None:
    """``sit`` with one field of the rule's condition moved just out of it."""
    sc = world.scenario
    s = next(x for x in sc.strategies if x.name == sit["strategy"])
    moves: list[tuple[str, Any]] = []
    if rule.regime is not None:
        moves += [("regime", r.value) for r in sc.regimes if r is not rule.regime]
    if rule.token_pair is not None:
        moves += [("token_pair", p) for p, _ in s.pairs if p != rule.token_pair]
    if rule.action is not None:
        moves += [("actions", [a]) for a, _ in s.actions if a != rule.action]
    if rule.hours is not None:
        start, end = rule.hours
        hour = int(sit["timestamp"] // MS_PER_HOUR % 24)
        for edge in ((start - 1) % 24, end % 24):
            moves.append(("timestamp", sit["timestamp"] + ((edge - hour) % 24) * MS_PER_HOUR))
    if rule.size_usd is not None:
        lo, hi = rule.size_usd
        for size in (lo * 0.9, hi * 1.1):
            if s.size_usd[0] <= size <= s.size_usd[1]:
                moves.append(("metrics", {**sit["metrics"], "size_usd": round(size, 2)}))
    if not moves:
        return None
    key, value = moves[int(rng.integers(len(moves)))]
    out = {**sit, key: value}
    f = _fields(out)
    return None if rule_holds(rule, **f) else out


_RATES = ("outcome:negative_rate", "outcome:positive_rate")


def stateable_claims(sit: Mapping[str, Any], metric_actions: Mapping[str, Sequence[str]],
                     ) -> list[Claim]:
    """The claims a served rule could stand on that hold in ``sit``, in the learner's
    vocabulary: an outcome rate (either side) of its action, alone or with up to two of
    its other fields; a cost or gain metric (the keys of ``metric_actions``: rules are
    derived only for those) on its action, and on its other fields when the metric is tied
    to its action; either way, all of its strategy."""
    action = sit["actions"][0]
    fields = [(k, sit[k]) for k in ("token_pair", "regime", "chain", "tool") if sit.get(k)]
    out = [Claim(condition={"action": action, **dict(extra)}, target=target,
                 direction="higher", effect=0.0, baseline=0.0, support=0,
                 strategy=sit["strategy"])
           for size in range(3) for extra in itertools.combinations(fields, size)
           for target in _RATES]
    for metric, actions in metric_actions.items():
        # a rule derived from a metric claim names the claim's own action when it has one
        # (an LP add's fees), else the actions the config ties to the metric
        terms = [("action", action), *(fields if action in actions else [])]
        for key, value in terms:
            out.extend(Claim(condition={key: value}, target=f"metric:{metric}",
                             direction=direction, effect=0.0, baseline=0.0, support=0,
                             strategy=sit["strategy"]) for direction in ("higher", "lower"))
    return out


def _neutral(world: World, rng: np.random.Generator, true_tests: Sequence[Test],
             metric_actions: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    """A situation in which no true regularity of the scenario can be stated as a rule
    (the module doc's "neutral"); None when 200 draws find none."""
    sc = world.scenario
    for _ in range(200):
        sit = _draw(world, rng, None)
        f = _fields(sit)
        if any(rule_holds(r, **f) for r in sc.outcome_rules):
            continue
        if any(in_hours(f["hour"], w.hours) for w in sc.hour_windows):
            continue
        if any(t(c) for c in stateable_claims(sit, metric_actions) for t in true_tests):
            continue
        return sit
    return None


# ------------------------------------------------------------------ reading answers


def holds(claim: Claim, sit: Mapping[str, Any]) -> bool:
    """Whether a claim's condition holds in a full situation (this benchmark's own reading)."""
    if claim.strategy is not None and claim.strategy != sit["strategy"]:
        return False
    hour = int(sit["timestamp"] // MS_PER_HOUR % 24)
    for key, value in claim.condition.items():
        if key == "action":
            ok = value in sit["actions"] or value == sit["tool"]
        elif key in ("regime", "token_pair", "chain", "tool"):
            ok = sit.get(key) == value
        elif key == "hour_window":
            ok = in_hours(hour, (int(value[0]), int(value[1])))
        elif key == "metric_band":
            metric, side = value
            v = sit["metrics"].get(metric)
            cut = claim.band_cut
            ok = v is not None and cut is not None and (v >= cut if side == "upper"
                                                        else v <= cut)
        else:
            return False
        if not ok:
            return False
    return True


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _served(rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each rule of an answer's places, with the rules of the same advice it folds
    (``also``): a place serves them all."""
    return [a for r in rules for a in (r, *r.get("also", ()))]


def measure(g: Grimoire, world: World, embedder: Embedder, seed: int, draws: int
            ) -> dict[str, Any]:
    sc = world.scenario
    rng = np.random.default_rng([seed, 0xDEC1])
    named, effects, _ = planted_of(sc)
    entries = g.context.semantic.list_entries(EntryFilter(statuses=(EntryStatus.ACTIVE,)),
                                              limit=None)
    by_id = {e.id: e for e in entries}
    claims = {e.id: claim_for(e, by_id) for e in entries}
    correct = {name: {i for i, c in claims.items() if c is not None and test(c)}
               for name, test in named.items()}
    rules = {e.id for e in entries if e.category in RULES}
    true_tests = [*named.values(), *effects]
    out: dict[str, Any] = {"recall": [], "unlearned": 0, "near": [], "neutral": [],
                           "untrue": [], "exact": [], "para": [], "t_rules": [],
                           "t_retrieve": [], "t_floor": []}
    # The floor searches what retrieve searches: every entry's and every episode's vector.
    matrix = embedder.embed([e.content for e in entries] + [t for _, t in world.texts])

    def holds_for(entry_id: str, sit: Mapping[str, Any]) -> bool:
        claim = claims.get(entry_id)
        return claim is not None and holds(claim, sit)

    def is_true(entry_id: str) -> bool:
        claim = claims.get(entry_id)
        return claim is not None and any(t(claim) for t in true_tests)

    def ask(sit: dict[str, Any]) -> list[dict[str, Any]]:
        started = time.perf_counter()
        answer = g.rules_applicable(sit, limit=10)
        out["t_rules"].append(time.perf_counter() - started)
        started = time.perf_counter()
        g.retrieve(situation=sit, k=10, explain=False)
        out["t_retrieve"].append(time.perf_counter() - started)
        started = time.perf_counter()
        q = embedder.embed([str(answer["situation"])])[0]
        np.argpartition(-(matrix @ q), 10)[:10]
        out["t_floor"].append(time.perf_counter() - started)
        return list(answer["rules"])

    for rule in sc.outcome_rules:
        for _ in range(draws):
            sit = _draw(world, rng, rule)
            answer = ask(sit)
            applicable = {i for i in correct[rule.name] & rules if holds_for(i, sit)}
            if not applicable:
                out["unlearned"] += 1
            else:
                top = {r["id"] for r in _served(answer[:3])}
                out["recall"].append(len(applicable & top) / min(len(applicable), 3))
            miss = _near_miss(world, rng, rule, sit)
            if miss is not None:
                got = ask(miss)
                out["near"].append(any(r["id"] in correct[rule.name] and r["match"] == "applies"
                                       for r in _served(got)))
    metric_actions = g.context.config.distiller.metric_actions
    for _ in range(max(draws, 2 * draws * len(sc.outcome_rules))):
        calm = _neutral(world, rng, true_tests, metric_actions)
        if calm is None:
            break
        applies = [r for r in _served(ask(calm)) if r["match"] == "applies"]
        out["neutral"].append(len(applies))
        out["untrue"].append(sum(1 for r in applies if not is_true(r["id"])))
    picks = rng.choice(len(world.texts), size=min(len(world.texts), 5 * draws), replace=False)
    for i in picks:
        ref, text = world.texts[int(i)]
        items = g.retrieve(query=text, k=5, explain=False)["items"]
        top = items[0] if items else {}
        out["exact"].append(top.get("ref") == ref or (top.get("kind") == "episode"
                                                       and top.get("content") == text))
    regs: list[HourWindow | OutcomeRule | LeadLag] = [*sc.hour_windows, *sc.outcome_rules,
                                                       *sc.lead_lags]
    for reg in regs:
        if not correct.get(reg.name):
            continue
        items = g.retrieve(query=paraphrase(reg, sc), k=10, explain=False)["items"]
        out["para"].append(any(it.get("id") in correct[reg.name] for it in items[:3]))
    return out


def run(name: str, seed: int, ticks: int, embedder: Embedder, draws: int,
        overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    scenario = load_scenario(name)
    clock = FrozenClock(T0)
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(data_dir=str(Path(tmp) / "g")).replace(**{
            "episodes.flush_rows": 4096, "episodes.flush_ms": 10**12, **(overrides or {})})
        with Grimoire.open(config=config, clock=clock, embedder=embedder) as g:
            world = learn(g, clock, scenario, seed, ticks)
            row = measure(g, world, embedder, seed, draws)
    return {"scenario": name, "seed": seed, "ticks": ticks, **row}


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--set wants KEY=YAML, got {text!r}")
    return key.strip(), yaml.safe_load(value)


def _mean(values: list[Any]) -> str:
    return "-" if not values else f"{statistics.fmean(float(v) for v in values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=shipped_scenarios())
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--ticks", type=int, default=None,
                        help="ticks per run (default: each scenario's horizon_ticks, else 2000)")
    parser.add_argument("--draws", type=int, default=20, help="situations per planted rule")
    parser.add_argument("--real-model", action="store_true", help="bundled MiniLM, not hashing")
    parser.add_argument("--quick", action="store_true",
                        help="seed 1, at most 600 ticks, 5 draws per planted rule")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML",
                        help="a config setting for every run, e.g. --set curator.graph_fill=false "
                        "(repeatable; for ablations)")
    args = parser.parse_args()
    overrides = dict(_setting(text) for text in args.set)
    if args.quick:
        args.seeds, args.draws = args.seeds[:1], min(args.draws, 5)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    embedder: Embedder = FastEmbedEmbedder() if args.real_model else HashEmbedder(dim=384)
    rows = []
    for name in args.scenarios:
        horizon = load_scenario(name).horizon_ticks or 2000
        ticks = min(args.ticks or horizon, 600 if args.quick else 10**9)
        for seed in args.seeds:
            rows.append(run(name, seed, ticks, embedder, args.draws, overrides))
            print(f"done: {name} seed {seed}", file=sys.stderr, flush=True)
    head = (f"{'scenario':16} {'seed':>4} {'ticks':>5} {'recall@3':>8} {'n':>4} "
            f"{'unlearned':>9} {'near miss':>9} {'neutral/call':>12} {'untrue':>6} "
            f"{'exact@1':>7} {'para@3':>6} {'n':>3} {'rules p50':>9} {'retr p50':>8} "
            f"{'floor':>7} {'rules×':>6} {'retr×':>6}")
    print("Decisions after the horizon (goals: recall@3 ≥ 0.95, neutral ≤ 0.05 rules a call, "
          "exact@1 ≥ 0.99, para@3 ≥ 0.9, p50 ≤ 1.5× the floor)")
    print(head)
    print("-" * len(head))
    for r in rows:
        floor = _p50(r["t_floor"])
        rules_ms, retr_ms = _p50(r["t_rules"]), _p50(r["t_retrieve"])
        print(f"{r['scenario']:16} {r['seed']:>4} {r['ticks']:>5} {_mean(r['recall']):>8} "
              f"{len(r['recall']):>4} {r['unlearned']:>9} {_mean(r['near']):>9} "
              f"{_mean(r['neutral']):>12} {_mean(r['untrue']):>6} {_mean(r['exact']):>7} "
              f"{_mean(r['para']):>6} {len(r['para']):>3} {rules_ms * 1e3:>8.2f}m "
              f"{retr_ms * 1e3:>7.2f}m {floor * 1e3:>6.2f}m {rules_ms / floor:>6.1f} "
              f"{retr_ms / floor:>6.1f}", flush=True)
    print("recall@3 over situations whose planted rule was learned (n); unlearned: situations "
          "with no learned rule for it; near miss: share of near misses still served that "
          "rule as applying; neutral/call: rules that apply per neutral call, untrue: of "
          "them, matching no planted regularity or planted effect; ms at p50")


if __name__ == "__main__":
    main()
