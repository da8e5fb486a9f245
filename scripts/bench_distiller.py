"""Benchmark of the learning core: distill and discover_links on synthetic episodes.

Usage: python scripts/bench_distiller.py [--sizes 500,2000,5000] [--repeats 5] [--seed 7]

Prints one row per batch size: median wall time of ``distill`` (with a gas
window and a failing-swap warning planted, and the previous run's claims as
stored claims so matching runs too) and of ``discover_links``, the number of
hypotheses tried, the family size after Tarone, and the operations emitted.
Synthetic data only (a tiny generator below; the market simulator is not
needed). Times are noisy on a shared machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import numpy as np
import structlog

from curator.distiller.distill import distill
from curator.distiller.features import build_table
from curator.distiller.scan import scan
from curator.distiller.select import select
from curator.learn.causal_discovery import discover_links
from curator.operations import ExistingClaim
from grimoire.config import DistillerConfig
from grimoire.records import Episode, EpisodeType, Outcome, Regime

START = 1_767_225_600_000
HOUR = 3_600_000
REGIMES = ("bull", "bear", "sideways", "high_vol", "low_vol", "crisis")


def episodes(n: int, seed: int) -> list[Episode]:
    rng = np.random.default_rng(seed)
    days = max(1, n // 66)  # ~66 episodes a day, as in the tests' 2,000 over 30 days
    times = np.sort(rng.integers(START, START + days * 24 * HOUR, n))
    hours = (times // HOUR) % 24
    regimes = np.array(REGIMES)[rng.choice(6, size=days * 4 + 1,
                                           p=[0.2, 0.15, 0.25, 0.2, 0.15, 0.05])]
    regime = regimes[(times - START) // (6 * HOUR)]
    gas = np.where((hours >= 2) & (hours < 4), rng.lognormal(np.log(6), 0.2, n),
                   rng.lognormal(np.log(22), 0.35, n))
    kinds = rng.choice(["observation", "action", "regime_shift", "clade_alert"], n,
                       p=[0.58, 0.38, 0.02, 0.02])
    actions = rng.choice(["swap", "rebalance", "bridge"], n, p=[0.5, 0.3, 0.2])
    pairs = rng.choice(["WETH/USDC", "WBTC/WETH", "ARB/USDC"], n, p=[0.4, 0.3, 0.3])
    u = rng.random(n)
    out = []
    for i in range(n):
        kind = EpisodeType(str(kinds[i]))
        bad = actions[i] == "swap" and pairs[i] == "WETH/USDC" and regime[i] == "high_vol"
        p_neg = 0.85 if bad else 0.3
        outcome = (Outcome.DESCRIPTIVE if kind is not EpisodeType.ACTION
                   else Outcome.NEGATIVE if u[i] < p_neg else Outcome.POSITIVE)
        out.append(Episode(
            id=f"b{i}", text="bench", type=kind, timestamp=int(times[i]),
            regime=Regime(str(regime[i])), outcome=outcome,
            token_pair=str(pairs[i]) if kind is EpisodeType.ACTION else None,
            actions=(str(actions[i]),) if kind is EpisodeType.ACTION else (),
            metrics={"gas_gwei": float(gas[i])},
        ))
    return out


def timed(fn: object, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,5000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    cfg = DistillerConfig()
    print(f"{'episodes':>8} {'distill ms':>10} {'(table ms)':>10} {'causal ms':>9} "
          f"{'hypotheses':>10} {'family':>6} {'ops':>4}  ops kinds")
    for size in (int(s) for s in args.sizes.split(",")):
        eps = episodes(size, args.seed)
        first = distill(eps, [], cfg, strategy=None)
        stored = [ExistingClaim(f"e{i}", op.claim, 0.5) for i, op in enumerate(first)]
        ms = timed(lambda: distill(eps, stored, cfg, strategy=None), args.repeats)  # noqa: B023
        table_ms = timed(lambda: build_table(eps, 3 * cfg.min_support), args.repeats)  # noqa: B023
        causal_ms = timed(lambda: discover_links(eps, [], cfg, strategy=None),  # noqa: B023
                          args.repeats)
        table = build_table(eps, 3 * cfg.min_support)
        hyps = scan(table, cfg)
        _, family = select(hyps, table, cfg)
        ops = distill(eps, stored, cfg, strategy=None)
        kinds = ",".join(sorted(f"{op.op.value}:{op.category.value}" for op in ops))
        print(f"{size:>8} {ms:>10.1f} {table_ms:>10.1f} {causal_ms:>9.1f} {len(hyps):>10} "
              f"{family:>6} {len(ops):>4}  {kinds}")


if __name__ == "__main__":
    main()
