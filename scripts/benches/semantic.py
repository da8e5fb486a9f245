"""Benchmark of the semantic store; prints one table.

    python scripts/bench_stores.py --part semantic                 # 2k and 20k entries
    python scripts/bench_stores.py --part semantic --sizes 2000 --quick

Measures: inserts (one commit each, and batched) under synchronous FULL and
NORMAL and the cost of one small commit; KNN through vec0 and through the
numpy mirror (store.knn: rows fetched and decoded, and ids only) against the
numpy floor (a bare product + argpartition, no filter, no rows); BM25; the
open time including the mirror rebuild; causal BFS on a graph of 2k nodes /
10k edges; and what multi-threaded OpenBLAS (``matrix @ q``) does to the
latency of everything else in the process.

Random normalised 384-d vectors and synthetic texts (Zipf-distributed
words), seeded. The machine is shared: competing variants are interleaved
query by query so load hits them alike, and reads report the calling
thread's CPU time beside wall time (CPU time does not count waiting for a
core, so it is the stable figure for comparisons; wall time is what a
caller waits).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from grimoire.clock import FrozenClock
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.semantic.types import CausalEdge, EntryFilter
from grimoire.stores.sqlite import Synchronous

DIM = 384
K = 10
WORDS = [
    "gas", "fee", "swap", "bridge", "slippage", "pool", "oracle", "vault", "whale", "weth",
    "usdc", "dai", "arbitrum", "base", "mainnet", "night", "morning", "spike", "drop", "hedge",
    "rebalance", "position", "volatility", "regime", "bull", "bear", "crisis", "router", "vote",
    "governance", "yield", "apr", "tvl", "deposit", "withdraw", "sandwich", "mev", "frontrun",
    "revert", "timeout", "congestion", "cheap", "expensive", "high", "low", "liquidation",
]
# Texts draw words Zipf-style (rank r has weight 1/r) from the domain words followed by
# 3,000 filler tokens, so a query term matches a realistic share of entries.
VOCAB = np.array(WORDS + [f"tok{i}" for i in range(3000)])
ZIPF = 1.0 / np.arange(1, len(VOCAB) + 1)
ZIPF /= ZIPF.sum()
Row = tuple[str, str, str, str]


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(VOCAB, size=n, p=ZIPF))


@dataclass
class Timing:
    wall: list[float] = field(default_factory=list)  # ms
    cpu: list[float] = field(default_factory=list)  # ms of this thread's CPU

    def cell(self) -> str:
        return (f"{np.percentile(self.wall, 50):.3f} / {np.percentile(self.wall, 95):.3f}"
                f" | {np.percentile(self.cpu, 50):.3f}")

    @property
    def p50(self) -> float:
        return float(np.percentile(self.wall, 50))

    @property
    def cpu50(self) -> float:
        return float(np.percentile(self.cpu, 50))


def _run(fns: dict[str, Callable[[int], object]], n: int) -> dict[str, Timing]:
    """Time each function on inputs 0..n-1, rotating their order every round."""
    out = {name: Timing() for name in fns}
    names = list(fns)
    for i in range(n):
        for name in names[i % len(names):] + names[: i % len(names)]:
            c0, t0 = time.thread_time(), time.perf_counter()
            fns[name](i)
            out[name].wall.append((time.perf_counter() - t0) * 1000)
            out[name].cpu.append((time.thread_time() - c0) * 1000)
    return out


def _entry(i: int, rng: np.random.Generator) -> GrimoireEntry:
    text = _words(rng, int(rng.integers(8, 20)))
    return GrimoireEntry(
        id=f"bench-{i:07d}", category=list(Category)[i % 6], content=f"{text} ({i})",
        confidence=float(rng.random()), quality_score=float(rng.random()),
        decay_class=DecayClass.TACTICAL, provenance=Provenance.SELF_LEARNED,
        created_at=1_767_225_600_000 + i, last_accessed_at=1_767_225_600_000 + i,
        status=EntryStatus.ARCHIVED if i % 20 == 0 else EntryStatus.ACTIVE,
        strategy=None if i % 3 else "eth-dca",
    )


def _vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    m = rng.normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _open(path: Path, synchronous: Synchronous = "FULL") -> SemanticStore:
    return SemanticStore.open(path, model_id="bench", dim=DIM, clock=FrozenClock(),
                              synchronous=synchronous)


def bench_writes(tmp: Path, n_single: int, n_batch: int, rows: list[Row]) -> None:
    rng = np.random.default_rng(1)
    syncs: tuple[Synchronous, ...] = ("FULL", "NORMAL")
    stores = {s: _open(tmp / f"ins-{s}.sqlite", s) for s in syncs}
    total = n_single + n_batch
    vecs = _vectors(total, rng)
    made = {s: [_entry(i + j * total, rng) for i in range(total)] for j, s in enumerate(syncs)}
    single = _run({s: (lambda i, s=s: stores[s].insert_entry(made[s][i], vecs[i]))
                   for s in syncs}, n_single)
    commit = _run({s: (lambda i, s=s: stores[s].set_meta("tick", i)) for s in syncs}, 100)

    def batch(s: Synchronous, b: int) -> None:
        with stores[s].transaction():
            for i in range(n_single + b * 100, min(n_single + (b + 1) * 100, total)):
                stores[s].insert_entry(made[s][i], vecs[i])

    batched = _run({s: (lambda b, s=s: batch(s, b)) for s in syncs}, (n_batch + 99) // 100)
    for s in syncs:
        stores[s].close()
        rows.append((f"insert, one commit each ({s}): wall p50/p95 | cpu p50", f"{n_single}",
                     single[s].cell(), "ms"))
        rows.append((f"insert, one commit each ({s})", f"{n_single}",
                     f"{1000 / single[s].p50:,.0f}", "entries/s"))
        rows.append((f"insert, batches of 100 ({s})", f"{n_batch}",
                     f"{n_batch * 1000 / sum(batched[s].wall):,.0f}", "entries/s"))
        rows.append((f"one small commit, set_meta ({s})", "100", commit[s].cell(), "ms"))


def bench_reads(tmp: Path, size: int, queries: int, rows: list[Row]) -> None:
    rng = np.random.default_rng(size)
    path = tmp / f"read-{size}.sqlite"
    store = _open(path, "NORMAL")  # build fast; reads do not depend on it
    vecs = _vectors(size, rng)
    for start in range(0, size, 1000):
        with store.transaction():
            for i in range(start, min(start + 1000, size)):
                store.insert_entry(_entry(i, rng), vecs[i])
    store.close()
    t0 = time.perf_counter()
    store = _open(path)
    opened = (time.perf_counter() - t0) * 1000
    qs = _vectors(queries, rng)
    for _ in range(5):  # warm the page cache and the reader connection
        store.knn(qs[0], K, source="vec0")
        store.knn(qs[0], K, source="cache")
    conn = store._db.read()
    blob = [q.astype("<f4").tobytes() for q in qs]
    cache = store._cache
    assert cache is not None
    default = EntryFilter()
    t = _run({
        "floor": lambda i: np.argpartition(-np.einsum("ij,j->i", vecs, qs[i]), K)[:K],
        "mirror ids": lambda i: cache.knn(qs[i], K, default),
        "mirror": lambda i: store.knn(qs[i], K, source="cache"),
        "vec0 ids": lambda i: conn.execute(
            "SELECT rid, distance FROM entry_vectors WHERE embedding MATCH ? AND k = ? "
            "AND status IN ('candidate','active','demoted')", (blob[i], K)).fetchall(),
        "vec0": lambda i: store.knn(qs[i], K, source="vec0"),
    }, queries)
    texts = [_words(rng, 3) for _ in range(queries)]
    bm = _run({"bm25": lambda i: store.bm25(texts[i], K)}, queries)["bm25"]
    store.close()
    n = f"{size}"
    rows += [
        ("KNN numpy floor (einsum, no filter)", n, t["floor"].cell(), "ms"),
        ("KNN numpy mirror, ids only", n, t["mirror ids"].cell(), "ms"),
        ("KNN numpy mirror, store.knn", n, t["mirror"].cell(), "ms"),
        ("KNN vec0, bare SQL, ids only", n, t["vec0 ids"].cell(), "ms"),
        ("KNN vec0, store.knn", n, t["vec0"].cell(), "ms"),
        ("KNN store.knn vec0 / mirror (wall p50 | cpu p50)", n,
         f"{t['vec0'].p50 / t['mirror'].p50:.1f}x | {t['vec0'].cpu50 / t['mirror'].cpu50:.1f}x",
         ""),
        ("BM25 top-10, store.bm25", n, bm.cell(), "ms"),
        ("open incl. mirror rebuild", n, f"{opened:.1f}", "ms"),
    ]


def bench_bfs(tmp: Path, nodes: int, edges: int, queries: int, rows: list[Row]) -> None:
    rng = np.random.default_rng(3)
    store = _open(tmp / "graph.sqlite", "NORMAL")
    seen: set[tuple[int, int]] = set()
    with store.transaction():
        while len(seen) < edges:
            a, b = (int(x) for x in rng.integers(0, nodes, size=2))
            if a != b and (a, b) not in seen:
                seen.add((a, b))
                store.upsert_edge(CausalEdge(f"n{a}", f"n{b}", weight=float(rng.random())))
    starts = [f"n{int(x)}" for x in rng.integers(0, nodes, size=queries)]
    reached: dict[int, list[int]] = {2: [], 3: [], 4: []}
    t = _run({f"d{d}": (lambda i, d=d: reached[d].append(
        len(store.causal_bfs(starts[i], max_depth=d)))) for d in reached}, queries)
    store.close()
    label = f"{nodes}n/{edges}e"
    for d in reached:
        rows.append((f"causal BFS backward depth {d} ({statistics.median(reached[d]):.0f} "
                     "nodes reached, median)", label, t[f"d{d}"].cell(), "ms"))


def bench_blas(tmp: Path, size: int, queries: int, rows: list[Row]) -> None:
    """``matrix @ q`` uses OpenBLAS, multi-threaded by default: its workers spin after
    each call and compete with every other thread of the process."""
    rng = np.random.default_rng(size)
    vecs = _vectors(size, rng)
    qs = _vectors(queries, rng)
    store = _open(tmp / f"read-{size}.sqlite")
    conn = store._db.read()
    blob = [q.astype("<f4").tobytes() for q in qs]

    def sql(i: int) -> object:
        return conn.execute("SELECT rid, distance FROM entry_vectors WHERE embedding MATCH ? "
                            "AND k = 10", (blob[i],)).fetchall()

    alone = _run({"sql": sql, "einsum": lambda i: np.einsum("ij,j->i", vecs, qs[i])}, queries)
    mixed = _run({"sql": sql, "blas": lambda i: np.argpartition(-(vecs @ qs[i]), K)[:K]},
                 queries)
    store.close()
    rows.append(("KNN numpy via BLAS (matrix @ q)", f"{size}", mixed["blas"].cell(), "ms"))
    rows.append(("vec0 bare SQL next to einsum calls", f"{size}", alone["sql"].cell(), "ms"))
    rows.append(("vec0 bare SQL next to BLAS calls", f"{size}", mixed["sql"].cell(), "ms"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark the semantic store.")
    parser.add_argument("--sizes", default="2000,20000", help="entry counts for read benchmarks")
    parser.add_argument("--queries", type=int, default=200, help="queries per measurement")
    parser.add_argument("--single", type=int, default=200, help="inserts, one commit each")
    parser.add_argument("--batch", type=int, default=2000, help="inserts in batches of 100")
    parser.add_argument("--quick", action="store_true", help="fewer inserts and queries")
    parser.add_argument("--dir", default=None, help="where to put the databases (a real disk: "
                        "fsync cost depends on it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.single, args.batch, args.queries = 50, 500, min(args.queries, 60)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bench_writes(Path(tmp), args.single, args.batch, rows)
        for size in sizes:
            bench_reads(Path(tmp), size, args.queries, rows)
        bench_bfs(Path(tmp), 2000, 10_000, args.queries, rows)
        bench_blas(Path(tmp), sizes[0], args.queries, rows)  # last: it disturbs what follows
    header = ("measure (times: wall p50 / p95 | cpu p50)", "n", "value", "unit")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*row))

