"""Benchmark ``retrieve`` end to end against the floor, in-process and over the socket.

    .venv/bin/python scripts/bench_speed.py --part retrieval            # 10k + 100k
    .venv/bin/python scripts/bench_speed.py --part retrieval --big 0    # 10k only
    .venv/bin/python scripts/bench_speed.py --part retrieval --profile  # + cProfile

Stores are built with batched writes straight into the stores: 10k episodes,
2k entries (all active), 10k KG triples and 1k causal edges, then (with --big)
a second store of 100k episodes. Stored vectors come from the deterministic
HashEmbedder (fast; the model would take minutes per 10k texts) — the cost of a
search does not depend on what the vectors mean. The query is embedded with the
real model, as in production, which is most of the floor.

The floor, measured in the same run on the same queries: the query embedding
plus a numpy brute-force dot product over every stored vector (episodes and
entries) with a top-20 selection. Each row's ratio is against the floor
measured interleaved with it (call by call, same queries, same machine load).
The socket rows talk to a daemon subprocess (this part with --serve) that
opens the same store, as an agent would. Latencies are per call; p50/p95 over
--n calls after a warm-up; the machine is shared, so compare the ratios.
"""

from __future__ import annotations

import os

# One BLAS thread, set before numpy loads: on a shared 2-core machine OpenBLAS's default
# 2 threads made a 10k x 384 float32 mat-vec 16-18 ms instead of 2 ms (both threads spin
# waiting for each other under load). The same setting applies to the floor and to retrieve.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import cProfile
import io
import math
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

# This checkout's grimoire, not whichever one is installed (also for the daemon child).
REPO = Path(__file__).resolve().parents[2]
SPEED = REPO / "scripts" / "bench_speed.py"  # this part's script, for the daemon child
sys.path.insert(0, str(REPO))

