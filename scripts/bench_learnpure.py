"""Benchmark of the pure learning modules: decay, quality score, admission gate.

Usage: python scripts/bench_learnpure.py [--entries 10000] [--repeat 2000]
Prints one table of per-call medians. No store, no model: pure CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from grimoire.clock import MS_PER_DAY
from grimoire.config import AdmissionConfig, DecayConfig, QualityConfig
from grimoire.decay import effective_confidence
from grimoire.gate.admission import Candidate, Neighbour, assess
from grimoire.gate.quality import score_quality
from grimoire.records import Category, DecayClass, GrimoireEntry, Provenance

T0 = 1_767_225_600_000
SHORT = "markets may possibly move"
RULE = ("Avoid swapping WETH/USDC when gas exceeds 80 gwei: 7 of 9 swaps reverted "
        "(blocks 19,000,000–19,000,500)")


def per_call_us(fn: Callable[[], object], repeat: int, rounds: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=10_000, help="entries in the decay pass")
    parser.add_argument("--repeat", type=int, default=500, help="calls per timing round")
    args = parser.parse_args()

    decay_cfg, quality_cfg, admission_cfg = DecayConfig(), QualityConfig(), AdmissionConfig()
    classes = list(DecayClass)
    entries = [
        GrimoireEntry(
            id=f"e{i}", category=Category.HEURISTIC, content=RULE, confidence=0.8,
            quality_score=0.6, decay_class=classes[i % len(classes)],
            provenance=Provenance.SELF_LEARNED, created_at=T0, last_accessed_at=T0,
            strength=1.0 + i % 5,
        )
        for i in range(args.entries)
    ]
    neighbours = [Neighbour(entries[i], 0.5 + i * 0.02, 0.7) for i in range(20)]
    candidate = Candidate(category="warning", content=RULE, event_time=T0, support=9)
    now = T0 + 3 * MS_PER_DAY

    start = time.perf_counter()
    for entry in entries:
        effective_confidence(entry, now, decay_cfg)
    decay_pass_ms = (time.perf_counter() - start) * 1e3

    rows = [
        ("effective_confidence (one entry)",
         per_call_us(lambda: effective_confidence(entries[1], now, decay_cfg), args.repeat)),
        ("score_quality, 25-char hedged text",
         per_call_us(lambda: score_quality(SHORT, novelty_similarity=0.4, cfg=quality_cfg),
                     args.repeat)),
        ("score_quality, 104-char warning",
         per_call_us(lambda: score_quality(RULE, novelty_similarity=0.4, cfg=quality_cfg),
                     args.repeat)),
        ("assess, 0 neighbours",
         per_call_us(lambda: assess(candidate, [], now=now, cfg=admission_cfg), args.repeat)),
        ("assess, 20 neighbours",
         per_call_us(lambda: assess(candidate, neighbours, now=now, cfg=admission_cfg),
                     args.repeat)),
    ]
    print(f"{'operation':<40} {'median per call':>16}")
    print("-" * 57)
    for name, micros in rows:
        print(f"{name:<40} {micros:>13.1f} µs")
    print(f"{f'decay pass over {args.entries} entries':<40} {decay_pass_ms:>13.1f} ms")


if __name__ == "__main__":
    main()
