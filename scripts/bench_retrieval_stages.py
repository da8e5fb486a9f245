"""Time the pure retrieval stages on synthetic candidates (no stores, no embedder).

    PYTHONPATH=. /tmp/venv/bin/python scripts/bench_retrieval_stages.py --candidates 60 --dim 384

Prints the median and p90 per stage over --runs repetitions and the
rerank + causal boost + MMR total the agent waits for after the backends
answered. Numbers on a shared 2-core machine are noisy: compare ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from grimoire.config import RetrievalConfig
from grimoire.records import PAD
from grimoire.retrieval import (
    Candidate,
    apply_causal_boost,
    backward_bfs,
    fit,
    mmr_select,
    normalise_anchored,
    rrf_from_candidates,
    score_all,
)

NOW = 1_767_225_600_000


def build(n: int, dim: int, n_ancestors: int, seed: int) -> tuple[list[Candidate], list[
        tuple[str, int, float, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n + n_ancestors, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    candidates = []
    for i in range(n):
        ranks = {b: int(r) for b, r in zip(("vector", "bm25", "graph"),
                                           rng.integers(1, 21, size=3), strict=True)
                 if rng.random() < 0.6}
        candidates.append(Candidate(
            id=f"c{i:03d}", kind="entry" if i % 2 else "episode", content="x " * 30,
            vector=vectors[i], timestamp=NOW - int(rng.integers(0, 30 * 86_400_000)),
            ranks=ranks, confidence=float(rng.random()), quality=float(rng.random()),
            half_life_ms=14 * 86_400_000.0, regime=("bull", "bear", None)[i % 3],
            is_bloodstain=i % 17 == 0, emotion=PAD(0.1, -0.2, 0.3) if i % 4 == 0 else None,
        ))
    # Half the ancestors are candidates themselves, as in a real causal query.
    ancestors = [(candidates[i].id if i % 2 == 0 else f"a{i}", 1 + i % 4, 0.8,
                  vectors[i if i % 2 == 0 else n + i]) for i in range(n_ancestors)]
    return candidates, ancestors


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=60)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--ancestors", type=int, default=10)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    cfg = RetrievalConfig()
    candidates, ancestors = build(args.candidates, args.dim, args.ancestors, args.seed)
    mood = PAD(-0.3, 0.6, -0.2)
    ids = [c.id for c in candidates]

    def fuse() -> dict[str, float]:  # what the pipeline runs (fusion.normalise_anchored)
        return normalise_anchored(rrf_from_candidates(candidates, cfg.rrf_k), ids, cfg.rrf_k,
                                  cfg.candidates)

    norm = fuse()
    scores, factors = score_all(candidates, norm, NOW, "bull", cfg.weights, mood, cfg)
    boosted, _ = apply_causal_boost(scores, candidates, ancestors, cfg, factors)
    corpus = np.random.default_rng(1).normal(size=(2000, args.dim)).astype(np.float32)
    query = corpus[0].copy()
    chain_edges = {f"n{i}": [(f"n{i + 1}", 0.9), (f"m{i}", 0.5)] for i in range(50)}

    def pipeline() -> list[str]:
        s, f = score_all(candidates, norm, NOW, "bull", cfg.weights, mood, cfg)
        s, f = apply_causal_boost(s, candidates, ancestors, cfg, f)
        return mmr_select(candidates, s, cfg.mmr_lambda, cfg.mmr_top, cfg.mmr_duplicate)

    rows = [
        ("rrf + normalise", fuse),
        ("rerank (score_all, mood)",
         lambda: score_all(candidates, norm, NOW, "bull", cfg.weights, mood, cfg)),
        ("causal boost (apply)",
         lambda: apply_causal_boost(scores, candidates, ancestors, cfg, factors)),
        ("mmr select top 10",
         lambda: mmr_select(candidates, boosted, cfg.mmr_lambda, cfg.mmr_top)),
        ("budget fit 500 tok",
         lambda: fit(candidates[:10], 500, lambda t: len(t.split()), lambda c: c.content)),
        ("backward bfs depth 4", lambda: backward_bfs(["n0"], lambda n: chain_edges.get(n, []))),
        ("rerank+boost+mmr", pipeline),
        # Calibration: how loaded is this machine right now? (MEASUREMENTS.md: the 2k-row
        # matvec ran 0.06 ms on an unloaded machine like this one.)
        ("calib: numpy 2k×384 matvec", lambda: corpus @ query),
        ("calib: python 10k-step loop", lambda: sum(range(10_000))),
    ]
    print(f"candidates={args.candidates} dim={args.dim} ancestors={args.ancestors} "
          f"runs={args.runs}")
    print(f"{'stage':<28}{'median µs':>12}{'p90 µs':>10}")
    for name, fn in rows:
        median, p90 = timed(fn, args.runs)
        print(f"{name:<28}{median:>12.1f}{p90:>10.1f}")


if __name__ == "__main__":
    main()
