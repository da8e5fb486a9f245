"""The stores: one table for the embedder and the stores, and each store in detail (``--part``).

The default part (``overview``) is the foundation in one table: the embedder, the episode
store and the semantic store. The other parts are each store in detail, their code in
``scripts/benches/``: ``episodes`` (appends, flush, compaction, open, the in-memory index
against LanceDB and numpy, filtered and BM25 search, disk and memory), ``semantic``
(inserts under FULL and NORMAL sync, KNN, BM25, open, causal BFS, OpenBLAS threading) and
``graph`` (the LMDB knowledge graph at SPEC §10's scale). Every option but ``--part NAME``
is the part's own (``--part NAME --help``); every part takes ``--quick``.

Each measurement stands beside its floor measured in the same run: numpy
brute force over the same vectors for searches, the raw embedder for
embedding. The machine is 2 shared cores: compare the ratios in one run, not
absolute times across runs. Nothing here asserts a timing.

    python scripts/bench_stores.py                 # 10k and 100k episodes, 2k and 20k entries
    python scripts/bench_stores.py --quick         # smaller sizes, fewer queries
    python scripts/bench_stores.py --quick --compare 10000   # + Chroma / plain LanceDB
    python scripts/bench_stores.py --part episodes --quick  # the episode store in detail
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.ids import new_id
from grimoire.logs import configure_logging
from grimoire.models.embedders import FastEmbedEmbedder
from grimoire.records import (
    Category,
    DecayClass,
    Episode,
    EpisodeType,
    GrimoireEntry,
    Provenance,
)
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.semantic.store import SemanticStore

WORDS = [
    "gas", "swap", "pool", "liquidity", "slippage", "regime", "whale", "oracle", "vault",
    "bridge", "fee", "price", "volume", "weth", "usdc", "dai", "arbitrum", "base", "rebalance",
    "router", "spread", "funding",
]


def row(what: str, size: str, value: str, floor: str = "") -> None:
    print(f"  {what:<44} {size:>8} {value:>22} {floor:>22}", flush=True)


def pct(samples: list[float]) -> str:
    a = np.asarray(samples) * 1000
    return f"{np.percentile(a, 50):.2f} / {np.percentile(a, 95):.2f} ms"


def timed(fn: Callable[[int], object], n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def unit_vectors(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def text(rng: np.random.Generator, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS, n))


def bench_embedder(emb: FastEmbedEmbedder, rng: np.random.Generator, n: int) -> None:
    texts = [text(rng) for _ in range(n)]
    single = timed(lambda i: emb.embed([texts[i % len(texts)]]), min(n, 100))
    row("embed, batch 1 (p50 / p95)", "1", pct(single))
    t = time.perf_counter()
    for i in range(0, n, 64):
        emb.embed(texts[i:i + 64])
    rate = n / (time.perf_counter() - t)
    row("embed, batches of 64", str(n), f"{rate:,.0f} texts/s",
        f"single: {1 / np.median(single):,.0f} texts/s")


def episode(i: int, rng: np.random.Generator, now: int) -> Episode:
    return Episode(id=new_id(now + i), text=text(rng), type=EpisodeType.OBSERVATION,
                   timestamp=now + i, strategy=("eth-dca", "lp", None)[i % 3],
                   metrics={"gas_gwei": float(rng.uniform(2, 60))})


def bench_episode_size(path: Path, n: int, first: bool, queries: int, dim: int,
                       rng: np.random.Generator) -> None:
    clock = FrozenClock()
    store = EpisodeStore.open(path, model_id="bench", dim=dim, config=EpisodesConfig(),
                              clock=clock)
    vectors = unit_vectors(n, dim, rng)
    eps = [episode(i, rng, clock()) for i in range(n)]
    single_n = min(500, n // 10)
    single = timed(lambda i: store.append([eps[i]], vectors[i:i + 1]), single_n)
    t = time.perf_counter()
    for i in range(single_n, n, 1000):
        store.append(eps[i:i + 1000], vectors[i:i + 1000])
    store.flush()
    rate = (n - single_n) / (time.perf_counter() - t)
    store.compact()
    if first:
        row("episode append, one per call (durable)", str(single_n), pct(single),
            "fsync " + pct(fsync_floor(path.parent / "floor.jsonl", eps[:single_n])))
    row("episode append, batches of 1000", str(n), f"{rate:,.0f} rows/s")
    qs = unit_vectors(queries, dim, rng)
    search = timed(lambda i: store.search(qs[i], 10), queries)
    matrix = vectors.copy()
    floor = timed(lambda i: np.argpartition(-(matrix @ qs[i]), 10)[:10], queries)
    row("episode vector search top-10", str(n), pct(search), "numpy " + pct(floor))
    words = [text(rng, 3) for _ in range(queries)]
    row("episode text search top-10", str(n),
        pct(timed(lambda i: store.text_search(words[i], 10), queries)))
    store.close()
    t = time.perf_counter()
    EpisodeStore.open(path, model_id="bench", dim=dim, config=EpisodesConfig(),
                      clock=clock).close()
    row("episode store open (index rebuild)", str(n), f"{time.perf_counter() - t:.2f} s")


def entry(i: int, rng: np.random.Generator, now: int) -> GrimoireEntry:
    return GrimoireEntry(
        id=new_id(now + i),
        category=(Category.INSIGHT, Category.HEURISTIC, Category.WARNING)[i % 3],
        content=text(rng, 16), confidence=0.5, quality_score=0.6,
        decay_class=DecayClass.TACTICAL, provenance=Provenance.SELF_LEARNED,
        created_at=now, last_accessed_at=now)


def fsync_floor(path: Path, eps: list[Episode]) -> list[float]:
    """The least a durable single append can cost: the episode's JSON appended to a file
    and fsync'd, nothing else (no schema, no index, no embedding)."""
    lines = [(json.dumps(e.to_dict()) + "\n").encode() for e in eps]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        def write(i: int) -> None:
            os.write(fd, lines[i])
            os.fsync(fd)
        return timed(write, len(lines))
    finally:
        os.close(fd)
        path.unlink()


