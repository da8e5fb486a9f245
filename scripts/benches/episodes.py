"""Benchmark of the episodic store (grimoire.stores.episodes.store); prints one table.

For each size N it builds a fresh store with batched appends, then measures:
single appends (one episode per call, durable), batched append throughput,
flush (+ fsync) cost, compaction, open (index rebuild from LanceDB), vector
search via the in-memory index against LanceDB's own flat search and a plain
numpy floor, filtered search, BM25 text search (FTS5 in the journal file
against LanceDB's FTS index), get by id, and disk/memory size.

    .venv/bin/python scripts/bench_stores.py --part episodes --sizes 10000 100000

Vectors are random unit vectors (``--hash`` uses HashEmbedder on the texts);
texts are synthetic episode sentences from a small vocabulary. The machine is
shared and noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from benches import apply_quick
from grimoire.clock import SystemClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Outcome, Regime
from grimoire.stores.episodes.store import EpisodeFilter, EpisodeStore

ACTIONS = ["swap", "rebalance", "bridge", "stake", "unstake", "claim", "hedge", "observe"]
TOKENS = ["eth", "usdc", "wbtc", "dai", "arb", "op", "link", "uni", "aave", "steth"]
VENUES = ["uniswap", "curve", "balancer", "aave", "compound", "gmx", "lido", "pendle"]
WORDS = ["price", "spiked", "dropped", "liquidity", "thin", "deep", "oracle", "lagged",
         "funding", "negative", "positive", "volume", "surged", "whale", "moved", "pool",
         "imbalance", "arbitrage", "opportunity", "missed", "filled", "reverted", "mempool",
         "congested", "quiet", "spread", "widened", "narrowed", "liquidation", "cascade"]


def make_data(n: int, dim: int, seed: int, use_hash: bool
              ) -> tuple[list[Episode], np.ndarray]:
    rng = np.random.default_rng(seed)
    types = [EpisodeType.OBSERVATION, EpisodeType.ACTION]
    regimes = list(Regime)
    start = 1_767_225_600_000
    episodes = []
    for i in range(n):
        act, tok, venue = (ACTIONS[i % 8], TOKENS[rng.integers(10)], VENUES[rng.integers(8)])
        extra = " ".join(WORDS[j] for j in rng.integers(len(WORDS), size=6))
        text = (f"{act} {rng.integers(1, 50)} {tok} on {venue}: {extra}; gas "
                f"{rng.integers(5, 200)} gwei slippage {rng.integers(0, 80)} bps")
        episodes.append(Episode(
            id=f"bench-{i:07d}", text=text, type=types[i % 2], timestamp=start + i * 40_000,
            outcome=Outcome.POSITIVE if i % 3 else Outcome.NEGATIVE, tool=venue,
            regime=regimes[i % 6], strategy=f"strategy-{i % 4}", ref=f"tx-{i}",
            metrics={"gas_gwei": float(rng.integers(5, 200)), "pnl": float(rng.normal())},
        ))
    if use_hash:
        vectors = HashEmbedder(dim=dim).embed([e.text for e in episodes])
    else:
        vectors = rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return episodes, vectors


def timings(fn: Callable[[int], Any], n: int) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out[i] = time.perf_counter() - t
    return out * 1000.0  # ms


def ms(values: np.ndarray, q: float = 50) -> str:
    return f"{np.percentile(values, q):.3f}"


def fts5_reference(path: Path, texts: list[str]) -> Any:
    """A contentless FTS5 table over ``texts`` (what the journal file would have held)."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text, content='', "
                 "tokenize='porter unicode61 remove_diacritics 2')")
    with conn:
        conn.executemany("INSERT INTO f(rowid, text) VALUES(?, ?)", list(enumerate(texts)))
    return conn


def open_store(path: Path, dim: int, **cfg: Any) -> EpisodeStore:
    return EpisodeStore.open(path, model_id=f"bench-{dim}", dim=dim,
                             config=EpisodesConfig(**cfg), clock=SystemClock())


