"""What bounds a learner's first line, beside bench_learning's oracle (``--bounds``).

The oracle (``sim_oracle``) tests exactly the planted condition, once, on the *true* regime
of every tick. A learner has none of these. For each planted outcome rule and hour window
of a scenario × seed this prints the first curator cycle at which:

- ``oracle@``: the oracle's own test finds it (alpha, true regime);
- ``labels@``: the same test on the regime the agent wrote (its observations' labels, the
  only regime a learner can read; the simulator mislabels ``label_noise`` of the ticks);
- ``labels/F@``: that test at alpha / F, the Bonferroni share of one hypothesis in a family
  of F (``--family``; the distiller's families on the shipped scenarios hold about 90-220
  hypotheses' worth once the hour windows came round: ``evidence["family_size"]``);
- ``recurs@`` (hour windows): the tick at which each hour of the window was seen on
  ``distiller.min_days_for_hours`` (2) days, before which no hour-of-day finding is read.

A learner's listed@ near labels/F@ (or recurs@) is the evidence, not a delay of the pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from benches import sim_oracle as so
from grimoire.config import Config
from grimoire.records import Regime


def _recurs(run: so.Replay, hours: tuple[int, int], days: float) -> int | None:
    """The first tick by which each hour of ``[start, end)`` was seen on ``days`` days."""
    seen: dict[int, set[int]] = {}
    want = {(hours[0] + k) % 24 for k in range((hours[1] - hours[0]) % 24 or 24)}
    for e in run.episodes:
        if e["type"] != "observation":
            continue
        hour = e["timestamp"] // 3_600_000
        seen.setdefault(hour % 24, set()).add(hour // 24)
        if all(len(seen.get(h, ())) >= math.ceil(days) for h in want):
            return int(e["tick_id"])
    return None


def print_bounds(scenarios: Sequence[str], seeds: Sequence[int], ticks_of: dict[str, int],
                 every: int, family: int) -> None:
    cfg = Config().distiller
    alpha = cfg.alpha
    head = (f"{'scenario':16} {'seed':>4} {'regularity':34} {'oracle@':>7} {'labels@':>7} "
            f"{'labels/F@':>9} {'recurs@':>7}")
    print(f"Bounds on a learner's first line (F = {family}; see benches/oracle_bounds.py)")
    print(head)
    print("-" * len(head))

    def at(value: int | None) -> str:
        return "-" if value is None else str(value)

    for name in scenarios:
        for seed in seeds:
            run = so.replay(name, seed, ticks_of[name])
            labels = {e["tick_id"]: Regime(e["regime"]) for e in run.episodes
                      if e["type"] == "observation" and e.get("regime")}
            seen = so.Replay(run.scenario, run.episodes, {**run.regimes, **labels})
            cycles = so._cycles(ticks_of[name], every)
            for rule in run.scenario.outcome_rules:
                print(f"{name:16} {seed:>4} {rule.name[:34]:34} "
                      f"{at(so._outcome(run, rule, cycles, alpha).first):>7} "
                      f"{at(so._outcome(seen, rule, cycles, alpha).first):>7} "
                      f"{at(so._outcome(seen, rule, cycles, alpha / family).first):>9} "
                      f"{'-':>7}")
            for w in run.scenario.hour_windows:
                print(f"{name:16} {seed:>4} {w.name[:34]:34} "
                      f"{at(so._window(run, w, cycles, alpha).first):>7} {'-':>7} "
                      f"{at(so._window(run, w, cycles, alpha / family).first):>9} "
                      f"{at(_recurs(run, w.hours, cfg.min_days_for_hours)):>7}", flush=True)
