"""What the evidence allowed, and how a planted regularity's line fared: for bench_learning.

The oracle (issue 24, part 5): for each planted regularity of a scenario, the first curator
cycle at which a one-sided test of exactly the planted condition, at the distiller's alpha,
on the episodes written by that cycle, rejects "no effect". It knows what no learner knows:
the planted condition itself (so it pays for no search over conditions) and the true regime
of every tick (the simulator's ``SimFeed.regime``, not the label the agent wrote). That is
the limit for that evidence; a learner is judged against twice it.

The tests are the distiller's own (``curator.distiller.stats``):
- an outcome rule: Fisher's exact test (hypergeometric tail) of the negative outcomes of
  the actions meeting the condition against the rest of its population (the rule's action's
  episodes, of its strategy when it names one; every action's when it names no action);
- an hour window: Welch's t of the metric in the observations inside the hours against
  those outside;
- a lead-lag: the binomial tail of leads followed within the longest lag, against the share
  of ticks (outside the follow-up regime, for a regime follow-up) that are so followed.
For a reversed regularity, the same test on the episodes since the reversal, in the
reversed direction (against the old effect, when the reversed one is no effect at all).

``Tenure`` follows each planted regularity's lines through the PLAYBOOK.md snapshots: when
one is first listed, snapshots without one after that, whether it came back under another
entry (dropped and re-created, its ✓ lost) and whether its ✓ ever went down; after a
reversal, the snapshot by which the old line is gone and the reversed one (when the reversed
effect is an effect) listed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curator.distiller import stats
from grimoire.feeds import SimFeed, load_scenario
from grimoire.feeds.sim.feed import rule_holds
from grimoire.feeds.sim.market import hour_of, in_hours
from grimoire.feeds.sim.scenario import Event, HourWindow, LeadLag, OutcomeRule, Scenario
from grimoire.records import Claim, EntryStatus, GrimoireEntry, Regime

__all__ = ["Oracle", "Replay", "Tenure", "oracle_cycles", "print_table", "replay",
           "reverse_tick", "size_band_holds", "tenure_for"]

T0 = 1_767_225_600_000  # bench_learning's start: the replay must poll as it does


@dataclass(frozen=True)
class Replay:
    """The feed's episodes of one run (as bench_learning polls it) and the true regime of
    every tick."""

    scenario: Scenario
    episodes: list[dict[str, Any]]
    regimes: dict[int, Regime]


def replay(name: str, seed: int, ticks: int) -> Replay:
    scenario = load_scenario(name)
    feed = SimFeed(scenario, seed)
    step = int((feed.tick_seconds_hint or 180.0) * 1000)
    episodes: list[dict[str, Any]] = []
    regimes: dict[int, Regime] = {}
    for tick in range(1, ticks + 1):
        episodes.extend(feed.poll(tick, T0 + tick * step))
        regimes[tick] = feed.regime
    return Replay(scenario, episodes, regimes)


def reverse_tick(scenario: Scenario) -> int | None:
    """The earliest tick at which a planted regularity reverses (None: none does)."""
    planted: list[HourWindow | OutcomeRule | LeadLag] = [
        *scenario.hour_windows, *scenario.outcome_rules, *scenario.lead_lags]
    ticks = [r.reverse_at_tick for r in planted if r.reverse_at_tick is not None]
    return min(ticks, default=None)


@dataclass(frozen=True)
class Oracle:
    first: int | None  # first cycle (tick) the planted effect is significant
    reverse_at: int | None
    reversed_first: int | None  # first cycle after the reversal the reversed one is


def _cycles(ticks: int, every: int) -> list[int]:
    return list(range(every, ticks + 1, every))


def _first(cycles: list[int], rows_tick: np.ndarray, lo: int, hi: int | None,
           test: Callable[[np.ndarray], float], alpha: float) -> int | None:
    """The first cycle whose rows (ticks in [lo, cycle], below hi) give log p <= log alpha."""
    for cycle in cycles:
        if cycle < lo:
            continue
        mask = (rows_tick >= lo) & (rows_tick <= cycle)
        if hi is not None:
            mask &= rows_tick < hi
        if test(mask) <= math.log(alpha):
            return cycle
        if hi is not None and cycle >= hi:
            return None
    return None


def _outcome(run: Replay, rule: OutcomeRule, cycles: list[int], alpha: float) -> Oracle:
    acts = [e for e in run.episodes if e["type"] == "action"
            and (rule.action is None or e["actions"][0] == rule.action)
            and (rule.strategy is None or e["strategy"] == rule.strategy)]
    tick = np.array([e["tick_id"] for e in acts], dtype=np.int64)
    negative = np.array([e["outcome"] == "negative" for e in acts], dtype=bool)
    cell = np.array([rule_holds(rule, strategy=e["strategy"], action=e["actions"][0],
                                pair=e["token_pair"], regime=run.regimes[e["tick_id"]],
                                hour=hour_of(e["timestamp"]),
                                size_usd=e["metrics"]["size_usd"]) for e in acts], dtype=bool)
    base = run.scenario.base_negative_rate

    def fisher(rate: float, old: float) -> Callable[[np.ndarray], float]:
        def test(mask: np.ndarray) -> float:
            total, good = int(mask.sum()), int((mask & negative).sum())
            n, k = int((mask & cell).sum()), int((mask & cell & negative).sum())
            if n == 0 or n == total:
                return 0.0
            if rate == base:  # the effect vanished: is the old rate contradicted?
                return (stats.binom_logcdf(k, n, old) if old > base
                        else stats.binom_logsf(k, n, old))
            return (stats.hypergeom_logsf(k, total, good, n) if rate > base
                    else stats.hypergeom_logcdf(k, total, good, n))
        return test

    rev = rule.reverse_at_tick
    first = _first(cycles, tick, 0, rev, fisher(rule.negative_rate, base), alpha)
    again = None if rev is None else _first(
        cycles, tick, rev, None, fisher(rule.reversed_negative_rate, rule.negative_rate), alpha)
    return Oracle(first, rev, again)


def _window(run: Replay, w: HourWindow, cycles: list[int], alpha: float) -> Oracle:
    obs = [e for e in run.episodes if e["type"] == "observation"]
    tick = np.array([e["tick_id"] for e in obs], dtype=np.int64)
    value = np.array([e["metrics"][w.metric] for e in obs], dtype=np.float64)
    inside = np.array([in_hours(hour_of(e["timestamp"]), w.hours) for e in obs], dtype=bool)
    base = run.scenario.levels[w.metric].mean

    def welch(mean: float, old: float) -> Callable[[np.ndarray], float]:
        def test(mask: np.ndarray) -> float:
            a, b = value[mask & inside], value[mask & ~inside]
            if a.size < 2 or b.size < 2:
                return 0.0
            if mean == base:  # vanished: a one-sample test against the old mean
                t, df = stats.one_sample_t(float(a.mean()), float(a.var(ddof=1)), a.size, old)
                return stats.t_logsf(t if old < base else -t, df)
            t, df = stats.welch_t(float(a.mean()), float(a.var(ddof=1)), a.size,
                                  float(b.mean()), float(b.var(ddof=1)), b.size)
            if math.isnan(t):
                return 0.0
            return stats.t_logsf(t if mean > base else -t, df)
        return test

    rev = w.reverse_at_tick
    first = _first(cycles, tick, 0, rev, welch(w.mean, base), alpha)
    again = None if rev is None else _first(cycles, tick, rev, None,
                                            welch(w.reversed_mean, w.mean), alpha)
    return Oracle(first, rev, again)


def _matcher(event: Event) -> Callable[[dict[str, Any]], bool]:
    """Episodes written from one of the event's templates ({fields} match anything)."""
    patterns = [re.compile("^" + re.sub(r"\\\{\w+\\\}", ".*", re.escape(t)) + "$")
                for t in event.texts]
    kind = event.type.value
    return lambda e: e["type"] == kind and any(p.match(e["text"]) for p in patterns)


