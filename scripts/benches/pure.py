"""The pure CPU parts, no stores and no model: learning, gate, curator, retrieval stages.

    python scripts/bench_curator.py --part pure                 # every part (about 1 minute)
    python scripts/bench_curator.py --part pure --parts retrieval,gate        # some parts
    python scripts/bench_curator.py --part pure --quick         # smaller sizes, fewer runs

One table, a row per operation: its part, the input size or what it produced, and the
median and p90 wall time per call over --runs calls (fewer for the heavy ones). Parts:

- learning: ``distill`` (a gas window and a failing-swap warning planted; the previous
  run's claims stored, so matching runs too), its feature table alone, and causal
  ``discover_links``, on synthetic episodes at each of --distill-sizes;
- gate: decay of one entry and a pass over --entries, the quality score, the admission
  gate's ``assess`` with 0 and 20 neighbours;
- curator: PLAYBOOK.md compile, episode clustering (planted and pure noise), the L1
  summary, the region MDP (update, assign, best action, its JSON round trip);
- retrieval: the pure stages after the backends answered (RRF + normalise, rerank,
  causal boost, MMR, budget, backward BFS) on --candidates synthetic candidates.

Two calibration rows (a numpy 2k×384 matvec, a 10k-step Python loop) tell how loaded the
machine is: it has 2 shared cores, so compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import structlog

from curator.distiller.distill import distill
from curator.distiller.features import build_table
from curator.distiller.operations import ExistingClaim
from curator.distiller.scan import scan
from curator.distiller.select import select
from curator.hierarchy.regions import RegionModel
from curator.hierarchy.summaries import cluster_episodes, l1_summary
from curator.learn.causal_discovery import discover_links
from grimoire.clock import MS_PER_DAY
from grimoire.config import (
    AdmissionConfig,
    DecayConfig,
    DistillerConfig,
    QualityConfig,
    RetrievalConfig,
)
from grimoire.gate.admission import Candidate as GateCandidate
from grimoire.gate.admission import Neighbour, assess
from grimoire.gate.decay import effective_confidence
from grimoire.gate.quality import score_quality
from grimoire.records import (
    PAD,
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
from playbook import PlaybookItem, compile_playbook

T0 = 1_767_225_600_000
HOUR = 3_600_000
REGIMES = ("bull", "bear", "sideways", "high_vol", "low_vol", "crisis")
PARTS = ("learning", "gate", "curator", "retrieval")
Row = tuple[str, str, str, float, float]  # part, operation, size/result, median ms, p90 ms


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and p90 wall time of one call, in milliseconds."""
    samples = []
    for _ in range(max(1, runs)):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


# --- learning: the ExpeL distiller and causal discovery -------------------------------------

