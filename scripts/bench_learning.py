"""Learning on the simulator: what reaches PLAYBOOK.md, and the distiller's cost per run.

Usage: python scripts/bench_learning.py [--quick] [--ticks 2000] [--seeds 1 2 3]
                                        [--set dreams.enabled=true]
                                        [--scenarios default null reversal] [--real-model]
                                        [--curator-every 50]

Table 1 (issue 11), with the curator on as the daemon runs it: for each scenario ×
seed, the planted regularities found in PLAYBOOK.md (recall), PLAYBOOK.md lines
that match no planted regularity (spurious), the tick of the first correct line,
the ticks a reversed rule took to leave after the reversal, and the largest ratio
of ✓ to the episodes a line cites. Goals: recall ≥ 0.9, spurious 0, ratio ≤ 1. Table 2
(issue 24): each planted regularity against its oracle (scripts/benches/sim_oracle.py).

For each (scenario, seed) it drives the facade tick by tick with the market
simulator (FrozenClock advanced by the scenario's tick), distilling every 10
new episodes per strategy as the daemon does, and prints one table: distill
runs and milliseconds per run (mean, p50, p95, max; and the mean read /
learn / apply split), operations, gate decisions, the tick at which each
planted regularity first became an entry, and the DOWNVOTEs after a reversal.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
import yaml
from benches import apply_quick
from benches.sim_oracle import (
    claim_for,
    oracle_cycles,
    playbook_rows,
    print_table,
    reverse_tick,
    tenure_for,
)
from benches.truth import Test, planted_of

from curator import api as curator_api
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario, shipped_scenarios
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import Embedder, FastEmbedEmbedder, HashEmbedder
from grimoire.records import Category, Claim, EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

T0 = 1_767_225_600_000
REVERSAL_TICK = 1500


def _gas(e: GrimoireEntry) -> bool:
    c = e.claim
    w = c.condition.get("hour_window") if c else None
    return (c is not None and c.target == "metric:gas_gwei" and c.direction == "lower"
            and isinstance(w, list) and set(c.condition) == {"hour_window"}
            and w[0] in (1, 2, 3) and (w[1] - w[0]) % 24 <= 4)


def _swap(e: GrimoireEntry) -> bool:
    c = e.claim
    return (c is not None and e.category is Category.WARNING and c.strategy == "eth-dca"
            and c.condition.get("action") == "swap" and c.condition.get("regime") == "high_vol")


def _link(e: GrimoireEntry) -> bool:
    c = e.claim
    return (c is not None and c.condition.get("event") == "clade_alert"
            and c.target == "event:regime_shift_to_high_vol")


PLANTED: dict[str, Callable[[GrimoireEntry], bool]] = {"gas": _gas, "swap": _swap,
                                                       "link": _link}




_CITED = re.compile(r"(?:(?P<n>\d+) episodes\)|of (?P<m>\d+) times|\(n=(?P<k>\d+)\))")


def playbook_lines(markdown: str, by_id: dict[str, GrimoireEntry],
                   ) -> list[tuple[Claim | None, int, int | None, str]]:
    """(claim, ✓, cited episodes, text) of every entry line of PLAYBOOK.md."""
    out = []
    for m, entry, ok in playbook_rows(markdown, by_id):
        cited = _CITED.search(m["text"])
        n = None if cited is None else int(cited["n"] or cited["m"] or cited["k"])
        out.append((None if entry is None else claim_for(entry, by_id), ok, n, m["text"]))
    return out


def run(scenario: str, seed: int, ticks: int, embedder: Embedder,
        curator_every: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    clock = FrozenClock(T0)
    world = load_scenario(scenario)
    planted, effects, old = planted_of(world)
    reverse_at = reverse_tick(world) or REVERSAL_TICK
    pb: dict[str, Any] = {"found": set(), "spurious": 0, "first": None, "left": None,
                          "ratio": 0.0, "lines": 0, "reverse_at": reverse_at,
                          "tenure": tenure_for(world, planted, old)}
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(data_dir=str(Path(tmp) / "g")).replace(**{
            "episodes.flush_rows": 4096, "episodes.flush_ms": 10**12,
            "curator.every_ticks": curator_every, **(overrides or {})})
        feed = SimFeed(load_scenario(scenario), seed)
        step = int((feed.tick_seconds_hint or 180.0) * 1000)
        runs: list[dict[str, Any]] = []
        dreamt = {"validated": 0, "contradicted": 0}
        down_after = 0
        started = time.perf_counter()
        with Grimoire.open(config=config, clock=clock, embedder=embedder) as g:
            for tick in range(1, ticks + 1):
                now = clock.advance(step)
                summary = g.tick(now=now, feed_episodes=feed.poll(tick, now))
                if config.dreams.enabled:  # the idle slot between two ticks, as the daemon
                    slot = curator_api.dream(g.context)
                    for key in ("validated", "contradicted"):
                        dreamt[key] += int(slot.get(key, 0))
                for d in summary.get("distilled", []):
                    runs.append(d)
                    if tick > reverse_at:
                        down_after += d["ops"]["DOWNVOTE"]
                if tick % curator_every == 0:
                    _snapshot(g, (planted, effects, old), tick, ticks, curator_every, pb)
            wall = time.perf_counter() - started
            live = tuple(s for s in EntryStatus if s is not EntryStatus.ARCHIVED)
            stored = g.context.semantic.list_entries(EntryFilter(statuses=live),
                                                     order="created_at", limit=None)
        if os.environ.get("BENCH_LEARNING_KEEP"):  # for a post-mortem: the run's data dir
            shutil.copytree(Path(tmp) / "g", Path(os.environ["BENCH_LEARNING_KEEP"])
                            / f"{scenario}-{seed}", dirs_exist_ok=True)
        first = {name: min(((e.created_at - T0) // step for e in stored if test(e)),
                           default=None) for name, test in PLANTED.items()}
    ms = sorted(r["ms"] for r in runs) or [0.0]
    oracle = oracle_cycles(scenario, seed, ticks, curator_every, config.distiller.alpha)

    def mean(key: str) -> float:
        return statistics.fmean(r[key] for r in runs) if runs else 0.0

    return {"scenario": scenario, "seed": seed, "ticks": ticks, "wall_s": wall,
            "runs": len(runs), "mean": statistics.fmean(ms), "p50": ms[len(ms) // 2],
            "p95": ms[int(len(ms) * 0.95)], "max": ms[-1], "read": mean("read_ms"),
            "learn": mean("learn_ms"), "apply": mean("apply_ms"),
            "add": sum(r["ops"]["ADD"] for r in runs), "admitted": sum(r["admitted"] for r in runs),
            "merged": sum(r["merged"] for r in runs), "entries": len(stored),
            "down_after": down_after, **first,
            "recall": len(pb["found"]) / len(planted) if planted else None,
            "spurious": pb["spurious"], "first_line": pb["first"], "left": pb["left"],
            "ratio": pb["ratio"], "lines": pb["lines"],
            "spurious_lines": pb.get("spurious_lines", []), "reverses": bool(old),
            "dreamt": dreamt,
            "worst": pb.get("worst", ""),
            "missing": sorted(set(planted) - pb["found"]),
            "oracle_rows": pb["tenure"].rows(oracle)}


def _snapshot(g: Grimoire, truth: tuple[dict[str, Test], list[Test], dict[str, Test]],
              tick: int, ticks: int, every: int, pb: dict[str, Any]) -> None:
    """Read PLAYBOOK.md as the curator just wrote it and update the table's measures."""
    planted, effects, old = truth
    markdown = str(g.playbook_get().get("markdown", ""))
    entries = g.context.semantic.list_entries(
        EntryFilter(statuses=tuple(EntryStatus)), limit=None)
    lines = playbook_lines(markdown, {e.id: e for e in entries})
    pb["tenure"].observe(tick, markdown, {e.id: e for e in entries})
    old_present = False
    for claim, ok, cited, text in lines:
        names = [n for n, test in planted.items() if claim is not None and test(claim)]
        if names and pb["first"] is None:
            pb["first"] = tick
        if cited and ok / cited > pb["ratio"]:
            pb["ratio"] = ok / cited
            pb["worst"] = f"tick {tick}: ✓{ok} of {cited} cited: {text}"
        if claim is not None and any(n in old and old[n](claim) for n in names):
            old_present = True
    if old and tick > pb["reverse_at"] and not old_present and pb["left"] is None:
        pb["left"] = tick - pb["reverse_at"]
    if tick + every > ticks:  # the last PLAYBOOK.md of the run decides recall and spurious
        pb["found"] = {n for claim, *_ in lines for n, test in planted.items()
                       if claim is not None and test(claim)}
        tests = [*planted.values(), *effects]
        spurious = [text for claim, _, _, text in lines
                    if claim is None or not any(t(claim) for t in tests)]
        pb["spurious"] = len(spurious)
        pb["spurious_lines"] = spurious
        pb["lines"] = len(lines)


