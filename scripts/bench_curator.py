"""Benchmark the curator cycle on real stores, and what it does to reads running beside it.

Two parts (``--part``): ``cycle`` (the default, below) and ``pure``: the CPU-bound parts
the cycle and the write path are built from, without stores or a model (distiller, causal
discovery, decay / quality / admission gate, PLAYBOOK.md compile, clustering, region MDP,
the retrieval stages after the backends; its code in ``scripts/benches/pure.py``). Every
option but ``--part NAME`` is the part's own (``--part pure --help``).

Builds a Grimoire in a temporary directory: --episodes simulator episodes (default 10,000)
and --entries knowledge entries (default 2,000: metric and outcome-rate claims the
validation phase judges, rules derived from them, warnings, causal links, summaries,
plain insights; mixed statuses and ages). Then measures:

- a cold cycle (every episode new; the window is capped at curator.window_episodes);
- steady-state cycles (one heartbeat's worth of new episodes: --new per cycle);
- ``retrieve`` latency p50 / p95 while idle and while a steady-state cycle runs, from a
  reader thread that loops over the agent's own call (``g.retrieve(query=…, k=10)``, a
  deciding retrieval: every backend, rerank, causal boost, MMR, budget, and its log
  write), with query texts sampled from the stored episodes.

Goals (the curator issue): a steady cycle at 10k episodes / 2k entries ≤ 2 s, and
``retrieve`` p95 during a cycle ≤ 2× idle; the table prints each beside its goal.

The distil phase calls ``curator.learn.hook.distill`` when it is installed; without it the
phase is skipped and the cycle time excludes the learners (the table says which).

Usage (from the worktree):
    .venv/bin/python scripts/bench_curator.py [--episodes 10000] [--entries 2000]
        [--new 100] [--cycles 3] [--seconds 3] [--embedder hash|real] [--quick]
    .venv/bin/python scripts/bench_curator.py --part pure [--quick] [--parts retrieval,gate]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from benches import apply_quick

from curator.cycle.learn import learn_module
from curator.cycle.run import run_cycle
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario
from grimoire.ids import new_id
from grimoire.models.embedders import Embedder, HashEmbedder
from grimoire.models.factory import make_embedder
from grimoire.records import (
    Category,
    Claim,
    DecayClass,
    EntryStatus,
    GrimoireEntry,
    Provenance,
    Regime,
)

TICK_MS = 180_000


def quiet() -> None:
    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def feed_batches(n: int, start: int, first_tick: int, feed: SimFeed) -> tuple[list[dict[str, Any]],
                                                                               int]:
    out: list[dict[str, Any]] = []
    tick = first_tick
    while len(out) < n:
        tick += 1
        out.extend(feed.poll(tick, start + tick * TICK_MS))
    return out[:n], tick


def write(g: Grimoire, episodes: list[dict[str, Any]]) -> None:
    for i in range(0, len(episodes), 500):
        g.episode_write_batch(episodes[i:i + 500])


# Claims as varied as a learner's: every hour window, regime, metric, action and event
# pair, so that (as in a real store) a cycle's new episodes match only some of them.
_METRICS = [("gas_gwei", 6.0, 24.0), ("gas_gwei", 31.0, 24.0), ("slippage_bps", 21.0, 14.0),
            ("volume", 3.1e6, 2.5e6), ("fees", 4.0, 11.0)]
_ACTIONS = ["swap", "rebalance", "add_liquidity", "remove_liquidity"]
_EVENTS = ["clade_alert", "replicant_report", "coordination_intent", "action:swap:negative",
           "action:rebalance:positive", "regime_shift_to_high_vol", "regime_shift_to_bear"]


def make_entries(g: Grimoire, n: int, now: int, rng: np.random.Generator) -> None:
    ctx = g.context
    regimes = list(Regime)
    rows: list[GrimoireEntry] = []
    for i in range(n):
        kind = i % 10
        age = int(rng.uniform(0, 20) * MS_PER_DAY)
        regime = regimes[i % len(regimes)]
        claim: Claim | None = None
        tags: tuple[str, ...] = ()
        parents: tuple[str, ...] = ()
        if kind <= 2:  # metric insight
            metric, effect, base = _METRICS[i % len(_METRICS)]
            start = int(rng.integers(0, 24))
            cond: dict[str, Any] = {"regime": regime.value,
                                    "hour_window": [start, (start + 2) % 24]}
            claim = Claim(cond, f"metric:{metric}", "lower" if effect < base else "higher",
                          effect, base, 30 + i % 50)
            category = Category.INSIGHT
        elif kind <= 4:  # outcome-rate warning / heuristic
            action = _ACTIONS[i % len(_ACTIONS)]
            claim = Claim({"action": action, "regime": regime.value},
                          "outcome:negative_rate", "higher" if kind == 3 else "lower",
                          0.8 if kind == 3 else 0.1, 0.35, 20,
                          strategy="eth-dca" if action == "swap" else "weth-usdc-lp")
            category = Category.WARNING if kind == 3 else Category.HEURISTIC
        elif kind == 5 and rows:  # a rule derived from an earlier insight
            parent = rows[-5] if rows[-5].category is Category.INSIGHT else rows[0]
            category, tags, parents = Category.HEURISTIC, ("derived",), (parent.id,)
        elif kind == 6:
            cause, effect_event = (_EVENTS[i % len(_EVENTS)],
                                   _EVENTS[(i // len(_EVENTS) + 1 + i) % len(_EVENTS)])
            claim = Claim({"event": cause, "within_ms": 600_000}, f"event:{effect_event}",
                          "higher", 0.35, 0.02, 5)
            category = Category.CAUSAL_LINK
        elif kind == 7:
            category, tags = Category.INSIGHT, ("summary", "summary:l1")
        else:
            category = Category.INSIGHT
        status = (EntryStatus.ACTIVE, EntryStatus.CANDIDATE, EntryStatus.DEMOTED)[i % 3]
        rows.append(GrimoireEntry(
            id=new_id(now - age), category=category,
            content=f"Bench entry {i}: {category.value} about {regime.value} and swaps #{i}",
            confidence=float(rng.uniform(0.05, 0.99)), quality_score=float(rng.uniform(0.1, 0.9)),
            decay_class=DecayClass.TACTICAL if category is Category.INSIGHT
            else DecayClass.REGIME_CONDITIONAL, provenance=Provenance.SELF_LEARNED,
            created_at=now - age, last_accessed_at=now - age, market_regime=regime,
            claim=claim, tags=tags, parent_entry_ids=parents, status=status,
            strategy=claim.strategy if claim else None, updated_at=now - age))
    vectors = ctx.embedder.embed([r.content for r in rows])

    def insert(batch: list[tuple[GrimoireEntry, Any]]) -> None:
        with ctx.semantic.transaction():
            for entry, vector in batch:
                ctx.semantic.insert_entry(entry, vector)

    pairs = list(zip(rows, vectors, strict=True))
    for i in range(0, len(pairs), 500):
        ctx.writer.call(functools.partial(insert, pairs[i:i + 500]))


class Reader(threading.Thread):
    """Loops over ``retrieve``, recording each call's latency (ms)."""

    def __init__(self, g: Grimoire, queries: list[str]) -> None:
        super().__init__(daemon=True)
        self.g, self.queries = g, queries
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            text = self.queries[i % len(self.queries)]
            t0 = time.perf_counter()
            self.g.retrieve(query=text, k=10)
            self.latencies.append((time.perf_counter() - t0) * 1000)
            i += 1


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else float("nan")


