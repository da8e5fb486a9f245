"""Benchmark the pure curator parts: PLAYBOOK compile, episode clustering, region MDP.

Usage: python scripts/bench_curator_pure.py [--entries 2000] [--episodes 2000] [--dim 384]
Prints one table (median of --repeat runs). No stores, no network.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from curator.hierarchy.summaries import cluster_episodes, l1_summary
from curator.regions import RegionModel
from grimoire.records import (
    Category,
    Claim,
    DecayClass,
    Episode,
    EpisodeType,
    GrimoireEntry,
    Outcome,
    Provenance,
    Regime,
)
from playbook import PlaybookItem, compile_playbook

T0 = 1_767_225_600_000


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def entries(n: int, rng: np.random.Generator) -> list[PlaybookItem]:
    cats = [Category.HEURISTIC, Category.WARNING, Category.INSIGHT, Category.CAUSAL_LINK]
    out = []
    for i in range(n):
        claim = Claim({"hour_window": [2, 4], "regime": "high_vol", "action": "swap"},
                      "metric:gas_gwei", "lower", 6.1, 14.2, 12) if i % 3 == 0 else None
        entry = GrimoireEntry(
            id=f"{i:08x}-0000-7000-8000-{i:012x}", category=cats[i % 4],
            content=f"When gas is below {i % 40} gwei, do swap because it is cheap (#{i})",
            confidence=float(rng.uniform(0.3, 0.99)), quality_score=float(rng.uniform(0.2, 0.9)),
            decay_class=DecayClass.REGIME_CONDITIONAL, provenance=Provenance.SELF_LEARNED,
            created_at=T0, last_accessed_at=T0, strategy=None if i % 5 == 0 else f"s{i % 9}",
            market_regime=Regime.HIGH_VOL if i % 2 else None, claim=claim)
        out.append(PlaybookItem(entry, entry.confidence * 0.9))
    return out


def episodes(n: int, dim: int, rng: np.random.Generator) -> tuple[list[Episode], np.ndarray]:
    centres = rng.normal(size=(20, dim))
    labels = rng.integers(0, 20, size=n)
    rows = centres[labels] + 0.3 * rng.normal(size=(n, dim))
    eps = [Episode(id=f"ep-{i:06d}", text=f"episode {i}", timestamp=T0 + i * 40_000,
                   type=EpisodeType.ACTION if i % 2 else EpisodeType.OBSERVATION,
                   actions=("swap",) if i % 2 else (), outcome=Outcome.POSITIVE if i % 3
                   else Outcome.NEGATIVE, gain=float(i % 7 - 3), tool="uniswap",
                   metrics={"gas_gwei": float(i % 30)}) for i in range(n)]
    return eps, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows: list[tuple[str, str, float]] = []

    items = entries(args.entries, rng)
    for cap in (400, 100_000):
        text = compile_playbook(items, tick=1, generated_at=T0, counts={}, max_lines=cap)
        ms = timed(lambda c=cap: compile_playbook(items, tick=1, generated_at=T0, counts={},
                                                  max_lines=c), args.repeat)
        rows.append((f"compile_playbook {args.entries} entries, max_lines={cap}",
                     f"{len(text.splitlines())} lines", ms))

    eps, vecs = episodes(args.episodes, args.dim, rng)
    clusters = cluster_episodes(eps, vecs, min_size=3, coherence=0.7)
    rows.append((f"cluster_episodes {args.episodes}x{args.dim} (20 planted)",
                 f"{len(clusters)} clusters",
                 timed(lambda: cluster_episodes(eps, vecs, min_size=3, coherence=0.7),
                       args.repeat)))
    noise = rng.normal(size=vecs.shape)
    rows.append((f"cluster_episodes {args.episodes}x{args.dim} (pure noise, worst case)",
                 f"{len(cluster_episodes(eps, noise, min_size=3, coherence=0.7))} clusters",
                 timed(lambda: cluster_episodes(eps, noise, min_size=3, coherence=0.7),
                       max(1, args.repeat // 2))))
    rows.append(("l1_summary of the largest cluster", f"{max(c.size for c in clusters)} eps",
                 timed(lambda: l1_summary(max(clusters, key=lambda c: c.size), eps),
                       args.repeat)))

    def learn() -> RegionModel:
        model = RegionModel(16)
        model.update_from_episodes(eps, vecs)
        return model

    model = learn()
    rows.append((f"RegionModel(16).update_from_episodes {args.episodes}x{args.dim}",
                 f"{model.n_regions} regions", timed(learn, args.repeat)))
    probe = vecs[7]
    rows.append(("RegionModel.assign (one vector)", "", timed(lambda: model.assign(probe), 200)))
    rows.append(("RegionModel.best_action + p_success", "",
                 timed(lambda: (model.best_action(3), model.p_success(3, "swap")), 200)))
    blob = json.dumps(model.to_dict())
    rows.append(("RegionModel to_dict + json.dumps", f"{len(blob) // 1024} KiB",
                 timed(lambda: json.dumps(model.to_dict()), args.repeat)))
    rows.append(("RegionModel json.loads + from_dict", "",
                 timed(lambda: RegionModel.from_dict(json.loads(blob)), args.repeat)))

    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'result':>14}  {'median ms':>10}")
    for name, result, ms in rows:
        print(f"{name:<{width}}  {result:>14}  {ms:>10.3f}")


if __name__ == "__main__":
    main()