def _lead(run: Replay, link: LeadLag, cycles: list[int], alpha: float) -> Oracle:
    is_lead = _matcher(link.lead)
    if link.follow_regime is not None:
        target = link.follow_regime.value
        follows = {e["tick_id"] for e in run.episodes
                   if e["type"] == "regime_shift" and e["regime"] == target}
        eligible = {t for t, r in run.regimes.items() if r is not link.follow_regime}
    else:
        assert link.follow_event is not None
        is_follow = _matcher(link.follow_event)
        follows = {e["tick_id"] for e in run.episodes if is_follow(e)}
        eligible = set(run.regimes)
    hi = link.lag_ticks[1]
    leads = np.array(sorted({e["tick_id"] for e in run.episodes if is_lead(e)}),
                     dtype=np.int64)
    ticks = np.array(sorted(eligible), dtype=np.int64)

    def followed(t: int) -> bool:
        return any(t + k in follows for k in range(1, hi + 1))

    lead_hit = np.array([followed(int(t)) for t in leads], dtype=bool)
    tick_hit = np.array([followed(int(t)) for t in ticks], dtype=bool)

    def binomial(prob: float, old: float) -> Callable[[int, int], float]:
        def test(lo: int, cycle: int) -> float:
            lm = (leads >= lo) & (leads <= cycle - hi)
            tm = (ticks >= lo) & (ticks <= cycle - hi)
            n, k = int(lm.sum()), int((lm & lead_hit).sum())
            if n == 0 or not tm.any():
                return 0.0
            if prob == 0.0:  # the link broke: fewer follow-ups than the old probability
                return stats.binom_logcdf(k, n, old)
            p0 = float(tick_hit[tm].mean())
            return stats.binom_logsf(k, n, min(max(p0, 1e-12), 1.0))
        return test

    def first(lo: int, stop: int | None, test: Callable[[int, int], float]) -> int | None:
        for cycle in cycles:
            if cycle < lo:
                continue
            end = cycle if stop is None else min(cycle, stop - 1)
            if test(lo, end) <= math.log(alpha):
                return cycle
            if stop is not None and cycle >= stop:
                return None
        return None

    rev = link.reverse_at_tick
    return Oracle(first(0, rev, binomial(link.probability, 0.0)), rev,
                  None if rev is None else first(
                      rev, None, binomial(link.reversed_probability, link.probability)))


