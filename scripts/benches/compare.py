"""Side by side: Grimoire's episode store, plain LanceDB and Chroma, with one embedder.

Every system gets the same texts, the same int8 MiniLM vectors and the same queries,
in one process and one run, beside the numpy brute-force floor. Chroma is optional
(``pip install -e '.[bench]'``); without it its column says so. Prints one table,
asserts nothing. Run from ``scripts/bench_stores.py --compare`` or as a part of its own:

    python scripts/bench_speed.py --part compare --n 10000 --queries 100
    python scripts/bench_speed.py --part compare --all    # + every row of issue 15's table
    python scripts/bench_speed.py --part compare --text real   # issue 29: real text, the facade

``--text real``: the stored texts are LoCoMo dev's turns (every conversation, when the data
is present) and simulator episodes beyond them, the queries stored turns of 15-25 words,
and one more row, ``Grimoire retrieve``: ``Grimoire.retrieve(query, k=10)`` through the
facade (the whole pipeline, the store holding only these episodes; ``--set`` overrides its
config, e.g. ``retrieval.reranker="on"``). Each row's ``/ floor`` is its search+embed p50
over the numpy floor's (query embedding + dot), measured in the same run.

``--all`` also runs, in the same invocation: ``retrieve`` (hybrid search, rerank, MMR) at
10k episodes + 2k entries + 10k triples in process and over the socket, each beside the
floor measured call by call with it (``--part retrieval``); sustained ingest with 8 clients
against the raw embedder in alternating windows (``bench_daemon.py --ingest-only``); and the
daemon's RSS idle and at ``--mem-episodes`` (``--part memory``). It ends with one table:
each row, its floor, Grimoire, the ratio and the goal.

What each row measures:
- search p50 with the query embedding (one text embedded, then top-10), and without;
- single write p50: embed one text and store it (Grimoire: durable, fsync'd; plain
  LanceDB and Chroma never fsync, so their number is a lower bound for durability);
- batched ingest: texts per second, embedding included, in batches of 64;
- RSS (this process) after every system is loaded, for scale only: the systems share it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benches import apply_quick, json_settings
from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.logs import configure_logging
from grimoire.models.embedders import FastEmbedEmbedder
from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes.store import EpisodeStore

WORDS = ["gas", "swap", "pool", "liquidity", "slippage", "regime", "whale", "oracle", "vault",
         "bridge", "fee", "price", "volume", "weth", "usdc", "dai", "arbitrum", "base",
         "rebalance", "router", "spread", "funding"]
K = 10
SCRIPTS = Path(__file__).resolve().parents[1]


def texts_for(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"memory {i}: " + " ".join(rng.choice(WORDS, 12)) for i in range(n)]


def real_texts(n: int, queries: int, seed: int) -> tuple[list[str], list[str], str]:
    """(``n`` stored texts, ``queries`` query texts of 15-25 words, what they are): LoCoMo
    dev's turns ("<speaker>: <text>", every conversation) when the data is present, the
    rest filled with the simulator's episodes (``benches.simqa``); the queries are turns
    of 15-25 words drawn with ``seed`` (an agent asking with what it just heard)."""
    from bench_recall import DATA, FILE, load

    from benches import simqa

    turns: list[str] = []
    if (DATA / FILE).is_file():
        turns = [t["text"] for c in load(DATA / FILE) for t in c.turns][:n]
    sim = [e["text"] for e in simqa.episodes(n - len(turns), seed, 0, 10 ** 9)] if (
        len(turns) < n) else []
    rng = np.random.default_rng(seed)
    pool = [t for t in turns or sim if 15 <= len(t.split()) <= 25]
    picked = [pool[i] for i in rng.choice(len(pool), size=queries, replace=len(pool) < queries)]
    what = (f"{len(turns)} LoCoMo dev turns + {len(sim)} simulator episodes" if turns
            else f"{len(sim)} simulator episodes (LoCoMo dev absent)")
    return turns + sim, picked, what


def p50_ms(fn: Callable[[int], object], n: int) -> float:
    samples = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class NumpyFloor:
    name = "numpy floor"

    def __init__(self, root: Path) -> None:
        self.vectors = np.zeros((0, 384), dtype=np.float32)

    def add(self, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        self.vectors = np.concatenate([self.vectors, vectors])

    def search(self, vector: np.ndarray) -> object:
        scores = self.vectors @ vector
        return np.argpartition(-scores, K)[:K]


class Grimoire:
    name = "Grimoire"

    def __init__(self, root: Path) -> None:
        self.clock = FrozenClock()
        self.store = EpisodeStore.open(root, model_id="bench", dim=384, config=EpisodesConfig(),
                                       clock=self.clock)

    def add(self, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        eps = [Episode(id=i, text=t, type=EpisodeType.OBSERVATION,
                       timestamp=self.clock.advance(1)) for i, t in zip(ids, texts, strict=True)]
        self.store.append(eps, vectors)

    def search(self, vector: np.ndarray) -> object:
        return self.store.search(vector, K)

    def close(self) -> None:
        self.store.close()


class GrimoireFacade:
    """``Grimoire.retrieve`` through the facade: the whole pipeline (vector, BM25, graph,
    fusion, rerank, MMR, the retrieval log), the store embedding what it is given."""

    name = "Grimoire retrieve"
    overrides: ClassVar[dict[str, Any]] = {}

    def __init__(self, root: Path) -> None:
        from grimoire import Grimoire as Facade
        from grimoire.config import Config

        self.clock = FrozenClock()
        self.g = Facade.open(root, config=Config().replace(**self.overrides), clock=self.clock)

    def add(self, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        self.g.episode_write_batch([{"text": t, "type": "observation", "ref": i,
                                     "timestamp": self.clock.advance(1)}
                                    for i, t in zip(ids, texts, strict=True)])

    def write_text(self, text: str) -> object:
        return self.g.episode_write(text=text, timestamp=self.clock.advance(1))

    def search_text(self, text: str) -> object:
        return self.g.retrieve(query=text, k=K)

    def close(self) -> None:
        from grimoire.retrieval.stages.writes import drain

        drain(self.g.context)
        self.g.close()


class LancePlain:
    name = "LanceDB plain"

    def __init__(self, root: Path) -> None:
        import lancedb
        import pyarrow as pa

        self.pa = pa
        self.db = lancedb.connect(str(root))
        self.table: Any = None

    def add(self, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        pa = self.pa
        data = pa.table({"id": ids, "text": texts,
                         "vector": pa.FixedSizeListArray.from_arrays(
                             pa.array(vectors.reshape(-1), pa.float32()), 384)})
        if self.table is None:
            self.table = self.db.create_table("t", data=data)
        else:
            self.table.add(data)

    def search(self, vector: np.ndarray) -> object:
        return self.table.search(vector).metric("cosine").limit(K).to_arrow()


class Chroma:
    name = "Chroma"

    def __init__(self, root: Path) -> None:
        import chromadb

        self.client = chromadb.PersistentClient(path=str(root))
        self.coll = self.client.create_collection("memories", metadata={"hnsw:space": "cosine"},
                                                  embedding_function=None)

    def add(self, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        self.coll.add(ids=ids, documents=texts, embeddings=vectors)

    def search(self, vector: np.ndarray) -> object:
        return self.coll.query(query_embeddings=[vector], n_results=K)


def interleaved(systems: list[Any], emb: FastEmbedEmbedder, qtexts: list[str]
                ) -> dict[str, float]:
    """search+embed p50 per system, each query run by every system in turn."""
    samples: dict[str, list[float]] = {s.name: [] for s in systems}
    for i, text in enumerate(qtexts):
        for system in systems[i % len(systems):] + systems[:i % len(systems)]:
            t = time.perf_counter()
            if hasattr(system, "search_text"):
                system.search_text(text)
            else:
                system.search(emb.embed([text])[0])
            samples[system.name].append(time.perf_counter() - t)
    return {name: statistics.median(v) * 1e3 for name, v in samples.items()}


def measure(system: Any, emb: FastEmbedEmbedder, qtexts: list[str], qvecs: np.ndarray,
            extra: list[str], writes: int) -> dict[str, str]:
    queries = len(qtexts)
    if hasattr(system, "search_text"):  # the facade embeds the query and the text itself
        with_embed = p50_ms(lambda i: system.search_text(qtexts[i]), queries)
        write = p50_ms(lambda i: system.write_text(extra[i]), writes)
        return {"search+embed p50": f"{with_embed:.2f} ms", "single write p50": f"{write:.2f} ms"}
    with_embed = p50_ms(lambda i: system.search(emb.embed([qtexts[i]])[0]), queries)
    bare = p50_ms(lambda i: system.search(qvecs[i]), queries)
    write = p50_ms(lambda i: system.add([f"w{i}"], [extra[i]], emb.embed([extra[i]])), writes)
    t = time.perf_counter()
    for b in range(4):
        chunk = extra[writes + 64 * b: writes + 64 * (b + 1)]
        system.add([f"b{b}-{j}" for j in range(64)], chunk, emb.embed(chunk))
    rate = 256 / (time.perf_counter() - t)
    return {"search+embed p50": f"{with_embed:.2f} ms", "search p50": f"{bare:.2f} ms",
            "single write p50": f"{write:.2f} ms", "batched ingest": f"{rate:.0f}/s"}


def run(n: int, queries: int, writes: int, text: str = "words"
        ) -> list[tuple[str, dict[str, str]]]:
    """``text``: "words" (``texts_for``: 12 words from a DeFi list) or "real"
    (``real_texts``, and the facade's ``retrieve`` as a row of its own)."""
    emb = FastEmbedEmbedder()
    systems: tuple[Any, ...] = (NumpyFloor, Grimoire, LancePlain, Chroma)
    if text == "real":
        texts, qtexts, what = real_texts(n + writes + 64 * 4, queries, 3)
        texts, extra = texts[:n], texts[n:]
        systems = (NumpyFloor, Grimoire, GrimoireFacade, LancePlain, Chroma)
        print(f"text: {what}; queries: {len(qtexts)} stored turns of 15-25 words", flush=True)
    else:
        texts = texts_for(n, 1)
        extra = texts_for(writes + 64 * 4, 2)
        qtexts = texts_for(queries, 3)
    started = time.perf_counter()
    vectors = emb.embed(texts)
    embed_rate = n / (time.perf_counter() - started)
    qvecs = emb.embed(qtexts)
    results: list[tuple[str, dict[str, str]]] = []
    tmp = Path(tempfile.mkdtemp(prefix="gcmp", dir="/tmp"))
    try:
        opened: list[Any] = []
        for cls in systems:
            try:
                system: Any = cls(tmp / cls.__name__)
            except ImportError:
                results.append((cls.name, {"note": "not installed (pip install -e '.[bench]')"}))
                continue
            ids = [f"e{i}" for i in range(n)]
            for s in range(0, n, 1000):
                system.add(ids[s:s + 1000], texts[s:s + 1000], vectors[s:s + 1000])
            opened.append(system)
        # search+embed interleaved query by query across the systems (a shared machine's
        # load then weighs on every system alike), before the other rows
        searched = interleaved(opened, emb, qtexts)
        for system in opened:
            row = measure(system, emb, qtexts, qvecs, extra, writes)
            row["search+embed p50"] = f"{searched[system.name]:.2f} ms"
            results.append((system.name, row))
            if hasattr(system, "close"):
                system.close()
        results.append(("raw embedder", {"batched ingest": f"{embed_rate:.0f}/s"}))
        results.append(("process RSS", {"note": f"{rss_mib():.0f} MiB, all systems loaded"}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def print_table(n: int, results: list[tuple[str, dict[str, str]]]) -> None:
    cols = ["search+embed p50", "/ floor", "search p50", "single write p50", "batched ingest",
            "note"]
    floor = dict(results).get("numpy floor", {}).get("search+embed p50")
    for _, row in results:
        if floor and "search+embed p50" in row:
            row["/ floor"] = f"{_ms(row['search+embed p50']) / _ms(floor):.2f}x"
    print(f"side by side at {n} memories, one embedder (int8 MiniLM), one process")
    print(f"{'system':<18}" + "".join(f"{c:>18}" for c in cols[:-1]) + "  note")
    for name, row in results:
        print(f"{name:<18}" + "".join(f"{row.get(c, '-'):>18}" for c in cols[:-1])
              + f"  {row.get('note', '')}")


def _ms(text: str) -> float:
    return float(text.split()[0])


def issue_rows(args: argparse.Namespace, side: list[tuple[str, dict[str, str]]]
               ) -> list[tuple[str, str, str, str, str, str, str]]:
    """The other benchmarks' figures for the issue's table (each beside its own floor)."""
    import re
    import subprocess

    import structlog

    from benches import memory as bench_memory
    from benches import retrieval as bench_retrieval
    from grimoire.retrieval.stages.writes import drain

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    emb = FastEmbedEmbedder()
    got: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="g15", dir="/tmp") as tmp:
        g, stored, clock, _ = bench_retrieval.build(Path(tmp), emb, args.n, 2_000, 10_000,
                                                    1_000, 7)
        try:
            rows = bench_retrieval.measure("s", g, stored, emb, args.retrieves, False)
            drain(g.context)
        finally:
            g.close()
        rows += bench_retrieval.measure_socket("s", Path(tmp), clock.now, stored, emb,
                                               args.retrieves)
    for _, what, p50, _, cpu in rows:
        got[what.strip()] = p50
        got["cpu " + what.strip()] = cpu
    daemon = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_daemon.py"), "--ingest-only",
         "--rounds", str(args.rounds), "--seconds", "4"], capture_output=True, text=True,
        check=True).stdout
    found = re.search(r"ingest, 8 clients.*?([\d.]+) ep/s\s+x([\d.]+) of the raw embedder "
                      r"\(([\d.]+)/s\)", daemon)
    memory = bench_memory.run(args.mem_episodes)
    side_of = dict(side)

    def col(system: str, key: str) -> str:
        return side_of.get(system, {}).get(key, "-")

    floor_p50 = got["floor: embed + numpy dot"]
    inproc = got["retrieve in-process (deciding)"]
    sock_floor, sock = got["floor (beside the socket calls)"], got[
        "retrieve over the socket (deciding)"]
    embed_stage = got["stage: embed"]
    bare_floor = floor_p50 - got["of which query embedding"]
    write_floor = _ms(col("numpy floor", "single write p50"))
    out = [
        ("search p50 incl. embedding, in process", f"{floor_p50:.2f} ms", f"{inproc:.2f} ms",
         f"{inproc / floor_p50:.2f}x", "<= 1.5x", col("Chroma", "search+embed p50"),
         col("LanceDB plain", "search+embed p50")),
        ("  the same, CPU per call", f"{got['cpu floor: embed + numpy dot']:.2f} ms",
         f"{got['cpu retrieve in-process (deciding)']:.2f} ms",
         f"{got['cpu retrieve in-process (deciding)'] / got['cpu floor: embed + numpy dot']:.2f}x",
         "", "", ""),
        ("search p50 incl. embedding, socket", f"{sock_floor:.2f} ms", f"{sock:.2f} ms",
         f"{sock / sock_floor:.2f}x", "<= 1.5x", "", ""),
        ("search p50, embedding excluded", f"{bare_floor:.2f} ms",
         f"{inproc - embed_stage:.2f} ms", "", "", col("Chroma", "search p50"),
         col("LanceDB plain", "search p50")),
        ("single durable write p50", col("numpy floor", "single write p50"),
         col("Grimoire", "single write p50"),
         f"{_ms(col('Grimoire', 'single write p50')) / write_floor:.2f}x",
         "", col("Chroma", "single write p50"), col("LanceDB plain", "single write p50")),
        ("batched ingest", col("raw embedder", "batched ingest"),
         col("Grimoire", "batched ingest"), "", "", col("Chroma", "batched ingest"),
         col("LanceDB plain", "batched ingest")),
        ("sustained ingest, 8 clients (daemon)",
         f"{found.group(3)}/s raw" if found else "-", f"{found.group(1)}/s" if found else "-",
         f"{found.group(2)}x" if found else "-", ">= 0.9x", "", ""),
    ]
    for label, rss, _ in memory:
        goal = bench_memory.IDLE_GOAL_MIB if label.startswith("idle") else (
            bench_memory.LOADED_GOAL_MIB)
        out.append((f"daemon RSS, {label}", "", f"{rss:.0f} MiB", "", f"<= {goal} MiB", "", ""))
    return out