def reads(g: Grimoire, queries: list[str], seconds: float) -> list[float]:
    reader = Reader(g, queries)
    reader.start()
    time.sleep(seconds)
    reader.stop.set()
    reader.join()
    return reader.latencies


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--new", type=int, default=100, help="new episodes per steady cycle")
    parser.add_argument("--cycles", type=int, default=3, help="steady-state cycles to time")
    parser.add_argument("--settle", type=int, default=3,
                        help="cycles run after the cold one before steady state is timed")
    parser.add_argument("--seconds", type=float, default=3.0, help="idle read sampling time")
    parser.add_argument("--embedder", choices=("hash", "real"), default="hash")
    parser.add_argument("--quick", action="store_true", help="2k episodes, 500 entries, "
                        "1 settling and 2 timed cycles, 1 s of idle reads")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"episodes": 2_000, "entries": 500, "settle": 1, "cycles": 2,
                                   "seconds": 1.0})
    quiet()
    rng = np.random.default_rng(0)
    embedder: Embedder = HashEmbedder(dim=384) if args.embedder == "hash" else make_embedder(
        "all-MiniLM-L6-v2-int8", None, 384, 1, 32)
    with tempfile.TemporaryDirectory() as tmp:
        clock = FrozenClock()
        start = clock.now
        config = Config().replace(**{"episodes.flush_ms": 3_600_000})
        feed = SimFeed(load_scenario(None), 7)
        with Grimoire.open(Path(tmp) / "data", config=config, clock=clock,
                           embedder=embedder) as g:
            t0 = time.perf_counter()
            episodes, tick = feed_batches(args.episodes, start, 0, feed)
            clock.set(start + tick * TICK_MS)
            write(g, episodes)
            g.context.episodes.flush()
            make_entries(g, args.entries, clock.now, rng)
            setup = time.perf_counter() - t0
            queries = [str(e["text"]) for e in episodes[:: max(1, len(episodes) // 200)]]
            for text in queries[:10]:  # warm the retrieval caches before anything is timed
                g.retrieve(query=text, k=10)

            t0 = time.perf_counter()
            cold = run_cycle(g.context)
            cold_s = time.perf_counter() - t0

            settling: list[float] = []
            for _ in range(args.settle):  # the synthetic store's first promotions and prunes
                batch, tick = feed_batches(args.new, start, tick, feed)
                clock.set(start + tick * TICK_MS)
                write(g, batch)
                t0 = time.perf_counter()
                run_cycle(g.context)
                settling.append(time.perf_counter() - t0)
            steady: list[float] = []
            phases: dict[str, list[float]] = {}
            for _ in range(args.cycles):  # alone: the cycle's own cost
                batch, tick = feed_batches(args.new, start, tick, feed)
                clock.set(start + tick * TICK_MS)
                write(g, batch)
                t0 = time.perf_counter()
                summary = run_cycle(g.context)
                steady.append(time.perf_counter() - t0)
                for name, counts in summary["phases"].items():
                    phases.setdefault(name, []).append(float(counts["ms"]))
            idle = reads(g, queries, args.seconds)
            during: list[float] = []
            shared: list[float] = []
            for _ in range(args.cycles):  # beside a reader: what the agent's reads see
                batch, tick = feed_batches(args.new, start, tick, feed)
                clock.set(start + tick * TICK_MS)
                write(g, batch)
                reader = Reader(g, queries)
                reader.start()
                t0 = time.perf_counter()
                run_cycle(g.context)
                shared.append(time.perf_counter() - t0)
                reader.stop.set()
                reader.join()
                during.extend(reader.latencies)
            learners = ("with curator.learn.hook" if learn_module()
                        else "curator.learn.hook not installed")
            print(f"\ncurator cycle: {args.episodes} episodes, {args.entries} entries, "
                  f"{args.embedder} embedder, {learners} (setup {setup:.1f} s)\n")
            print("| measure | value |")
            print("|---|---|")
            print(f"| cold cycle ({cold['episodes']} new episodes) | {cold_s * 1000:.0f} ms |")
            print(f"| settling cycles 2..{args.settle + 1} (the synthetic store's first "
                  f"promotions, demotions, prunes) | "
                  f"{' / '.join(f'{x * 1000:.0f}' for x in settling)} ms |")
            print(f"| steady cycle ({args.new} new episodes), median of {args.cycles} | "
                  f"{statistics.median(steady) * 1000:.0f} ms (goal ≤ 2000 ms) |")
            print(f"| steady cycle, max | {max(steady) * 1000:.0f} ms |")
            print(f"| steady cycle beside a busy reader thread, median | "
                  f"{statistics.median(shared) * 1000:.0f} ms |")
            for name, values in phases.items():
                print(f"| · phase {name} (median) | {statistics.median(values):.1f} ms |")
            print(f"| retrieve idle: n / p50 / p95 | {len(idle)} / {pct(idle, 50):.2f} / "
                  f"{pct(idle, 95):.2f} ms |")
            print(f"| retrieve during cycles: n / p50 / p95 | {len(during)} / "
                  f"{pct(during, 50):.2f} / {pct(during, 95):.2f} ms |")
            ratio = pct(during, 95) / pct(idle, 95) if idle and during else float("nan")
            print(f"| retrieve p95 during / idle | {ratio:.2f}x (goal ≤ 2x) |")


PARTS = {"cycle": main, "pure": "benches.pure", "replay": "benches.replay"}

if __name__ == "__main__":
    from benches import dispatch

    sys.exit(dispatch("bench_curator.py", PARTS))