def oracle_cycles(name: str, seed: int, ticks: int, every: int, alpha: float
                  ) -> dict[str, Oracle]:
    """Each planted regularity's oracle, by name, for a run of ``ticks`` with a curator
    cycle every ``every`` ticks."""
    run = replay(name, seed, ticks)
    cycles = _cycles(ticks, every)
    out: dict[str, Oracle] = {}
    for w in run.scenario.hour_windows:
        out[w.name] = _window(run, w, cycles, alpha)
    for r in run.scenario.outcome_rules:
        out[r.name] = _outcome(run, r, cycles, alpha)
    for link in run.scenario.lead_lags:
        out[link.name] = _lead(run, link, cycles, alpha)
    return out


# ------------------------------------------------------------- lines in PLAYBOOK.md

_LINE = re.compile(r"^- `(?P<short>[0-9a-f-]+)` · (?P<meta>.*?) — (?P<text>.*)$")
_TICKS = re.compile(r"✓(?P<ok>\d+) ✗(?P<bad>\d+)")


def claim_for(entry: GrimoireEntry, entries: Mapping[str, GrimoireEntry]) -> Claim | None:
    """The claim a line stands on: its own, or (a derived rule) its insight's."""
    if entry.claim is not None:
        return entry.claim
    for parent in entry.parent_entry_ids:
        found = entries.get(parent)
        if found is not None and found.claim is not None:
            return found.claim
    return None


def playbook_rows(markdown: str, entries: Mapping[str, GrimoireEntry],
                  ) -> list[tuple[re.Match[str], GrimoireEntry | None, int]]:
    """(the line's match, the entry it names, its ✓) for every entry line of PLAYBOOK.md.
    A short id is unique among the listed entries only (an archived or candidate entry may
    share it): the listed one is active, or the parent a rule names."""
    out = []
    for line in markdown.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        found = [e for i, e in entries.items() if i.startswith(m["short"])]
        entry = next((e for e in found if e.status is EntryStatus.ACTIVE),
                     next((e for e in found if e.claim is not None), None))
        ticks = _TICKS.search(m["meta"])
        out.append((m, entry, int(ticks["ok"]) if ticks else 0))
    return out


def listed(markdown: str, entries: Mapping[str, GrimoireEntry]
           ) -> list[tuple[str, Claim | None, int]]:
    """(entry id, claim, ✓) of every entry line of PLAYBOOK.md; a rule derived from an
    insight stands on its insight's claim."""
    return [(entry.id, claim_for(entry, entries), ok)
            for _, entry, ok in playbook_rows(markdown, entries) if entry is not None]


@dataclass
class _Track:
    first: int | None = None
    ids: list[str] = field(default_factory=list)
    gaps: int = 0  # snapshots after the first listing (before a reversal) without a line
    recreated: int = 0  # listed under an entry unrelated to the one(s) listed just before
    ok_drops: int = 0  # an entry's ✓ went down from one snapshot to the next
    last_ok: dict[str, int] = field(default_factory=dict)
    reflected: int | None = None  # first snapshot after the reversal that shows it


