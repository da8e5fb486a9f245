"""``bench_privacy.py --part scopes``: what a scope costs (issue 28, part 2).

A scope is a partition: a whole Grimoire under ``DATA/scopes/NAME`` sharing the default
scope's model. Measured on one open Grimoire (hash embedder: the model is shared, so it
adds nothing per scope), each scope filled with the same number of episodes:

- opening a scope on the first call that names it (stores created and opened), and a
  reopen of an existing one after a restart;
- the routing's own cost per call: ``health`` with and without ``scope`` (p50, µs);
- ``retrieve`` p50 in the default scope and in a scope of equal size (the partition reads
  only its own stores, so the two should match);
- resident memory added by each open scope (RSS after filling it, minus before).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benches import apply_quick
from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder

WORDS = ("gas", "spiked", "swap", "failed", "oracle", "lagged", "pool", "weth", "usdc",
         "slippage", "bridge", "delay", "vault", "drained", "price", "dropped")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fill(g: Grimoire, n: int, scope: str | None) -> None:
    batch = [{"text": " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5, 7)) + f" {i}",
              "timestamp": 1_767_225_600_000 + i * 1000} for i in range(n)]
    for start in range(0, n, 500):
        g.episode_write_batch(batch[start:start + 500], scope=scope)


def _p50_us(fn: object, calls: int) -> float:
    assert callable(fn)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=5000, help="episodes per scope")
    parser.add_argument("--scopes", type=int, default=3, help="scopes besides the default")
    parser.add_argument("--calls", type=int, default=300, help="retrieves per scope")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"episodes": 1000, "scopes": 2, "calls": 100})
    emb, clock = HashEmbedder(), FrozenClock()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        rows: list[tuple[str, str]] = []
        with Grimoire.open(root, clock=clock, embedder=emb) as g:
            _fill(g, args.episodes, None)
            opens, rss = [], []
            for i in range(args.scopes):
                before = _rss_mb()
                started = time.perf_counter()
                g.health(scope=f"s{i}")
                opens.append(time.perf_counter() - started)
                _fill(g, args.episodes, f"s{i}")
                rss.append(_rss_mb() - before)
            rows.append(("open a new scope (first call naming it)",
                         f"{statistics.median(opens) * 1000:.0f} ms (p50 of {args.scopes})"))
            rows.append(("RSS added per open scope, filled",
                         f"{statistics.median(rss):.0f} MB (p50; {args.episodes:,} episodes)"))
            rows.append(("health, no scope (p50)", f"{_p50_us(g.health, 2000):.1f} µs"))
            rows.append(("health, scope='s0' (p50)",
                         f"{_p50_us(lambda: g.health(scope='s0'), 2000):.1f} µs"))
            # interleaved, so both see the same machine: default, s0, default, s0, ...
            spent: dict[str, list[float]] = {"default": [], "s0": []}
            for q in range(args.calls):
                query = " ".join(WORDS[(q * k) % len(WORDS)] for k in (1, 2))
                for scope in ("default", "s0"):
                    started = time.perf_counter()
                    g.retrieve(query=query, k=10, scope=scope)
                    spent[scope].append(time.perf_counter() - started)
            for scope, times in spent.items():
                rows.append((f"retrieve p50, scope {scope}",
                             f"{statistics.median(times) * 1000:.1f} ms"))
        started = time.perf_counter()
        with Grimoire.open(root, clock=clock, embedder=emb) as g:
            g.health(scope="s0")
            reopen = time.perf_counter() - started
        rows.append(("reopen: default + one existing scope", f"{reopen * 1000:.0f} ms"))
    width = max(len(r[0]) for r in rows)
    print(f"scopes: {args.scopes} besides the default, {args.episodes:,} episodes each "
          "(hash embedder)")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