def market_episodes(n: int, seed: int) -> list[Episode]:
    """Synthetic episodes: cheap gas at 02-04, failing WETH/USDC swaps in high_vol."""
    rng = np.random.default_rng(seed)
    days = max(1, n // 66)  # ~66 episodes a day, as in the tests' 2,000 over 30 days
    times = np.sort(rng.integers(T0, T0 + days * 24 * HOUR, n))
    hours = (times // HOUR) % 24
    regimes = np.array(REGIMES)[rng.choice(6, size=days * 4 + 1,
                                           p=[0.2, 0.15, 0.25, 0.2, 0.15, 0.05])]
    regime = regimes[(times - T0) // (6 * HOUR)]
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


def part_learning(args: argparse.Namespace) -> Iterator[Row]:
    cfg = DistillerConfig()
    runs = max(1, args.runs // 60)
    for size in (int(s) for s in args.distill_sizes.split(",")):
        eps = market_episodes(size, args.seed)
        first = distill(eps, [], cfg, strategy=None)
        stored = [ExistingClaim(f"e{i}", op.claim, 0.5) for i, op in enumerate(first)]
        table = build_table(eps, 3 * cfg.min_support)
        hyps = scan(table, cfg)
        _, family = select(hyps, table, cfg)
        ops = distill(eps, stored, cfg, strategy=None)
        kinds = ",".join(sorted({f"{op.op.value}:{op.category.value}" for op in ops}))
        yield ("learning", f"distill, {len(hyps)} hypotheses, family {family}",
               f"{size} eps → {len(ops)} ops ({kinds})",
               *timed(lambda: distill(eps, stored, cfg, strategy=None), runs))  # noqa: B023
        yield ("learning", "  of which the feature table", f"{size} eps",
               *timed(lambda: build_table(eps, 3 * cfg.min_support), runs))  # noqa: B023
        yield ("learning", "discover_links (causal)", f"{size} eps",
               *timed(lambda: discover_links(eps, [], cfg, strategy=None), runs))  # noqa: B023


# --- gate: decay, quality, admission ---------------------------------------------------------

RULE = ("Avoid swapping WETH/USDC when gas exceeds 80 gwei: 7 of 9 swaps reverted "
        "(blocks 19,000,000–19,000,500)")


def part_gate(args: argparse.Namespace) -> Iterator[Row]:
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
    candidate = GateCandidate(category="warning", content=RULE, event_time=T0, support=9)
    now = T0 + 3 * MS_PER_DAY
    short = "markets may possibly move"

    def decay_pass() -> None:
        for entry in entries:
            effective_confidence(entry, now, decay_cfg)

    yield ("gate", "effective_confidence (one entry)", "",
           *timed(lambda: effective_confidence(entries[1], now, decay_cfg), args.runs))
    yield ("gate", "decay pass", f"{args.entries} entries", *timed(decay_pass, 5))
    yield ("gate", "score_quality, 25-char hedged text", "",
           *timed(lambda: score_quality(short, novelty_similarity=0.4, cfg=quality_cfg),
                  args.runs))
    yield ("gate", "score_quality, 104-char warning", "",
           *timed(lambda: score_quality(RULE, novelty_similarity=0.4, cfg=quality_cfg),
                  args.runs))
    yield ("gate", "assess, 0 neighbours", "",
           *timed(lambda: assess(candidate, [], now=now, cfg=admission_cfg), args.runs))
    yield ("gate", "assess, 20 neighbours", "",
           *timed(lambda: assess(candidate, neighbours, now=now, cfg=admission_cfg), args.runs))


# --- curator: playbook, clusters, summaries, regions -----------------------------------------

def playbook_items(n: int, rng: np.random.Generator) -> list[PlaybookItem]:
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


def clustered_episodes(n: int, dim: int,
                       rng: np.random.Generator) -> tuple[list[Episode], np.ndarray]:
    centres = rng.normal(size=(20, dim))
    labels = rng.integers(0, 20, size=n)
    rows = centres[labels] + 0.3 * rng.normal(size=(n, dim))
    eps = [Episode(id=f"ep-{i:06d}", text=f"episode {i}", timestamp=T0 + i * 40_000,
                   type=EpisodeType.ACTION if i % 2 else EpisodeType.OBSERVATION,
                   actions=("swap",) if i % 2 else (), outcome=Outcome.POSITIVE if i % 3
                   else Outcome.NEGATIVE, gain=float(i % 7 - 3), tool="uniswap",
                   metrics={"gas_gwei": float(i % 30)}) for i in range(n)]
    return eps, rows


def part_curator(args: argparse.Namespace) -> Iterator[Row]:
    rng = np.random.default_rng(args.seed)
    heavy = max(1, args.runs // 60)
    items = playbook_items(args.entries // 5, rng)
    for cap in (400, 100_000):
        text = compile_playbook(items, tick=1, generated_at=T0, counts={}, max_lines=cap)
        yield ("curator", f"compile_playbook, max_lines={cap}",
               f"{len(items)} entries → {len(text.splitlines())} lines",
               *timed(lambda c=cap: compile_playbook(items, tick=1, generated_at=T0,  # type: ignore[misc]
                                                     counts={}, max_lines=c), heavy))
    eps, vecs = clustered_episodes(args.episodes, args.dim, rng)
    clusters = cluster_episodes(eps, vecs, min_size=3, coherence=0.7)
    yield ("curator", "cluster_episodes (20 planted)",
           f"{args.episodes}×{args.dim} → {len(clusters)} clusters",
           *timed(lambda: cluster_episodes(eps, vecs, min_size=3, coherence=0.7), heavy))
    noise = rng.normal(size=vecs.shape)
    found = len(cluster_episodes(eps, noise, min_size=3, coherence=0.7))
    yield ("curator", "cluster_episodes (pure noise, worst case)",
           f"{args.episodes}×{args.dim} → {found} clusters",
           *timed(lambda: cluster_episodes(eps, noise, min_size=3, coherence=0.7), heavy))
    largest = max(clusters, key=lambda c: c.size)
    yield ("curator", "l1_summary of the largest cluster", f"{largest.size} eps",
           *timed(lambda: l1_summary(largest, eps), heavy))

    def learn() -> RegionModel:
        model = RegionModel(16)
        model.update_from_episodes(eps, vecs)
        return model

    model = learn()
    yield ("curator", "RegionModel(16).update_from_episodes",
           f"{args.episodes}×{args.dim} → {model.n_regions} regions", *timed(learn, heavy))
    probe = vecs[7]
    yield ("curator", "RegionModel.assign (one vector)", "",
           *timed(lambda: model.assign(probe), args.runs))
    yield ("curator", "RegionModel.best_action + p_success", "",
           *timed(lambda: (model.best_action(3), model.p_success(3, "swap")), args.runs))
    blob = json.dumps(model.to_dict())
    yield ("curator", "RegionModel to_dict + json.dumps", f"{len(blob) // 1024} KiB",
           *timed(lambda: json.dumps(model.to_dict()), heavy))
    yield ("curator", "RegionModel json.loads + from_dict", "",
           *timed(lambda: RegionModel.from_dict(json.loads(blob)), heavy))


# --- retrieval: the pure stages after the backends answered ----------------------------------

def retrieval_candidates(n: int, dim: int, n_ancestors: int, seed: int) -> tuple[
        list[Candidate], list[tuple[str, int, float, np.ndarray]]]:
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
            vector=vectors[i], timestamp=T0 - int(rng.integers(0, 30 * MS_PER_DAY)),
            ranks=ranks, confidence=float(rng.random()), quality=float(rng.random()),
            half_life_ms=14 * MS_PER_DAY, regime=("bull", "bear", None)[i % 3],
            is_bloodstain=i % 17 == 0, emotion=PAD(0.1, -0.2, 0.3) if i % 4 == 0 else None,
        ))
    # Half the ancestors are candidates themselves, as in a real causal query.
    ancestors = [(candidates[i].id if i % 2 == 0 else f"a{i}", 1 + i % 4, 0.8,
                  vectors[i if i % 2 == 0 else n + i]) for i in range(n_ancestors)]
    return candidates, ancestors


def part_retrieval(args: argparse.Namespace) -> Iterator[Row]:
    cfg = RetrievalConfig()
    candidates, ancestors = retrieval_candidates(args.candidates, args.dim, 10, args.seed)
    mood = PAD(-0.3, 0.6, -0.2)
    ids = [c.id for c in candidates]
    size = f"{args.candidates} candidates"

    def fuse() -> dict[str, float]:  # what the pipeline runs (fusion.normalise_anchored)
        return normalise_anchored(rrf_from_candidates(candidates, cfg.rrf_k), ids, cfg.rrf_k,
                                  cfg.candidates)

    norm = fuse()
    scores, factors = score_all(candidates, norm, T0, "bull", cfg.weights, mood, cfg)
    boosted, _ = apply_causal_boost(scores, candidates, ancestors, cfg, factors)
    chain_edges = {f"n{i}": [(f"n{i + 1}", 0.9), (f"m{i}", 0.5)] for i in range(50)}

    def pipeline() -> list[str]:
        s, f = score_all(candidates, norm, T0, "bull", cfg.weights, mood, cfg)
        s, f = apply_causal_boost(s, candidates, ancestors, cfg, f)
        return mmr_select(candidates, s, cfg.mmr_lambda, cfg.mmr_top, cfg.mmr_duplicate)

    yield ("retrieval", "rrf + normalise", size, *timed(fuse, args.runs))
    yield ("retrieval", "rerank (score_all, mood)", size,
           *timed(lambda: score_all(candidates, norm, T0, "bull", cfg.weights, mood, cfg),
                  args.runs))
    yield ("retrieval", "causal boost (apply)", size,
           *timed(lambda: apply_causal_boost(scores, candidates, ancestors, cfg, factors),
                  args.runs))
    yield ("retrieval", "mmr select top 10", size,
           *timed(lambda: mmr_select(candidates, boosted, cfg.mmr_lambda, cfg.mmr_top),
                  args.runs))
    yield ("retrieval", "budget fit 500 tokens", "10 items",
           *timed(lambda: fit(candidates[:10], 500, lambda t: len(t.split()),
                              lambda c: c.content), args.runs))
    yield ("retrieval", "backward bfs depth 4", "50-node chain",
           *timed(lambda: backward_bfs(["n0"], lambda n: chain_edges.get(n, [])), args.runs))
    yield ("retrieval", "rerank + boost + mmr (what the agent waits for)", size,
           *timed(pipeline, args.runs))


def calibration(args: argparse.Namespace) -> Iterator[Row]:
    corpus = np.random.default_rng(1).normal(size=(2000, 384)).astype(np.float32)
    query = corpus[0].copy()
    # MEASUREMENTS.md: the 2k-row matvec ran 0.06 ms on an unloaded machine like this one.
    yield ("calibration", "numpy 2k×384 matvec", "", *timed(lambda: corpus @ query, args.runs))
    yield ("calibration", "python 10k-step loop", "",
           *timed(lambda: sum(range(10_000)), args.runs))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--runs", type=int, default=300, help="calls per light operation")
    parser.add_argument("--distill-sizes", default="500,2000,5000",
                        help="episodes per distill batch (learning)")
    parser.add_argument("--entries", type=int, default=10_000,
                        help="entries in the decay pass (gate); a fifth of it in the playbook")
    parser.add_argument("--episodes", type=int, default=2000, help="episodes (curator)")
    parser.add_argument("--candidates", type=int, default=60, help="candidates (retrieval)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if args.quick:
        args.runs, args.distill_sizes = 60, "500,2000"
        args.entries, args.episodes = 2000, 1000
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    runners = {"learning": part_learning, "gate": part_gate, "curator": part_curator,
               "retrieval": part_retrieval}
    rows = [row for part in parts for row in runners[part](args)]
    rows.extend(calibration(args))
    w_op = max(len(r[1]) for r in rows)
    w_size = max(len(r[2]) for r in rows)
    print(f"{'part':<11}  {'operation':<{w_op}}  {'size / result':<{w_size}}  "
          f"{'median ms':>10}  {'p90 ms':>10}")
    print("-" * (11 + w_op + w_size + 30))
    for part, op, size, median, p90 in rows:
        print(f"{part:<11}  {op:<{w_op}}  {size:<{w_size}}  {median:>10.3f}  {p90:>10.3f}")