def bench_size(n: int, args: argparse.Namespace, root: Path) -> dict[str, str]:
    r: dict[str, str] = {}
    episodes, vectors = make_data(n + args.single + 256 * 5, args.dim, 7, args.hash)
    base, extra = episodes[:n], episodes[n:]
    path = root / f"store-{n}"
    queries = vectors[np.random.default_rng(1).integers(n, size=args.queries)]
    queries = queries + np.random.default_rng(2).normal(0, 0.02, queries.shape).astype(
        np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    # --- batched append (default config: flush every 256 rows, compact every 50 flushes;
    # versions are cleaned up at once (--cleanup-s 0) so the disk figure is the steady state)
    store = open_store(path, args.dim, cleanup_older_than_s=args.cleanup_s)
    t = time.perf_counter()
    for s in range(0, n, args.batch):
        store.append(base[s:s + args.batch], vectors[s:s + args.batch])
    store.flush()
    r["append batched (rows/s)"] = f"{n / (time.perf_counter() - t):,.0f}"
    pre = store.stats()
    t = time.perf_counter()
    result = store.compact()
    r["compact (s)"] = f"{time.perf_counter() - t:.3f}"
    r["fragments before/after compact"] = f"{pre['fragments']}/{result['fragments_after']}"

    # --- single appends, one durable call each (flushes every 256 rows in here too)
    pos = n
    single_vecs = vectors[n:n + args.single]

    def one(i: int) -> None:
        store.append([extra[i]], single_vecs[i:i + 1])

    single = timings(one, args.single)
    pos += args.single
    r["append single p50/p95/max (ms)"] = f"{ms(single)}/{ms(single, 95)}/{single.max():.1f}"

    # --- flush of 256 buffered rows: LanceDB add + fsync of new files + journal cleanup
    store.flush()
    flushes = []
    for _ in range(5):
        chunk = slice(pos, pos + 255)
        store.append(episodes[chunk], vectors[chunk])  # 255 < flush_rows: stays buffered
        pos += 255
        t = time.perf_counter()
        store.flush()
        flushes.append((time.perf_counter() - t) * 1000)
    r["flush 255 rows incl. fsync p50 (ms)"] = f"{np.median(flushes):.1f}"
    walk = timings(lambda _: store._lance.sync(), 20)
    r["fsync walk, nothing new p50 (ms)"] = ms(walk)
    r["os.sync() p50 (ms)"] = ms(timings(lambda _: os.sync(), 10))
    store.compact()

    # --- vector search, k=10
    k = 10
    mem = timings(lambda i: store.search(queries[i], k), args.queries)
    snap = store._index.snap
    idx_only = timings(lambda i: store._index.search(snap, queries[i], k, None), args.queries)
    matrix = np.ascontiguousarray(vectors[:n])
    floor = timings(lambda i: np.argpartition(-(matrix @ queries[i]), k)[:k], args.queries)
    table = store.lance_table()
    lance = timings(lambda i: table.search(queries[i]).limit(k).to_arrow(),
                    min(args.queries, args.lance_queries))
    r["search p50/p95 in-memory index (ms)"] = f"{ms(mem)}/{ms(mem, 95)}"
    r["  of which top-k only p50 (ms)"] = ms(idx_only)
    r["search p50/p95 LanceDB flat (ms)"] = f"{ms(lance)}/{ms(lance, 95)}"
    r["search p50/p95 numpy floor (ms)"] = f"{ms(floor)}/{ms(floor, 95)}"

    # --- filtered search: selective (regime + strategy ~1/12) and broad (type ~1/2)
    narrow = EpisodeFilter(regime=Regime.BULL, strategy="strategy-0")
    broad = EpisodeFilter(types=[EpisodeType.ACTION])
    fn = timings(lambda i: store.search(queries[i], k, narrow), args.queries)
    fb = timings(lambda i: store.search(queries[i], k, broad), args.queries)
    lf = timings(lambda i: table.search(queries[i]).where(
        "regime = 'bull' AND strategy = 'strategy-0'", prefilter=True).limit(k).to_arrow(),
        min(args.queries, args.lance_queries))
    r["filtered narrow p50 in-memory (ms)"] = ms(fn)
    r["filtered broad p50 in-memory (ms)"] = ms(fb)
    r["filtered narrow p50 LanceDB (ms)"] = ms(lf)

    # --- text search (BM25): in-memory index vs FTS5 (the design alternative, built here
    # over the same texts) vs LanceDB's FTS index
    rng = np.random.default_rng(3)
    texts = [f"{WORDS[a]} {WORDS[b]} {VENUES[c]}" for a, b, c in
             zip(rng.integers(30, size=args.queries), rng.integers(30, size=args.queries),
                 rng.integers(8, size=args.queries), strict=True)]
    mem_t = timings(lambda i: store.text_search(texts[i], k), args.queries)
    mem_tf = timings(lambda i: store.text_search(texts[i], k, narrow), args.queries)
    r["text p50/p95 in-memory BM25 (ms)"] = f"{ms(mem_t)}/{ms(mem_t, 95)}"
    r["text filtered p50 in-memory BM25 (ms)"] = ms(mem_tf)
    fts = fts5_reference(root / f"fts5-{n}.sqlite", [e.text for e in episodes[:pos]])
    f5 = timings(lambda i: list(fts.execute(
        "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10",
        (" OR ".join(f'"{w}"' for w in texts[i].split()),))), args.queries)
    fts.close()
    r["text p50/p95 FTS5 bm25 (ms)"] = f"{ms(f5)}/{ms(f5, 95)}"
    if not args.no_lance_fts:
        t = time.perf_counter()
        table.create_fts_index("text", replace=True)
        r["LanceDB FTS index build (s)"] = f"{time.perf_counter() - t:.2f}"
        lt = timings(lambda i: table.search(texts[i], query_type="fts").limit(k).to_arrow(),
                     args.queries)
        r["text p50/p95 LanceDB FTS (ms)"] = f"{ms(lt)}/{ms(lt, 95)}"

    # --- get by id
    ids = [f"bench-{i:07d}" for i in np.random.default_rng(4).integers(n, size=args.queries)]
    g = timings(lambda i: store.get(ids[i]), args.queries)
    lg = timings(lambda i: table.search().where(f"id = '{ids[i]}'").limit(1).to_arrow(),
                 min(args.queries, args.lance_queries))
    r["get by id p50 in-memory / LanceDB (ms)"] = f"{ms(g)} / {ms(lg)}"

    stats = store.stats()
    r["disk MB (LanceDB + journal)"] = (
        f"{stats['lance_bytes'] / 1e6:.1f} + {stats['journal_bytes'] / 1e6:.1f}")
    r["in-memory index MB"] = f"{stats['index_bytes'] / 1e6:.1f}"
    rows = stats["rows"]
    store.close()

    t = time.perf_counter()
    reopened = open_store(path, args.dim, cleanup_older_than_s=args.cleanup_s)
    r["open = rebuild index (s)"] = f"{time.perf_counter() - t:.3f}"
    assert reopened.count() == rows
    reopened.close()
    return r


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=1000, help="rows per batched append")
    parser.add_argument("--single", type=int, default=1000, help="single appends timed")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--lance-queries", type=int, default=50,
                        help="cap on LanceDB direct queries (slow at 100k)")
    parser.add_argument("--hash", action="store_true", help="HashEmbedder vectors")
    parser.add_argument("--no-lance-fts", action="store_true")
    parser.add_argument("--cleanup-s", type=int, default=0,
                        help="episodes.cleanup_older_than_s for the benchmark stores")
    parser.add_argument("--keep", type=Path, default=None, help="build stores here, keep them")
    parser.add_argument("--quick", action="store_true",
                        help="2k episodes, 200 single appends, 50 queries (20 on LanceDB)")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"sizes": [2_000], "single": 200, "queries": 50,
                                   "lance_queries": 20})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    # LanceDB warns on cleanup 0 (unsafe with concurrent readers of old versions; none here)
    # and on its deprecated create_fts_index.
    warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
    warnings.filterwarnings("ignore", message=".*create_fts_index.*")
    import lancedb  # noqa: F401  # import once up front (~1.5 s) so open times exclude it

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-episodes-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        results = {n: bench_size(n, args, root) for n in args.sizes}
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    names = list(next(iter(results.values())))
    width = max(len(x) for x in names)
    cols = [f"N={n:,}" for n in results]
    colw = [max(len(c), *(len(results[n][m]) for m in names)) for c, n in zip(cols, results,
                                                                                strict=True)]
    print(f"episodic store benchmark: dim={args.dim}, queries={args.queries}, k=10, "
          f"vectors={'hash' if args.hash else 'random unit'}, cleanup={args.cleanup_s}s, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    print(f"| {'measure':<{width}} | " + " | ".join(
        f"{c:>{w}}" for c, w in zip(cols, colw, strict=True)) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (w + 2) for w in colw) + "|")
    for m in names:
        print(f"| {m:<{width}} | " + " | ".join(
            f"{results[n][m]:>{w}}" for n, w in zip(results, colw, strict=True)) + " |")