class Tenure:
    """Each planted regularity's lines across PLAYBOOK.md snapshots (see the module doc)."""

    def __init__(self, named: Mapping[str, Callable[[Claim], bool]],
                 old: Mapping[str, Callable[[Claim], bool]], reverse_at: int | None,
                 vanishes: frozenset[str] = frozenset()) -> None:
        self.named, self.old, self.reverse_at = named, old, reverse_at
        self.vanishes = vanishes  # reversed to no effect: reflected once the old line is gone
        self.tracks = {name: _Track() for name in named}

    def observe(self, tick: int, markdown: str, entries: Mapping[str, GrimoireEntry]) -> None:
        lines = listed(markdown, entries)
        after = self.reverse_at is not None and tick >= self.reverse_at
        for name, test in self.named.items():
            track = self.tracks[name]
            mine = [(i, c, ok) for i, c, ok in lines if c is not None and test(c)]
            if name in self.old and after:
                stale = self.old[name]
                old_listed = any(stale(c) for _, c, _ in mine if c is not None)
                new_listed = any(not stale(c) for _, c, _ in mine if c is not None)
                if track.reflected is None and not old_listed and (
                        new_listed or name in self.vanishes):
                    track.reflected = tick
                continue
            ids = {i for i, _, _ in mine}
            if not ids:
                if track.first is not None:
                    track.gaps += 1
                continue
            # The same line goes on under its entry, or under a rule derived from it (its
            # parent); any other entry is the regularity dropped and re-made, ✓ from zero.
            lineage = {p for i in ids if i in entries for p in entries[i].parent_entry_ids}
            if track.first is None:
                track.first = tick
            elif not (ids | lineage) & set(track.last_ok):
                track.recreated += 1
            for i, _, ok in mine:
                if i in track.last_ok and ok < track.last_ok[i]:
                    track.ok_drops += 1
                if i not in track.ids:
                    track.ids.append(i)
            track.last_ok = {i: ok for i, _, ok in mine}

    def rows(self, oracle: Mapping[str, Oracle]) -> list[dict[str, Any]]:
        out = []
        for name, track in self.tracks.items():
            o = oracle.get(name, Oracle(None, None, None))
            out.append({"name": name, "oracle": o.first, "listed": track.first,
                        "gaps": track.gaps, "recreated": track.recreated,
                        "entries": len(track.ids), "ok_drops": track.ok_drops,
                        "reverse_at": o.reverse_at, "oracle_rev": o.reversed_first,
                        "reflected": track.reflected})
        return out


def tenure_for(world: Scenario, named: Mapping[str, Callable[[Claim], bool]],
               old: Mapping[str, Callable[[Claim], bool]]) -> Tenure:
    """A Tenure for a scenario's planted regularities (``named``; ``old``: the tests of the
    lines that must leave after a reversal, as bench_learning's planted_of gives them)."""
    vanishes = frozenset(
        [w.name for w in world.hour_windows if w.reversed_mean == world.levels[w.metric].mean]
        + [r.name for r in world.outcome_rules
           if r.reversed_negative_rate == world.base_negative_rate])
    return Tenure(named, old, reverse_tick(world), vanishes)


def size_band_holds(rule: OutcomeRule, condition: Mapping[str, Any]) -> bool:
    """A claim's metric_band against an outcome rule's size condition: a rule on the
    action's own size is found as that size's band on the rule's side (``above`` a size:
    the upper band); a rule without one names no band."""
    band = condition.get("metric_band")
    if rule.size_usd is None:
        return band is None
    side = "upper" if rule.size_usd[0] > 0 else "lower"
    return isinstance(band, list | tuple) and list(band) == ["size_usd", side]


def _within(got: int | None, limit: int | None, since: int = 0) -> str:
    if limit is None:
        return "n/a"
    if got is None:
        return "no"
    return "yes" if got - since <= 2 * (limit - since) else "no"


def print_table(rows: list[dict[str, Any]]) -> None:
    """One line per scenario × seed × planted regularity (rows carry ``oracle_rows``)."""
    head = (f"{'scenario':16} {'seed':>4} {'regularity':34} {'oracle@':>7} {'listed@':>7} "
            f"{'≤2×':>4} {'gaps':>4} {'re-made':>7} {'✓ drops':>7} {'rev@':>5} "
            f"{'oracle rev@':>11} {'reflected@':>10} {'≤2×':>4}")
    print("Against the oracle (first cycle a one-sided test of exactly the planted condition "
          "at the distiller's alpha finds it)")
    print(head)
    print("-" * len(head))

    def at(v: int | None) -> str:
        return "-" if v is None else str(v)

    for r in rows:
        for o in r.get("oracle_rows", []):
            rev = o["reverse_at"]
            print(f"{r['scenario']:16} {r['seed']:>4} {o['name'][:34]:34} {at(o['oracle']):>7} "
                  f"{at(o['listed']):>7} {_within(o['listed'], o['oracle']):>4} "
                  f"{o['gaps']:>4} {o['recreated']:>7} {o['ok_drops']:>7} {at(rev):>5} "
                  f"{at(o['oracle_rev']):>11} {at(o['reflected']):>10} "
                  f"{_within(o['reflected'], o['oracle_rev'], rev or 0):>4}")
    print("oracle@ / listed@: tick of the curator cycle; ≤2×: listed@ ≤ 2 × oracle@ "
          "(reflected@ − rev@ ≤ 2 × (oracle rev@ − rev@)); gaps: later snapshots without "
          "the line (before a reversal); re-made: it came back under a new entry; ✓ drops: "
          "a listed entry's ✓ went down")