def bench_entry_size(path: Path, n: int, queries: int, dim: int,
                     rng: np.random.Generator) -> None:
    clock = FrozenClock()
    store = SemanticStore.open(path, model_id="bench", dim=dim, clock=clock)
    vectors = unit_vectors(n, dim, rng)
    t = time.perf_counter()
    for start in range(0, n, 500):
        with store.transaction():
            for i in range(start, min(n, start + 500)):
                store.insert_entry(entry(i, rng, clock()), vectors[i])
    row("entry insert, transactions of 500", str(n),
        f"{n / (time.perf_counter() - t):,.0f} entries/s")
    qs = unit_vectors(queries, dim, rng)
    matrix = vectors.copy()
    floor = timed(lambda i: np.argpartition(-(matrix @ qs[i]), 10)[:10], queries)
    row("entry KNN top-10 (numpy mirror)", str(n),
        pct(timed(lambda i: store.knn(qs[i], 10), queries)), "numpy " + pct(floor))
    row("entry KNN top-10 (vec0)", str(n),
        pct(timed(lambda i: store.knn(qs[i], 10, source="vec0"), min(queries, 50))),
        "numpy " + pct(floor))
    words = [text(rng, 3) for _ in range(queries)]
    row("entry BM25 top-10 (FTS5)", str(n),
        pct(timed(lambda i: store.bm25(words[i], 10), queries)))
    store.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="The foundation in one table: the embedder, the episode store and the "
        "semantic store, each beside its floor.")
    parser.add_argument("--episodes", default="10000,100000", help="episode store sizes")
    parser.add_argument("--entries", default="2000,20000", help="semantic store sizes")
    parser.add_argument("--queries", type=int, default=200, help="queries per measurement")
    parser.add_argument("--embed", type=int, default=512, help="texts for embedder throughput")
    parser.add_argument("--quick", action="store_true", help="10k episodes, 2k entries, 50 q")
    parser.add_argument("--compare", type=int, default=0, metavar="N",
                        help="also run Grimoire beside plain LanceDB and Chroma (extra [bench]) "
                        "at N memories with the same embedder (bench_speed.py --part compare)")
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.entries, args.queries, args.embed = "10000", "2000", 50, 256
    configure_logging("warning")
    rng = np.random.default_rng(7)
    print(f"grimoire store benchmark: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    print(f"  {'measure':<44} {'n':>8} {'value':>22} {'floor (same run)':>22}")
    emb = FastEmbedEmbedder()
    bench_embedder(emb, rng, args.embed)
    with tempfile.TemporaryDirectory(prefix="grimoire-bench-") as tmp:
        for i, n in enumerate(int(x) for x in args.episodes.split(",")):
            bench_episode_size(Path(tmp) / f"episodes-{n}", n, i == 0, args.queries, emb.dim,
                               rng)
        for n in (int(x) for x in args.entries.split(",")):
            bench_entry_size(Path(tmp) / f"semantic-{n}.sqlite", n, args.queries, emb.dim, rng)
    if args.compare:
        from benches.compare import print_table, run

        print()
        print_table(args.compare, run(args.compare, min(args.queries, 100), 50))


PARTS = {"overview": main, "episodes": "benches.episodes", "semantic": "benches.semantic",
         "graph": "benches.graph"}

if __name__ == "__main__":
    from benches import dispatch

    sys.exit(dispatch("bench_stores.py", PARTS))
