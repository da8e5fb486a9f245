"""Benchmark Grimoire at scale: one table row per store size (issue 29).

Two parts: ``--part sizes`` (the default, below) and ``--part fleet`` (twenty agents on one
Clade table: ``benches/fleet.py``). For each size in ``--sizes`` (default 10k and 100k
episodes; ``--sizes 10000,100000,1000000`` adds 1M), with ``--entries`` knowledge entries
and ``--triples`` KG triples beside the episodes, it reports:

- ingest rate: the fill's episodes go straight into the episode store (``append`` plus the
  entity mentions, through the writer thread, batches of 1,000) with vectors from the
  deterministic **hash embedder** (the model would take hours at 1M; the cost of storing and
  searching does not depend on what the vectors mean); beside it, the **real model**'s rate
  through ``episode_write_batch`` (the facade's write path, batches of 100) on a small store
  of its own (``--real-ingest`` episodes);
- open time: ``Grimoire.open`` on the filled store in a fresh process (the model is loaded
  before the clock starts, so this is the stores' own time);
- retrieve p50 / p95: ``g.retrieve(query=..., k=10)`` with the real model for queries;
  beside it the episode vector search alone (``episodes.search`` on an embedded query);
- recall@10 of the store's episode vector search against exact search (float32 brute
  force over the vectors as written), on ``--recall-queries`` queries: the exact int8 search
  first; then, past ``--ann-threshold`` (``episodes.ann_threshold``), LanceDB's IVF-PQ index
  is built as the daemon's background thread would (timed), with its own recall check, and
  searched; the retrieves come after, so they go through the index when it is used;
- RSS of the measuring process once opened (idle) and after ``--retrieves`` retrieves;
- disk ÷ raw: the data directory's bytes over the raw data's (UTF-8 text of episodes and
  entries, their vectors as float32, the triples' subject, predicate and object strings);
- curator cycle time: a cycle after ``--new`` new episodes, then a second one after another
  ``--new`` (the steady cycle).

Each size is filled in one child process and measured in another, so RSS and open time are
a fresh process's. Nothing is asserted; the machine is shared, so read the rows of one run.

Usage (from the worktree):
    .venv/bin/python scripts/bench_scale.py [--sizes 10000,100000] [--quick]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as benches.retrieval: one BLAS thread

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from benches import apply_quick

REPO = Path(__file__).resolve().parents[1]
DIM = 384


def quiet() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def disk_parts(root: Path) -> dict[str, int]:
    """Bytes of the store's parts: LanceDB's live data (the latest version's files) and
    the rest of the table (older versions' files kept until cleanup, indexes), the episode
    index beside it, the journal (with the redo copies it keeps until a backup), the other
    stores and the redo logs."""
    import lancedb

    episodes = root / "episodes"
    table = lancedb.connect(str(episodes)).open_table("episodes")
    live = int(table.stats()["total_bytes"])
    parts = {"lance live": live, "lance other": du(episodes / "episodes.lance") - live,
             "episode index": du(episodes / "episodes.index"),
             "journal + redo copies": sum(p.stat().st_size for p in episodes.glob("*.sqlite*")),
             "semantic": sum(p.stat().st_size for p in root.glob("semantic.sqlite*")),
             "graph": du(root / "graph.lmdb"), "redo logs": du(root / "redo")}
    return parts


def query_texts(n: int) -> list[str]:
    """The retrieval bench's questions, then episode-like sentences (another seed)."""
    from benches.retrieval import QUERIES, _text

    rng = random.Random(99)
    out = list(QUERIES)
    while len(out) < n:
        out.append(_text(rng)[0])
    return out[:n]


def real_ingest(root: Path, n: int) -> float:
    """Episodes per second through ``episode_write_batch`` with the real model."""
    from benches.retrieval import _text

    from grimoire import Grimoire
    from grimoire.models.embedders import FastEmbedEmbedder

    rng = random.Random(3)
    texts = [_text(rng)[0] for _ in range(n)]
    with Grimoire.open(root, embedder=FastEmbedEmbedder()) as g:
        g.episode_write_batch([{"text": texts[0]}])  # model warm before the clock starts
        t0 = time.perf_counter()
        for i in range(0, n, 100):
            g.episode_write_batch([{"text": t} for t in texts[i:i + 100]])
        return n / (time.perf_counter() - t0)


class ModelLike:
    """Model-like vectors at hash speed: each text's template (its numbers as ``N``) is
    embedded once by the real model, and every episode gets that vector plus Gaussian noise
    (cosine ~0.97 to it, about what the model gives two texts that differ in a number).
    Model queries then meet the neighbourhoods a model-filled store has, so recall@10
    measures the index (a hash-filled store's scores for model queries are all near-ties:
    the ANN check read 0.99 there while 0.76 of float32's top-10 came back)."""

    NOISE = 0.25 / DIM ** 0.5

    def __init__(self, model: Any) -> None:
        self.model = model
        self.base: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(7)

    def embed(self, texts: list[str]) -> np.ndarray:
        import re

        keys = [re.sub(r"\d+", "N", t) for t in texts]
        new = sorted({k for k in keys if k not in self.base})
        if new:
            self.base.update(zip(new, self.model.embed(new).astype(np.float32), strict=True))
        out = np.stack([self.base[k] for k in keys])
        out += self.rng.normal(0.0, self.NOISE, out.shape).astype(np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def fill(root: Path, episodes: int, entries: int, triples: int, recall_queries: int,
         recall_hash: bool, model_like: bool, out: Path) -> None:
    """Child: fill the store at ``root`` and write what the measuring child needs to ``out``."""
    from benches.retrieval import CHAINS, TOKENS, _text

    from grimoire import Grimoire
    from grimoire.clock import FrozenClock
    from grimoire.config import Config
    from grimoire.ids import new_id
    from grimoire.models.embedders import FastEmbedEmbedder, HashEmbedder
    from grimoire.records import (
        Category,
        DecayClass,
        EntryStatus,
        Episode,
        EpisodeType,
        GrimoireEntry,
        Outcome,
        Provenance,
        Regime,
    )
    from grimoire.records.graph import EntityKind, EntityRef, Fact, ObjectValue
    from grimoire.retrieval.stages.mentions import index_new_entries, record_episode_mentions

    quiet()
    rng = random.Random(7)
    hasher = HashEmbedder(dim=DIM)
    clock = FrozenClock()
    t0_ms = clock.now
    span = 365 * 86_400_000  # a year of episodes, in the data's own time
    raw = 0
    ids: list[str] = []
    matrices: list[np.ndarray] = []
    model = FastEmbedEmbedder()  # the store's identity is the model's; the fill's vectors hash
    filler: Any = ModelLike(model) if model_like else hasher
    g = Grimoire.open(root, config=Config(), clock=clock, embedder=model)
    ctx = g.context
    started = time.perf_counter()
    for start in range(0, episodes, 1000):
        batch = []
        for i in range(start, min(episodes, start + 1000)):
            clock.set(t0_ms + span * i // max(episodes, 1))
            text, pair, tool = _text(rng)
            raw += len(text.encode())
            batch.append(Episode(
                id=new_id(clock.now), text=text, type=EpisodeType.ACTION, timestamp=clock.now,
                outcome=rng.choice([Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL]),
                tool=tool, token_pair=pair, chain=rng.choice(CHAINS),
                regime=rng.choice(list(Regime)), gain=round(rng.gauss(0, 20), 2)))
        vectors = filler.embed([e.text for e in batch])
        matrices.append(vectors.astype(np.float16))  # for the exact search; half the memory
        ids.extend(e.id for e in batch)
        ctx.writer.call(lambda b=batch, v=vectors: (ctx.episodes.append(b, v),  # type: ignore[misc]
                                                    record_episode_mentions(ctx, b, v)))
    ctx.writer.call(ctx.episodes.flush)
    ingest_s = time.perf_counter() - started
    raw += episodes * DIM * 4
    for start in range(0, entries, 500):
        rows = []
        for _ in range(start, min(entries, start + 500)):
            text, _, tool = _text(rng)
            content = f"When {text.split(': ')[1]}, prefer to {tool} later because costs fall"
            raw += len(content.encode()) + DIM * 4
            rows.append(GrimoireEntry(
                id=new_id(clock.now), category=rng.choice(list(Category)), content=content,
                confidence=rng.uniform(0.2, 0.9), quality_score=rng.uniform(0.2, 0.9),
                decay_class=DecayClass.REGIME_CONDITIONAL, provenance=Provenance.SELF_LEARNED,
                created_at=clock.now - rng.randint(0, span), last_accessed_at=clock.now,
                status=EntryStatus.ACTIVE, updated_at=clock.now,
                market_regime=rng.choice([None, *Regime])))
        vecs = hasher.embed([r.content for r in rows])

        def insert(rows: list[GrimoireEntry] = rows, vecs: np.ndarray = vecs) -> None:
            with ctx.semantic.transaction():
                for row, vec in zip(rows, vecs, strict=True):
                    ctx.semantic.insert_entry(row, vec)

        ctx.writer.call(insert)
    ctx.writer.call(lambda: index_new_entries(ctx))
    kinds = [EntityKind.TOKEN, EntityKind.POOL, EntityKind.ORACLE, EntityKind.CONTRACT]
    facts = []
    for i in range(triples):
        kind = rng.choice(kinds)
        ident = rng.choice(TOKENS) if kind is EntityKind.TOKEN else f"{kind.value}-{i % 997}"
        other = EntityRef(EntityKind.TOKEN, rng.choice(TOKENS)) if i % 2 else EntityRef(
            rng.choice(kinds), f"x-{rng.randint(0, 996)}")
        predicate = f"custom:rel{i % 50}"
        raw += len(f"{kind.value}:{ident}{predicate}{other.kind.value}:{other.id}".encode())
        facts.append(Fact(EntityRef(kind, ident), predicate, ObjectValue.entity(other), i))
    for start in range(0, len(facts), 1000):
        ctx.writer.call(lambda f=facts[start:start + 1000]: ctx.graph.assert_many(f))
    ctx.writer.call(ctx.episodes.compact)
    fill_s = time.perf_counter() - started
    now = clock.now
    g.close()

    # Exact search: float32 brute force over the vectors as written, real-model queries.
    texts = query_texts(recall_queries)
    queries = (hasher if recall_hash else model).embed(texts).astype(np.float32)
    best = np.full((len(texts), 10), -np.inf, np.float32)
    where = np.zeros((len(texts), 10), np.int64)
    offset = 0
    for m in matrices:  # chunked: a 1M x 384 float32 product would not fit beside the rest
        scores = queries @ m.astype(np.float32).T
        both = np.concatenate([best, scores], axis=1)
        pos = np.concatenate([where, np.arange(offset, offset + m.shape[0])[None, :]
                              .repeat(len(texts), 0)], axis=1)
        top = np.argsort(-both, axis=1, kind="stable")[:, :10]
        best, where = np.take_along_axis(both, top, 1), np.take_along_axis(pos, top, 1)
        offset += m.shape[0]
    exact = [[ids[j] for j in row] for row in where]
    out.write_text(json.dumps({"ingest_s": ingest_s, "fill_s": fill_s, "raw": raw, "now": now,
                               "queries": texts, "exact": exact}))


def search_rows(store: Any, vectors: np.ndarray, exact: list[list[str]], flt: Any
                ) -> tuple[float, float, float]:
    """Episode vector search: p50, p95 (ms) and recall@10 against ``exact`` (a filter, even
    an empty one, takes the exact path)."""
    hits = 0
    took: list[float] = []
    for vec, want in zip(vectors, exact, strict=True):
        t = time.perf_counter()
        found = store.search(vec, 10, flt)
        took.append((time.perf_counter() - t) * 1000)
        hits += len({ep.id for ep, _ in found} & set(want))
    return (float(np.percentile(took, 50)), float(np.percentile(took, 95)),
            hits / (10 * len(exact)))


def measure(root: Path, facts: dict[str, Any], retrieves: int, new: int, ann_threshold: int,
            recall_hash: bool, out: Path) -> None:
    """Child: open the filled store and measure it; results as JSON into ``out``."""
    from benches.retrieval import _text

    from curator.cycle.run import run_cycle
    from grimoire import Grimoire
    from grimoire.clock import FrozenClock
    from grimoire.config import Config
    from grimoire.models.embedders import FastEmbedEmbedder

    quiet()
    embedder = FastEmbedEmbedder()
    embedder.embed(["warm the model before anything is timed"])
    clock = FrozenClock(int(facts["now"]))
    t0 = time.perf_counter()
    config = Config().replace(**{"episodes.ann_threshold": ann_threshold})
    g = Grimoire.open(root, config=config, clock=clock, embedder=embedder)
    open_s = time.perf_counter() - t0
    rss_idle = rss_mib()
    texts: list[str] = facts["queries"]
    from grimoire.models.embedders import HashEmbedder

    vectors = (HashEmbedder(dim=DIM) if recall_hash else embedder).embed(texts).astype(
        np.float32)
    store = g.context.episodes
    from grimoire.stores.episodes.index import EpisodeFilter

    search_p50, search_p95, recall = search_rows(store, vectors, facts["exact"],
                                                 EpisodeFilter())
    ann: dict[str, Any] = {}
    fts: dict[str, Any] = {}
    if store.ann_due():  # what the daemon's background thread does past the threshold
        t = time.perf_counter()
        store.refresh_ann()
        ann = {"build_s": time.perf_counter() - t}
    if store.stats()["ann"]["indexed_rows"]:  # built now, or kept from a build before
        ann = {"build_s": None, **ann, **store.stats()["ann"]}
        fts = store.stats()["fts"]
        ann["p50"], ann["p95"], ann["recall"] = search_rows(store, vectors, facts["exact"],
                                                            None)
    rss_built = rss_mib()  # after the search checks (and any index build)
    latencies: list[float] = []
    for i in range(retrieves):
        t = time.perf_counter()
        g.retrieve(query=texts[i % len(texts)], k=10)
        latencies.append((time.perf_counter() - t) * 1000)
    rss_after = rss_mib()
    rng = random.Random(11)
    cycles: list[float] = []
    for _ in range(2):
        clock.set(clock.now + 60_000)
        g.episode_write_batch([{"text": _text(rng)[0]} for _ in range(new)])
        t = time.perf_counter()
        run_cycle(g.context)
        cycles.append(time.perf_counter() - t)
    g.close()
    warm = latencies[min(20, len(latencies) // 10):]  # the first calls fill the caches
    out.write_text(json.dumps({
        "open_s": open_s, "rss_idle": rss_idle, "rss_after": rss_after, "rss_built": rss_built,
        "recall": recall,
        "search_p50": search_p50, "search_p95": search_p95, "ann": ann, "fts": fts,
        "p50": float(np.percentile(warm, 50)), "p95": float(np.percentile(warm, 95)),
        "cycle_first_s": cycles[0], "cycle_steady_s": cycles[1]}))


def child(args: list[str]) -> None:
    subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})


def main(argv: Sequence[str] | None = None) -> None:
    from grimoire.config import Config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="episode counts, comma-separated (1000000 for the 1M row)")
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--triples", type=int, default=10_000)
    parser.add_argument("--retrieves", type=int, default=1_000,
                        help="retrieves timed; RSS is read after them")
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--new", type=int, default=100, help="new episodes before each cycle")
    parser.add_argument("--real-ingest", type=int, default=1_000,
                        help="episodes written with the real model for its ingest rate")
    parser.add_argument("--ann-threshold", type=int, default=Config().episodes.ann_threshold,
                        help="episodes.ann_threshold: past it the LanceDB index is built "
                        "(timed) and retrieves go through it")
    parser.add_argument("--recall-embedder", choices=("real", "hash"), default="real",
                        help="embeds the recall queries: real (the model, as the agent's "
                        "queries; out of the hash-filled store's distribution) or hash (in it)")
    parser.add_argument("--fill-vectors", choices=("model-like", "hash"), default="model-like",
                        help="the fill's episode vectors: model-like (each text template "
                        "embedded once by the model, plus noise: ModelLike) or hash")
    parser.add_argument("--keep", metavar="DIR",
                        help="fill the stores under DIR and keep them (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: measure the stores already filled under DIR "
                        "(a size without its store and facts is filled)")
    parser.add_argument("--quick", action="store_true",
                        help="2k and 10k episodes, 500 entries, 2k triples, 200 retrieves, "
                        "50 recall queries, 200 real-model writes")
    parser.add_argument("--fill", nargs=3, metavar=("ROOT", "EPISODES", "OUT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, metavar=("ROOT", "FACTS", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"sizes": "2000,10000", "entries": 500, "triples": 2_000,
                                   "retrieves": 200, "recall_queries": 50, "real_ingest": 200})
    if args.fill:
        fill(Path(args.fill[0]), int(args.fill[1]), args.entries, args.triples,
             args.recall_queries, args.recall_embedder == "hash",
             args.fill_vectors == "model-like", Path(args.fill[2]))
        return
    if args.measure:
        measure(Path(args.measure[0]), json.loads(Path(args.measure[1]).read_text()),
                args.retrieves, args.new, args.ann_threshold, args.recall_embedder == "hash",
                Path(args.measure[2]))
        return
    quiet()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    common = ["--entries", str(args.entries), "--triples", str(args.triples),
              "--retrieves", str(args.retrieves), "--recall-queries",
              str(args.recall_queries), "--new", str(args.new), "--ann-threshold",
              str(args.ann_threshold), "--recall-embedder", args.recall_embedder,
              "--fill-vectors", args.fill_vectors]
    rows: list[tuple[int, dict[str, Any], dict[str, Any], int]] = []
    parts: dict[int, dict[str, int]] = {}
    keep = Path(args.keep) if args.keep else None
    with (contextlib.nullcontext(str(keep)) if keep else
          tempfile.TemporaryDirectory(prefix="gscale", dir="/tmp")) as tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        real_rate = real_ingest(Path(tmp) / "real", args.real_ingest)
        for n in sizes:
            root, facts, result = Path(tmp) / f"s{n}", Path(tmp) / f"f{n}.json", \
                Path(tmp) / f"r{n}.json"
            if not (args.reuse and keep and root.is_dir() and facts.is_file()):
                child([*common, "--fill", str(root), str(n), str(facts)])
            disk = du(root)
            child([*common, "--measure", str(root), str(facts), str(result)])
            rows.append((n, json.loads(facts.read_text()), json.loads(result.read_text()),
                         disk))
            parts[n] = disk_parts(root)
    print(f"\nscale: {args.entries} entries and {args.triples} triples beside the episodes; "
          f"real model (all-MiniLM-L6-v2 int8) for queries; {args.retrieves} retrieves, "
          f"{args.recall_queries} recall queries ({args.recall_embedder} embedder)\n")
    print("| row | " + " | ".join(f"{n:,} episodes" for n, *_ in rows) + " |")
    print("|---|" + "---|" * len(rows))

    def line(label: str, cells: list[str]) -> None:
        print(f"| {label} | " + " | ".join(cells) + " |")

    line(f"ingest, {args.fill_vectors} fill vectors (store append + mentions), ep/s",
         [f"{n / f['ingest_s']:,.0f}" for n, f, _, _ in rows])
    line(f"ingest, real model (episode_write_batch, {args.real_ingest} ep), ep/s",
         [f"{real_rate:,.0f}"] * len(rows))
    line("fill with entries and triples, s", [f"{f['fill_s']:.1f}" for _, f, _, _ in rows])
    line("open, s", [f"{r['open_s']:.2f}" for _, _, r, _ in rows])
    line("retrieve p50 / p95, ms", [f"{r['p50']:.1f} / {r['p95']:.1f}" for _, _, r, _ in rows])
    line("episode vector search, exact int8: p50 / p95, ms",
         [f"{r['search_p50']:.2f} / {r['search_p95']:.2f}" for _, _, r, _ in rows])
    line("recall@10 of the exact int8 search vs float32", [f"{r['recall']:.3f}"
                                                          for _, _, r, _ in rows])
    line(f"LanceDB IVF-PQ index (past {args.ann_threshold:,} episodes): build s (kept: "
         "built by an earlier run), used, refine chosen",
         [("kept" if r["ann"]["build_s"] is None else f"{r['ann']['build_s']:.1f}")
          + f", {'yes' if r['ann']['used'] else 'no'}, refine {r['ann'].get('refine')}"
          if r["ann"]
          else "- (below the threshold)" for _, _, r, _ in rows])
    line("the store's own check: recall@10 of the index vs exact int8 (min to use it)",
         [f"{r['ann']['recall_at_10']:.3f} ({r['ann']['min_recall']:.2f})" if r["ann"]
          else "-" for _, _, r, _ in rows])
    # When the check kept the index out, search stayed exact: these rows would not be its.
    line("episode vector search through the index: p50 / p95, ms",
         [f"{r['ann']['p50']:.2f} / {r['ann']['p95']:.2f}" if r["ann"].get("used")
          else "- (not used)" for _, _, r, _ in rows])
    line("recall@10 through the index vs float32",
         [f"{r['ann']['recall']:.3f}" if r["ann"].get("used") else "- (not used)"
          for _, _, r, _ in rows])
    line("LanceDB FTS index: build s, overlap@10 with our BM25 (tie-aware), used",
         [f"{r['fts']['build_seconds']:.1f}, {r['fts']['overlap_at_10']:.3f}, "
          f"{'yes' if r['fts']['used'] else 'no'}" if r.get("fts", {}).get("indexed_rows")
          else "- (below the threshold)" for _, _, r, _ in rows])
    line(f"RSS idle / after the search checks and index builds / after {args.retrieves} "
         "retrieves, MiB", [f"{r['rss_idle']:.0f} / {r.get('rss_built', float('nan')):.0f} / "
                            f"{r['rss_after']:.0f}" for _, _, r, _ in rows])
    line("disk ÷ raw", [f"{d / f['raw']:.2f} ({d / 2**20:.0f} MiB)" for _, f, _, d in rows])
    for part in next(iter(parts.values()), {}):
        line(f"disk after the measure: {part} ÷ raw (MiB)",
             [f"{parts[n][part] / f['raw']:.2f} ({parts[n][part] / 2**20:.0f})"
              for n, f, _, _ in rows])
    line(f"curator cycle after {args.new} new episodes: first / steady, s",
         [f"{r['cycle_first_s']:.2f} / {r['cycle_steady_s']:.2f}" for _, _, r, _ in rows])


PARTS = {"sizes": main, "fleet": "benches.fleet"}

if __name__ == "__main__":
    from benches import dispatch

    sys.exit(dispatch("bench_scale.py", PARTS))
