"""Benchmark the graph store (SPEC §10 scale targets) and print a table.

Measures, on real LMDB in a temporary directory: assert throughput (batched
and single durable commits), query_at and query_as_known_at latency,
depth-3 k_hop_neighbors latency over 1,000 entities and 10,000 edges (from
the in-memory adjacency, then from LMDB alone after reopening with
``adjacency_max_edges=0``), the adjacency's build time at open and its
memory per edge (``--memory-edges``: synthetic edges applied to an
``Adjacency``, measured with tracemalloc), and time-bucket range scans over
a store of 1,000,000 triples (build time printed too). It reports numbers
and never asserts on them: the machine, its load and its disk decide them,
so the header prints the load average.

    python scripts/bench_stores.py --part graph        # the full run (package installed)
    python scripts/bench_stores.py --part graph --scan-triples 100000 --queries 500
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import lmdb
import structlog

from benches import apply_quick
from grimoire.clock import SystemClock
from grimoire.records.graph import (
    EntityKind,
    EntityRef,
    Fact,
    ObjectValue,
    Predicate,
    TemporalTriple,
)
from grimoire.stores.graph import codec
from grimoire.stores.graph.adjacency import Adjacency
from grimoire.stores.graph.store import GraphStore
from grimoire.stores.graph.versions import EdgeChange

START_BLOCK = 18_000_000


@dataclass(frozen=True, slots=True)
class Row:
    operation: str
    n: int
    p50_ms: float | None = None
    p95_ms: float | None = None
    note: str = ""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=1_000, help="entities in the graph")
    parser.add_argument("--triples", type=int, default=10_000, help="entity edges in the graph")
    parser.add_argument("--batch", type=int, default=1_000, help="assert_many batch size")
    parser.add_argument("--single", type=int, default=1_000, help="single durable asserts")
    parser.add_argument("--queries", type=int, default=2_000, help="query_at / known_at calls")
    parser.add_argument("--hop-queries", type=int, default=300, help="k_hop_neighbors calls")
    parser.add_argument("--scan-triples", type=int, default=1_000_000,
                        help="triples in the range-scan store (0 skips it)")
    parser.add_argument("--scan-heads", type=int, default=1_000,
                        help="subject-predicate pairs the scan store's history is spread over")
    parser.add_argument("--scan-batch", type=int, default=50_000, help="batch size for its build")
    parser.add_argument("--scan-queries", type=int, default=200, help="range scans per width")
    parser.add_argument("--memory-edges", default="10000,1000000",
                        help="edge counts (comma-separated) for adjacency memory; '' skips")
    parser.add_argument("--dir", type=Path, default=None, help="work here instead of a temp dir")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a 100k-triple scan store, 500 "
                        "queries, 100 hop queries, adjacency memory at 10k and 100k edges")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"scan_triples": 100_000, "scan_queries": 50, "queries": 500,
                                   "hop_queries": 100, "single": 200,
                                   "memory_edges": "10000,100000"})
    return args


def timed(calls: int, call: Callable[[int], object]) -> list[float]:
    """Milliseconds for each of ``calls`` calls of ``call(i)``."""
    out = []
    for i in range(calls):
        start = time.perf_counter_ns()
        call(i)
        out.append((time.perf_counter_ns() - start) / 1e6)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_row(operation: str, millis: list[float], note: str = "") -> Row:
    return Row(operation, len(millis), pct(millis, 0.50), pct(millis, 0.95), note)


def make_entities(count: int) -> list[EntityRef]:
    kinds = list(EntityKind)
    return [EntityRef(kinds[i % len(kinds)], f"0x{i:040x}") for i in range(count)]


def graph_facts(entities: list[EntityRef], count: int, rng: random.Random) -> list[Fact]:
    """``count`` open entity edges, about count/len(entities) per subject.

    One subject and predicate hold one open object, so each edge of a subject
    gets its own predicate: the built-ins first, then custom ones.
    """
    names = [p.value for p in Predicate] + [f"custom:rel_{k}" for k in range(count)]
    per_subject = [0] * len(entities)
    facts = []
    for i in range(count):
        s = i % len(entities)
        target = rng.choice([e for e in rng.sample(entities, 2) if e != entities[s]])
        facts.append(Fact(entities[s], names[per_subject[s]], ObjectValue.entity(target),
                          START_BLOCK + i, confidence=0.8))
        per_subject[s] += 1
    return facts


def bench_graph(root: Path, args: argparse.Namespace, rng: random.Random) -> list[Row]:
    """The SPEC graph twice, with the in-memory adjacency and without (LMDB walks only).

    Both stores get the same facts and the same query draws, so the ratios
    between their rows hold even when the machine's load moves the numbers.
    """
    entities = make_entities(args.entities)
    facts = graph_facts(entities, args.triples, rng)
    last_block = START_BLOCK + args.triples
    replay = random.Random()
    replay.setstate(rng.getstate())
    rows = []
    for name, cap, draws, label in (("graph", None, rng, ""),
                                    ("graph-lmdb", 0, replay, " (no adjacency)")):
        options = {} if cap is None else {"adjacency_max_edges": cap}
        with GraphStore.open(root / name, clock=SystemClock(), **options) as graph:
            start = time.perf_counter()
            for i in range(0, len(facts), args.batch):
                graph.assert_many(facts[i:i + args.batch])
            took = time.perf_counter() - start
            found = [Row(f"assert_many (batches of {args.batch:,})", len(facts),
                         note=f"{len(facts) / took:,.0f} triples/s, {took:.2f} s total")]
            found += bench_queries(graph, entities, last_block, args, draws)
            found.append(bench_single(graph, entities, last_block, args.single))
        rows += [Row(row.operation + label, row.n, row.p50_ms, row.p95_ms, row.note)
                 for row in found]
    rows.append(bench_open(root / "graph", "open (adjacency build)"))
    return rows


def bench_open(path: Path, label: str) -> Row:
    start = time.perf_counter()
    with GraphStore.open(path, clock=SystemClock()) as graph:
        took = time.perf_counter() - start
        index = graph._index  # the benchmark reads the store's internals to report them
        held = "off" if index is None or index.disabled else (
            f"{len(index):,} edges held, floor {index.floor:,}")
    return Row(label, 1, took * 1e3, None, held)


def bench_memory(counts: list[int]) -> list[Row]:
    """Bytes per edge of the adjacency: ``count`` open edges among count/10 entities."""
    rows = []
    for count in counts:
        entities = make_entities(max(2, count // 10))
        rng = random.Random(count)
        changes = []
        for i in range(count):
            subject, target = rng.sample(entities, 2)
            triple = TemporalTriple(
                id=f"{i:032x}"[:8] + "-0000-7000-8000-" + f"{i:012x}", subject=subject,
                predicate=list(Predicate)[i % 8].value, object=ObjectValue.entity(target),
                valid_from=START_BLOCK + i, valid_to=None, recorded_at=1, superseded_at=None,
                source_episode=None, confidence=1.0, evidence_count=1)
            changes += [EdgeChange(True, e.key, e.value) for e in codec.index_entries(triple)
                        if e.db == "by_object"]
        index = Adjacency(max_edges=count)
        tracemalloc.start()
        try:
            start = time.perf_counter()
            index.apply(changes)
            took = time.perf_counter() - start
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        rows.append(Row(f"adjacency memory, {count:,} edges", count,
                        note=f"{held / count:,.0f} B/edge, {held / 2**20:,.1f} MiB "
                             f"({len(entities):,} entities; apply {took:.1f} s under tracemalloc)"))
        del index, changes
    return rows


def bench_queries(graph: GraphStore, entities: list[EntityRef], last_block: int,
                  args: argparse.Namespace, rng: random.Random) -> list[Row]:
    subjects = [rng.choice(entities) for _ in range(args.queries)]
    blocks = [rng.randrange(START_BLOCK, last_block + 1) for _ in range(args.queries)]
    now = SystemClock()()
    at = timed(args.queries, lambda i: graph.query_at(subjects[i], blocks[i]))
    known = timed(args.queries, lambda i: graph.query_as_known_at(subjects[i], now))
    reached: list[int] = []
    hops = timed(args.hop_queries, lambda i: reached.append(
        len(graph.k_hop_neighbors(subjects[i], 3, last_block))))
    both = timed(args.hop_queries, lambda i: graph.k_hop_neighbors(subjects[i], 2, last_block,
                                                                    direction="both"))
    return [
        latency_row("query_at", at),
        latency_row("query_as_known_at", known),
        latency_row("k_hop_neighbors depth 3, out", hops,
                    f"reaches {pct([float(r) for r in reached], 0.5):,.0f} entities (p50)"),
        latency_row("k_hop_neighbors depth 2, both", both),
    ]


def bench_single(graph: GraphStore, entities: list[EntityRef], block: int, count: int) -> Row:
    """Each call is its own durable (fsync'd) commit, as a lone socket write would be."""
    millis = timed(count, lambda i: graph.assert_fact(
        entities[i % len(entities)], "custom:single", ObjectValue.number(float(i)), block + i))
    total = sum(millis) / 1e3
    return latency_row("assert_fact (single, durable)", millis,
                       f"{count / total:,.0f} triples/s")


def scan_batches(args: argparse.Namespace, rng: random.Random) -> list[list[Fact]]:
    """A long history: ``scan_heads`` subject-predicate pairs, each re-asserted many times."""
    entities = make_entities(max(1, args.scan_heads // 4))
    heads = [(entities[i // 4], list(Predicate)[i % 4]) for i in range(args.scan_heads)]
    batches: list[list[Fact]] = []
    for start in range(0, args.scan_triples, args.scan_batch):
        batch = []
        for i in range(start, min(start + args.scan_batch, args.scan_triples)):
            subject, predicate = heads[rng.randrange(len(heads))]
            value = (ObjectValue.entity(rng.choice(entities)) if i % 2
                     else ObjectValue.number(rng.random()))
            batch.append(Fact(subject, predicate, value, START_BLOCK + i * 10))
        batches.append(batch)
    return batches


def bench_scan(root: Path, args: argparse.Namespace, rng: random.Random) -> list[Row]:
    batches = scan_batches(args, rng)
    last_block = START_BLOCK + args.scan_triples * 10
    with GraphStore.open(root / "scan", clock=SystemClock()) as graph:
        start = time.perf_counter()
        for batch in batches:
            graph.assert_many(batch)
        took = time.perf_counter() - start
        stats = graph.stats()
        rows = [Row(f"build: assert_many (batches of {args.scan_batch:,})", stats["triples"],
                    note=f"{stats['triples'] / took:,.0f} triples/s, {took:.1f} s total, "
                         f"{stats['used_bytes'] / 2**20:,.0f} MiB")]
        for width in (1_000, 10_000):
            lows = [rng.randrange(START_BLOCK, last_block - width)
                    for _ in range(args.scan_queries)]
            rows.append(scan_row(graph, lows, width))
    rows.append(bench_open(root / "scan", "open scan store (adjacency build)"))
    return rows


def scan_row(graph: GraphStore, lows: list[int], width: int) -> Row:
    found: list[int] = []
    millis = timed(len(lows), lambda i: found.append(
        len(graph.range_scan(lows[i], lows[i] + width - 1))))
    return latency_row(f"range_scan {width:,} blocks", millis,
                       f"{pct([float(f) for f in found], 0.5):,.0f} triples returned (p50)")


def render(rows: list[Row], header: list[str]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} ms"

    lines = [*header, ""]
    lines.append(f"{'operation':<42} {'n':>10} {'p50':>12} {'p95':>12}  note")
    lines.append("-" * 110)
    for row in rows:
        lines.append(f"{row.operation:<42} {row.n:>10,} {ms(row.p50_ms):>12} "
                     f"{ms(row.p95_ms):>12}  {row.note}")
    return "\n".join(lines)


def header(args: argparse.Namespace) -> list[str]:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return [
        f"graph store benchmark: python {platform.python_version()}, lmdb {lmdb.__version__}, "
        f"{os.cpu_count()} cpus, load average {load} at start",
        f"graph: {args.entities:,} entities, {args.triples:,} open entity edges; "
        f"scan store: {args.scan_triples:,} triples over {args.scan_heads:,} "
        "subject-predicate pairs, 10 blocks apart",
    ]


def run(args: argparse.Namespace, root: Path) -> str:
    rng = random.Random(args.seed)
    top = header(args)
    rows = bench_graph(root, args, rng)
    if args.scan_triples:
        rows += bench_scan(root, args, rng)
    rows += bench_memory([int(n) for n in args.memory_edges.split(",") if n.strip()])
    return render(rows, top)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Store events (graph.open, graph.map.grow) go to stderr; stdout is the table.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        print(run(args, args.dir))
        return 0
    with tempfile.TemporaryDirectory(prefix="grimoire-bench-") as tmp:
        print(run(args, Path(tmp)))
    return 0