def print_issue_table(rows: list[tuple[str, str, str, str, str, str, str]]) -> None:
    heads = ("row", "floor", "Grimoire", "ratio", "goal", "Chroma", "LanceDB plain")
    widths = [max(len(str(r[i])) for r in [heads, *rows]) for i in range(len(heads))]
    print("\nissue 15, every row beside its floor (one run):")
    for r in [heads, *rows]:
        print("  ".join(f"{v!s:<{w}}" for v, w in zip(r, widths, strict=True)))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories per system")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--writes", type=int, default=50)
    ap.add_argument("--text", choices=("words", "real"), default="words",
                    help="stored texts: 12 words from a DeFi list, or real text (LoCoMo dev "
                         "turns, the simulator's episodes beyond them) with queries of 15-25 "
                         "words and a row for retrieve through the facade")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="a dotted config override for the facade's row")
    ap.add_argument("--all", action="store_true", help="every row of issue 15's table")
    ap.add_argument("--retrieves", type=int, default=150, help="--all: timed retrieves per row")
    ap.add_argument("--rounds", type=int, default=5, help="--all: ingest windows")
    ap.add_argument("--mem-episodes", type=int, default=100_000,
                    help="--all: episodes in the store whose daemon RSS is measured")
    ap.add_argument("--quick", action="store_true", help="2k memories, 30 queries, 20 writes; "
                    "--all: 40 retrieves per row, 2 ingest windows, RSS at 10k episodes")
    args = ap.parse_args(argv)
    if args.quick:
        apply_quick(ap, args, {"n": 2_000, "queries": 30, "writes": 20, "retrieves": 40,
                               "rounds": 2, "mem_episodes": 10_000})
    configure_logging("warning")
    GrimoireFacade.overrides = json_settings(args.set)
    side = run(args.n, args.queries, args.writes, args.text)
    print_table(args.n, side)
    if args.all:
        print_issue_table(issue_rows(args, side))

