"""Learning on the simulator: distillation cost per run in the daemon's schedule, recall, precision.

Usage: python scripts/bench_learn.py [--ticks 3000] [--seeds 1 2]
                                     [--scenarios default null reversal] [--real-model]

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
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.embed import Embedder, FastEmbedEmbedder, HashEmbedder
from grimoire.feeds import SimFeed, load_scenario
from grimoire.grimoire import Grimoire
from grimoire.records import Category, EntryStatus, GrimoireEntry
from grimoire.stores.semantic_types import EntryFilter

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


def run(scenario: str, seed: int, ticks: int, embedder: Embedder) -> dict[str, Any]:
    clock = FrozenClock(T0)
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(data_dir=str(Path(tmp) / "g")).replace(**{
            "episodes.flush_rows": 4096, "episodes.flush_ms": 10**12,
            "curator.every_ticks": 10**9})
        feed = SimFeed(load_scenario(scenario), seed)
        step = int((feed.tick_seconds_hint or 180.0) * 1000)
        runs: list[dict[str, Any]] = []
        down_after = 0
        started = time.perf_counter()
        with Grimoire.open(config=config, clock=clock, embedder=embedder) as g:
            for tick in range(1, ticks + 1):
                now = clock.advance(step)
                summary = g.tick(now=now, feed_episodes=feed.poll(tick, now))
                for d in summary.get("distilled", []):
                    runs.append(d)
                    if tick > REVERSAL_TICK:
                        down_after += d["ops"]["DOWNVOTE"]
            wall = time.perf_counter() - started
            live = tuple(s for s in EntryStatus if s is not EntryStatus.ARCHIVED)
            stored = g.context.semantic.list_entries(EntryFilter(statuses=live),
                                                     order="created_at", limit=None)
        first = {name: min(((e.created_at - T0) // step for e in stored if test(e)),
                           default=None) for name, test in PLANTED.items()}
    ms = sorted(r["ms"] for r in runs) or [0.0]

    def mean(key: str) -> float:
        return statistics.fmean(r[key] for r in runs) if runs else 0.0

    return {"scenario": scenario, "seed": seed, "ticks": ticks, "wall_s": wall,
            "runs": len(runs), "mean": statistics.fmean(ms), "p50": ms[len(ms) // 2],
            "p95": ms[int(len(ms) * 0.95)], "max": ms[-1], "read": mean("read_ms"),
            "learn": mean("learn_ms"), "apply": mean("apply_ms"),
            "add": sum(r["ops"]["ADD"] for r in runs), "admitted": sum(r["admitted"] for r in runs),
            "merged": sum(r["merged"] for r in runs), "entries": len(stored),
            "down_after": down_after, **first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=3000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--scenarios", nargs="+", default=["default", "null", "reversal"])
    parser.add_argument("--real-model", action="store_true", help="bundled MiniLM, not hashing")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    embedder: Embedder = FastEmbedEmbedder() if args.real_model else HashEmbedder(dim=384)
    head = (f"{'scenario':9} {'seed':>4} {'ticks':>5} {'wall s':>7} {'runs':>5} "
            f"{'mean ms':>8} {'p50':>6} {'p95':>6} {'max':>7} {'read':>6} {'learn':>6} "
            f"{'apply':>6} {'ADD':>5} {'admit':>5} {'merge':>5} {'entries':>7} "
            f"{'gas@':>5} {'swap@':>5} {'link@':>5} {'down>1500':>9}")
    print(head)
    print("-" * len(head))
    for scenario in args.scenarios:
        for seed in args.seeds:
            r = run(scenario, seed, args.ticks, embedder)

            def at(name: str, row: dict[str, Any] = r) -> str:
                return "-" if row[name] is None else str(row[name])

            print(f"{r['scenario']:9} {r['seed']:>4} {r['ticks']:>5} {r['wall_s']:>7.1f} "
                  f"{r['runs']:>5} {r['mean']:>8.1f} {r['p50']:>6.1f} {r['p95']:>6.1f} "
                  f"{r['max']:>7.1f} {r['read']:>6.1f} {r['learn']:>6.1f} {r['apply']:>6.1f} "
                  f"{r['add']:>5} {r['admitted']:>5} {r['merged']:>5} {r['entries']:>7} "
                  f"{at('gas'):>5} {at('swap'):>5} {at('link'):>5} {r['down_after']:>9}",
                  flush=True)


if __name__ == "__main__":
    main()