from benches import apply_quick  # noqa: E402
from grimoire import Grimoire  # noqa: E402
from grimoire.clock import FrozenClock  # noqa: E402
from grimoire.config import Config  # noqa: E402
from grimoire.ids import new_id  # noqa: E402
from grimoire.models.embedders import FastEmbedEmbedder, HashEmbedder  # noqa: E402
from grimoire.records import (  # noqa: E402
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
from grimoire.records.graph import EntityKind, EntityRef, Fact, ObjectValue  # noqa: E402
from grimoire.retrieval.stages.mentions import index_new_entries, record_episode_mentions  # noqa: E402
from grimoire.retrieval.stages.writes import drain  # noqa: E402
from grimoire.runtime.memory import (  # noqa: E402
    limit_malloc_arenas,
    map_large_allocations,
    use_system_arrow_pool,
)
from grimoire.service.client import Client  # noqa: E402
from grimoire.service.daemon import (  # noqa: E402
    MALLOC_ARENAS,
    MMAP_THRESHOLD,
    freeze_startup_objects,
)
from grimoire.service.server import Server  # noqa: E402
from grimoire.stores.semantic.types import CausalEdge, EdgeKind  # noqa: E402

TOKENS = ["WETH", "USDC", "DAI", "WBTC", "LINK", "UNI", "AAVE", "ARB", "OP", "MKR"]
CHAINS = ["ethereum", "base", "arbitrum", "optimism"]
TOOLS = ["swap", "rebalance", "bridge", "lend", "repay", "claim"]
EVENTS = ["gas spiked to {n} gwei", "swap filled with {n} bps slippage",
          "pool liquidity dropped by {n}%", "oracle update lagged {n} seconds",
          "bridge transfer took {n} minutes", "funding rate moved to {n} bps",
          "position health factor fell to 1.{n}", "mempool congestion at block {n}"]
QUERIES = ["why did my swap revert", "when is gas cheapest", "slippage on WETH/USDC",
           "is the LINK oracle lagging", "bridge delays to arbitrum", "liquidity dropped in DAI",
           "health factor warning on AAVE", "should I rebalance now", "funding rate spike",
           "mempool congestion and failed transactions", "best time to swap WBTC",
           "what happened after the gas spike", "UNI/WETH pool risk", "claim rewards timing"]


def _text(rng: random.Random) -> tuple[str, str, str]:
    a, b = rng.sample(TOKENS, 2)
    event = rng.choice(EVENTS).format(n=rng.randint(1, 300))
    tool = rng.choice(TOOLS)
    return f"{tool} on {a}/{b}: {event}", f"{a}/{b}", tool


def build(root: Path, embedder: FastEmbedEmbedder, episodes: int, entries: int, triples: int,
          edges: int, seed: int) -> tuple[Grimoire, np.ndarray, FrozenClock, float]:
    started = time.perf_counter()
    rng = random.Random(seed)
    hasher = HashEmbedder(dim=embedder.dim)
    clock = FrozenClock()
    t0 = clock.now
    g = Grimoire.open(root, config=Config(), clock=clock, embedder=embedder)
    ctx = g.context
    matrices = []
    span = 30 * 86_400_000
    ids: list[str] = []
    for start in range(0, episodes, 1000):
        batch = []
        for i in range(start, min(episodes, start + 1000)):
            clock.set(t0 + span * i // max(episodes, 1))
            text, pair, tool = _text(rng)
            outcome = rng.choice([Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL])
            batch.append(Episode(
                id=new_id(clock.now), text=text, type=EpisodeType.ACTION, timestamp=clock.now,
                outcome=outcome, tool=tool, token_pair=pair, chain=rng.choice(CHAINS),
                regime=rng.choice(list(Regime)), gain=round(rng.gauss(0, 20), 2)))
        vectors = hasher.embed([e.text for e in batch])
        matrices.append(vectors)
        ids.extend(e.id for e in batch)
        ctx.writer.call(lambda b=batch, v=vectors: (ctx.episodes.append(b, v),  # type: ignore[misc]
                                                    record_episode_mentions(ctx, b, v)))
    ctx.writer.call(ctx.episodes.compact)
    entry_vectors = []
    for start in range(0, entries, 500):
        rows = []
        for _ in range(start, min(entries, start + 500)):
            text, _, tool = _text(rng)
            content = f"When {text.split(': ')[1]}, prefer to {tool} later because costs fall"
            rows.append(GrimoireEntry(
                id=new_id(clock.now), category=rng.choice(list(Category)), content=content,
                confidence=rng.uniform(0.2, 0.9), quality_score=rng.uniform(0.2, 0.9),
                decay_class=DecayClass.REGIME_CONDITIONAL, provenance=Provenance.SELF_LEARNED,
                created_at=clock.now - rng.randint(0, span), last_accessed_at=clock.now
                - rng.randint(0, span), status=EntryStatus.ACTIVE, updated_at=clock.now,
                market_regime=rng.choice([None, *Regime])))
        vecs = hasher.embed([r.content for r in rows])
        entry_vectors.append(vecs)

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
        facts.append(Fact(EntityRef(kind, ident), f"custom:rel{i % 50}",
                          ObjectValue.entity(other), i))
    for start in range(0, len(facts), 1000):
        ctx.writer.call(lambda f=facts[start:start + 1000]: ctx.graph.assert_many(f))

    def link() -> None:
        with ctx.semantic.transaction():
            for _ in range(edges):
                a, b = sorted(rng.sample(range(len(ids)), 2))
                ctx.semantic.upsert_edge(CausalEdge(ids[a], ids[b], EdgeKind.EXPLICIT,
                                                    rng.uniform(0.3, 1.0), "bench link"))

    if ids and edges:
        ctx.writer.call(link)
    clock.set(t0 + span)
    stored = np.vstack(matrices + entry_vectors) if matrices or entry_vectors else np.zeros(
        (0, embedder.dim), np.float32)
    return g, stored, clock, time.perf_counter() - started


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def floor_fn(embedder: FastEmbedEmbedder, stored: np.ndarray) -> Callable[[int], Any]:
    def run(i: int) -> Any:
        q = embedder.embed([QUERIES[i % len(QUERIES)]])[0]
        scores = stored @ q
        return np.argpartition(-scores, 20)[:20] if len(scores) > 20 else scores
    return run


def params(i: int) -> dict[str, Any]:
    out: dict[str, Any] = {"query": QUERIES[i % len(QUERIES)], "k": 10}
    if i % 4 == 3:
        out["entities"] = [{"kind": "token", "id": TOKENS[i % len(TOKENS)]}]
    return out


def serve_forever(root: Path, sock: Path, now: int) -> None:
    """--serve mode: this process is the daemon: open the store, serve until stdin closes.

    As ``grimoire run`` does: glibc's arenas capped and large blocks mapped before the
    model's threads allocate, Arrow on the C heap, and what opening the store built frozen
    out of the cyclic collector's walks."""
    limit_malloc_arenas(MALLOC_ARENAS)
    map_large_allocations(MMAP_THRESHOLD)
    use_system_arrow_pool()
    clock = FrozenClock(now)
    with Grimoire.open(root, config=Config(), clock=clock, embedder=FastEmbedEmbedder()) as g:
        freeze_startup_objects()
        loop = asyncio.new_event_loop()
        server = Server(g, sock)
        loop.run_until_complete(server.start())
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        print("ready", flush=True)
        sys.stdin.read()  # the parent closes our stdin to stop us
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        drain(g.context)


def daemon(root: Path, sock: Path, now: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SPEED), "--part", "retrieval", "--serve", str(root), "--socket",
         str(sock), "--now", str(now)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the daemon subprocess did not start: {line!r}")
    return proc


Row = tuple[str, str, float, float, float]  # store, measure, p50, p95, cpu ms per call
# After each socket call, untimed: the daemon's deferred log write lands (its fsync took up
# to 15 ms on this loaded machine; with 10 ms it spilled into the next timed call).
SETTLE_S = 0.03


def process_cpu_s(pid: int | None = None) -> float:
    """CPU seconds (all threads) of this process, or of ``pid`` (10 ms ticks) plus this one."""
    own = time.process_time()
    if pid is None:
        return own
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return own + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CPU: dict[str, float] = {}  # row name → mean CPU ms per call (call + its settle), last run


def interleaved(fns: dict[str, Callable[[int], Any]], n: int, warm: int = 10,
                settle: Callable[[], Any] | None = None, pid: int | None = None
                ) -> dict[str, list[float]]:
    """Per-call ms of each function, called in turn on the same query (same machine load).

    ``settle`` runs after each call, untimed: a retrieval's log write is deferred a few
    ms and done on the writer thread (``stages.writes``); settling lets it land between
    calls, as it does for an agent that acts on what it retrieved, instead of inside the
    next call timed (which may be the floor's).

    Also records each function's mean CPU time per call in ``CPU`` (this process's, plus
    ``pid``'s: the daemon's), over the call and its settle so a deferred write is counted
    where it belongs: a ratio that moves less than wall time on a loaded shared machine."""
    for i in range(warm):
        for fn in fns.values():
            fn(i)
    out: dict[str, list[float]] = {name: [] for name in fns}
    cpu = dict.fromkeys(fns, 0.0)
    for i in range(n):
        for name, fn in fns.items():
            cpu0 = process_cpu_s(pid)
            started = time.perf_counter()
            fn(i)
            out[name].append((time.perf_counter() - started) * 1000)
            if settle is not None:
                settle()
            cpu[name] += process_cpu_s(pid) - cpu0
    CPU.update({name: total * 1000 / max(1, n) for name, total in cpu.items()})
    return out


def measure(label: str, g: Grimoire, stored: np.ndarray, embedder: FastEmbedEmbedder, n: int,
            profile: bool) -> list[Row]:
    """In-process rows (with per-stage timings from the result's trace) beside the floor."""
    stages: dict[str, list[float]] = {}

    def deciding(i: int) -> None:
        for stage, ms in g.retrieve(**params(i))["trace"]["ms"].items():
            stages.setdefault(stage, []).append(ms)

    samples = interleaved({
        "floor: embed + numpy dot": floor_fn(embedder, stored),
        "  of which query embedding": lambda i: embedder.embed([QUERIES[i % len(QUERIES)]]),
        "retrieve in-process (deciding)": deciding,
        "retrieve in-process (browse)": lambda i: g.retrieve(**params(i), mode="browse"),
    }, n, settle=lambda: drain(g.context))
    cpu_of = dict(CPU)
    # Back to back, nothing settled: each log write lands in whatever call comes next.
    closed = interleaved({
        "floor (beside back-to-back calls)": floor_fn(embedder, stored),
        "retrieve back to back (deciding)": lambda i: g.retrieve(**params(i)),
    }, n)
    drain(g.context)
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for i in range(n):
            g.retrieve(**params(i))
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())
        drain(g.context)
    rows = [(label, name, *percentiles(values), cpu_of[name]) for name, values in samples.items()]
    rows += [(label, f"  stage: {stage}", *percentiles(values), math.nan)
             for stage, values in stages.items() if stage != "total"]
    return rows + [(label, name, *percentiles(values), CPU[name])
                   for name, values in closed.items()]


def measure_socket(label: str, root: Path, now: int, stored: np.ndarray,
                   embedder: FastEmbedEmbedder, n: int) -> list[Row]:
    """The socket rows: a daemon subprocess serves the closed store; the floor runs here."""
    sock = Path(tempfile.mkdtemp()) / "bench.sock"
    proc = daemon(root, sock, now)
    try:
        with Client(sock) as client:
            samples = interleaved({
                "floor (beside the socket calls)": floor_fn(embedder, stored),
                "retrieve over the socket (deciding)": lambda i: client.call("retrieve",
                                                                             params(i)),
                "  the same, explain: true": lambda i: client.call(
                    "retrieve", {**params(i), "explain": True}),
                "  transport: health over the socket": lambda i: client.call("health"),
            }, n, settle=lambda: time.sleep(SETTLE_S), pid=proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)
    return [(label, name, *percentiles(values), CPU[name]) for name, values in samples.items()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--triples", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=1_000)
    parser.add_argument("--big", type=int, default=100_000, help="episodes of the large store "
                        "(0 = skip)")
    parser.add_argument("--n", type=int, default=200, help="timed calls per row")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process runs")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for this run (default: Python's 0.005 s)")
    parser.add_argument("--quick", action="store_true",
                        help="the 10k store only (--big 0), 50 timed calls per row")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--socket", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--now", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"big": 0, "n": 50})
    if args.serve:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
        serve_forever(args.serve, args.socket, args.now)
        return
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    embedder = FastEmbedEmbedder()
    rows: list[Row] = []
    configs = [(f"{args.episodes // 1000}k ep + {args.entries // 1000}k entries + "
                f"{args.triples // 1000}k triples", args.episodes, args.entries, args.triples)]
    if args.big:
        configs.append((f"{args.big // 1000}k ep + {args.entries // 1000}k entries + "
                        f"{args.triples // 1000}k triples", args.big, args.entries,
                        args.triples))
    for label, episodes, entries, triples in configs:
        with tempfile.TemporaryDirectory() as tmp:
            g, stored, clock, seconds = build(Path(tmp), embedder, episodes, entries,
                                              triples, args.edges, args.seed)
            print(f"built {label} in {seconds:.1f} s")
            try:
                rows += measure(label, g, stored, embedder, args.n, args.profile)
            finally:
                g.close()
            rows += measure_socket(label, Path(tmp), clock.now, stored, embedder, args.n)
    floors: dict[tuple[str, str], float] = {}
    floor = 0.0
    for label, what, p50, _, _ in rows:  # each row against the floor measured beside it
        if what.startswith("floor"):
            floor = p50
        floors[(label, what)] = floor
    print("(stage rows: inside the in-process deciding calls, from the result's trace.ms;"
          " cpu: mean CPU ms per call, all threads, the daemon's too for socket rows)")
    print(f"\n{'store':<42} {'measure':<38} {'p50 ms':>8} {'p95 ms':>8} {'p50/floor':>9}"
          f" {'cpu ms':>7} {'cpu/floor':>9}")
    cpu_floor = 0.0
    for label, what, p50, p95, cpu in rows:
        if what.startswith("floor"):
            cpu_floor = cpu
        ratio = p50 / floors[(label, what)]
        cpu_text = (f" {cpu:7.2f} {cpu / cpu_floor:9.2f}" if cpu == cpu and cpu_floor > 0
                    else "")
        print(f"{label:<42} {what:<38} {p50:8.2f} {p95:8.2f} {ratio:9.2f}{cpu_text}")