DEFAULT_TICKS = 2000
_EMBEDDER: list[Embedder] = []


def horizon(scenario: str) -> int:
    """The scenario's own horizon_ticks, else DEFAULT_TICKS."""
    return load_scenario(scenario).horizon_ticks or DEFAULT_TICKS


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--set wants KEY=VALUE, got {text!r}")
    return key.strip(), yaml.safe_load(value)


def _run_one(job: tuple[str, int, int, bool, int, dict[str, Any]]) -> dict[str, Any]:
    """One scenario × seed (in a worker process with --jobs: one embedder per process)."""
    scenario, seed, ticks, real_model, curator_every, overrides = job
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if not _EMBEDDER:
        _EMBEDDER.append(FastEmbedEmbedder() if real_model else HashEmbedder(dim=384))
    row = run(scenario, seed, ticks, _EMBEDDER[0], curator_every, overrides)
    print(f"done: {scenario} seed {seed}, {ticks} ticks, recall {row['recall']}, "
          f"spurious {row['spurious']}", file=sys.stderr, flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=None,
                        help="ticks per run (default: each scenario's horizon_ticks, else "
                        f"{DEFAULT_TICKS})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--curator-every", type=int, default=50,
                        help="curator cycle every this many ticks (the daemon's default)")
    parser.add_argument("--scenarios", nargs="+", default=shipped_scenarios())
    parser.add_argument("--real-model", action="store_true", help="bundled MiniLM, not hashing")
    parser.add_argument("--show", action="store_true", help="print the spurious lines")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML",
                        help="a config setting for every run, e.g. "
                        "--set 'distiller.hour_strata=[regime]' (repeatable)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each in its own process (2 on this 2-core machine "
                        "halves the wall time; the distillation timings then share the cores)")
    parser.add_argument("--quick", action="store_true",
                        help="one run: the default scenario, seed 1, 1,200 ticks")
    parser.add_argument("--bounds", type=int, nargs="?", const=150, default=None,
                        metavar="F", help="no runs: print what bounds each planted "
                        "regularity's first line (the oracle on the agent's regime labels, "
                        "at alpha and at alpha / F; an hour window's second day)")
    args = parser.parse_args(argv)
    if args.bounds is not None:
        from benches.oracle_bounds import print_bounds
        print_bounds(args.scenarios, args.seeds, {s: args.ticks or horizon(s)
                                                  for s in args.scenarios},
                     args.curator_every, args.bounds)
        return
    if args.quick:
        apply_quick(parser, args, {"scenarios": ["default"], "seeds": [1], "ticks": 1_200})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    head = (f"{'scenario':16} {'seed':>4} {'ticks':>5} {'wall s':>7} {'runs':>5} "
            f"{'mean ms':>8} {'p50':>6} {'p95':>6} {'max':>7} {'read':>6} {'learn':>6} "
            f"{'apply':>6} {'ADD':>5} {'admit':>5} {'merge':>5} {'entries':>7} "
            f"{'gas@':>5} {'swap@':>5} {'link@':>5} {'down>rev':>9}")
    overrides = dict(_setting(text) for text in args.set)
    if overrides:
        Config().replace(**overrides)  # a bad key or value fails here, before any run
        print(f"settings: {overrides}")
    todo = [(scenario, seed, args.ticks or horizon(scenario), args.real_model,
             args.curator_every, overrides)
            for scenario in args.scenarios for seed in args.seeds]
    if args.jobs > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.jobs) as pool:
            rows = list(pool.imap(_run_one, todo))
    else:
        rows = [_run_one(job) for job in todo]
    learned = (f"{'scenario':16} {'seed':>4} {'ticks':>5} {'recall':>6} {'spurious':>8} "
               f"{'lines':>5} {'1st correct@':>12} {'reversed left after':>19} "
               f"{'max ✓/cited':>11}")
    print("PLAYBOOK.md (curator on)")
    print(learned)
    print("-" * len(learned))
    for r in rows:
        recall = "-" if r["recall"] is None else f"{r['recall']:.2f}"
        first = "-" if r["first_line"] is None else str(r["first_line"])
        left = ("-" if not r["reverses"] else
                "never" if r["left"] is None else f"{r['left']} ticks")
        print(f"{r['scenario']:16} {r['seed']:>4} {r['ticks']:>5} {recall:>6} "
              f"{r['spurious']:>8} {r['lines']:>5} {first:>12} {left:>19} {r['ratio']:>11.2f}"
              + (f"  dreams: {r['dreamt']['validated']} validated, "
                 f"{r['dreamt']['contradicted']} contradicted"
                 if any(r["dreamt"].values()) else ""))
        if args.show:
            if r["missing"]:
                print(f"    missing: {', '.join(r['missing'])}")
            for text in r["spurious_lines"]:
                print(f"    spurious: {text[:160]}")
            if r["ratio"] > 1.0:
                print(f"    ✓ over cited: {r['worst'][:200]}")
    print()
    print_table(rows)
    print()
    print("Distillation (the daemon's schedule)")
    print(head)
    print("-" * len(head))
    for r in rows:
        def at(name: str, row: dict[str, Any] = r) -> str:
            return "-" if row[name] is None else str(row[name])

        print(f"{r['scenario']:16} {r['seed']:>4} {r['ticks']:>5} {r['wall_s']:>7.1f} "
              f"{r['runs']:>5} {r['mean']:>8.1f} {r['p50']:>6.1f} {r['p95']:>6.1f} "
              f"{r['max']:>7.1f} {r['read']:>6.1f} {r['learn']:>6.1f} {r['apply']:>6.1f} "
              f"{r['add']:>5} {r['admitted']:>5} {r['merged']:>5} {r['entries']:>7} "
              f"{at('gas'):>5} {at('swap'):>5} {at('link'):>5} {r['down_after']:>9}",
              flush=True)


if __name__ == "__main__":
    main()
