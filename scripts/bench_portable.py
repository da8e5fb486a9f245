"""Benchmark for knowledge that outlives one process: backup under load, bundles, MCP.

Prints one table: backup time and size at the given store sizes, with the
daemon's ``episode.write`` p95 while the backup runs beside its p95 idle (goal
<= 2x); export and import throughput (items/s; import goes through the
admission gate); the MCP ``query`` tool's round trip p50 (SDK client over stdio)
beside the socket's ``retrieve`` p50. The daemon runs in a subprocess with the
hash embedder (``hash-384``) so write latency measures the stores, not the
model. The machine is 2 shared cores: compare ratios within one run.

    python scripts/bench_portable.py                       # 10k episodes / 2k entries / 10k triples
    python scripts/bench_portable.py --episodes 100000 --entries 20000 --triples 100000
    python scripts/bench_portable.py --quick               # 2k episodes / 500 / 2k
    python scripts/bench_portable.py --demo-ticks 600      # the demo's export, imported

``--demo-ticks`` builds the README's demo with the real model, exports it and imports it
into a fresh directory twice: as exported (its episode vectors carried) and without them
(every endpoint episode embedded, as bundles were before they carried vectors).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benches import apply_quick  # noqa: E402

from grimoire import Grimoire  # noqa: E402
from grimoire.ids import new_id  # noqa: E402
from grimoire.models.embedders import HashEmbedder  # noqa: E402
from grimoire.records import (  # noqa: E402
    Category,
    DecayClass,
    EntryStatus,
    GrimoireEntry,
    Provenance,
)
from grimoire.records.graph import Fact  # noqa: E402

WORDS = ["gas", "spiked", "pool", "swap", "fee", "liquidity", "whale", "oracle", "bridge",
         "rsi", "volume", "funding", "long", "short", "eth", "usdc", "arb", "lp", "depeg",
         "slippage", "mint", "burn", "vault", "router"]
CATS = (Category.WARNING, Category.HEURISTIC, Category.INSIGHT)


def text(rng: np.random.Generator, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS, n))


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000, q)) if samples else float("nan")


def populate(data: Path, episodes: int, entries: int, triples: int) -> float:
    rng = np.random.default_rng(7)
    emb = HashEmbedder()
    started = time.perf_counter()
    with Grimoire.open(data, embedder=emb) as g:
        for lo in range(0, episodes, 1000):
            g.episode_write_batch([{"text": f"{text(rng)} #{i}"}
                                   for i in range(lo, min(episodes, lo + 1000))])
        ctx, now = g.context, g.context.now()
        contents = [f"{text(rng, 14)} because {text(rng, 6)} #{i}" for i in range(entries)]
        vectors = emb.embed(contents)
        for i, content in enumerate(contents):  # stored directly: the gate is not measured
            cat = CATS[i % len(CATS)]
            ctx.semantic.insert_entry(GrimoireEntry(
                id=new_id(now), category=cat, content=content, confidence=0.6,
                quality_score=0.7, decay_class=DecayClass.TACTICAL,
                provenance=Provenance.SELF_LEARNED, created_at=now, last_accessed_at=now,
                status=EntryStatus.ACTIVE, validated_count=2, updated_at=now), vectors[i])
        for lo in range(0, triples, 2000):
            ctx.graph.assert_many([
                Fact(subject={"kind": "pool", "id": f"p{i}"}, predicate="deployed_by",
                     object={"kind": "address_cluster", "id": f"d{i % 997}"},
                     valid_from=1 + i) for i in range(lo, min(triples, lo + 2000))])
    return time.perf_counter() - started


def writes(sock_path: Path, n: int, stop: threading.Event | None = None,
           started: list[float] | None = None) -> list[float]:
    """``n`` writes (or until ``stop``): their latencies; their start times into ``started``."""
    from grimoire.service.client import Client

    out: list[float] = []
    with Client(sock_path) as client:
        i = 0
        while (stop is None and i < n) or (stop is not None and not stop.is_set()):
            t0 = time.perf_counter()
            client.call("episode.write", {"text": f"bench write {i} gas swap"})
            out.append(time.perf_counter() - t0)
            if started is not None:
                started.append(t0)
            i += 1
    return out


def collect(sock: Path, stop: threading.Event, lat: list[float], starts: list[float]) -> None:
    lat.extend(writes(sock, 0, stop, starts))


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def mcp_queries(data: Path, env: dict[str, str], n: int) -> list[float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "grimoire", "mcp", "--data", str(data)],
                                   env=env, cwd=str(REPO))
    out = []
    async with Client(params) as client:
        await client.call_tool("query", {"question": "warm up"})
        for i in range(n):
            t0 = time.perf_counter()
            result = await client.call_tool("query", {"question": f"gas swap fee {i}"})
            out.append(time.perf_counter() - t0)
            assert not result.is_error
    return out


def mcp_row(sock: Path, data: Path, env: dict[str, str], queries: int
            ) -> tuple[str, str, str]:
    """MCP ``query`` p50 beside the socket's ``retrieve`` p50, against the running daemon."""
    from grimoire.service.client import Client

    with Client(sock) as client:
        client.call("retrieve", {"query": "warm up"})
        socket_s = []
        for i in range(queries):
            t0 = time.perf_counter()
            client.call("retrieve", {"query": f"gas swap fee {i}", "k": 5, "mode": "browse"})
            socket_s.append(time.perf_counter() - t0)
    mcp_s = asyncio.run(mcp_queries(data, env, queries))
    return ("MCP query p50 / socket retrieve p50", f"{queries} queries",
            f"{pct(mcp_s, 50):.1f} ms / {pct(socket_s, 50):.1f} ms")


def transfer_rows(data: Path, base: Path) -> list[tuple[str, str, str]]:
    """Export throughput from ``data``, then import throughput into a fresh store."""
    from grimoire.portable.bundle import export_bundle
    from grimoire.portable.session import import_bundle

    with Grimoire.open(data, embedder=HashEmbedder()) as g:
        t0 = time.perf_counter()
        exported: dict[str, Any] = export_bundle(g.context, base / "bundle")
        export_s = time.perf_counter() - t0
    n_items = sum(exported["counts"].values())
    with Grimoire.open(base / "fresh", embedder=HashEmbedder()) as g:
        t0 = time.perf_counter()
        imported = import_bundle(g.context, str(base / "bundle"), "predecessor")
        import_s = time.perf_counter() - t0
    return [("export", f"{exported['counts']}",
             f"{n_items / export_s:.0f} items/s ({export_s:.2f} s)"),
            ("import (through the gate)", f"entries {imported['entries']}",
             f"{n_items / import_s:.0f} items/s ({import_s:.2f} s)")]


def bundle_row(bundle: Path, base: Path) -> tuple[str, str, str]:
    """Import a given bundle (e.g. ``grimoire export`` of the README's demo) into a fresh
    store with the configured (real) embedding model: its causal links' episode endpoints
    are embedded and written here, as a new owner's import does."""
    from grimoire.portable.session import import_bundle

    with Grimoire.open(base / "from-bundle") as g:
        t0 = time.perf_counter()
        got = import_bundle(g.context, str(bundle), "predecessor")
        took = time.perf_counter() - t0
        episodes = g.context.episodes.count()
    items = (sum(got["entries"].values()) + sum(got["causal"].values())
             + sum(got["triples"].values()))
    return (f"import of {bundle.name} (real model, through the gate)",
            f"{items} items, {episodes} endpoint episodes written",
            f"{items / took:.0f} items/s ({took:.2f} s)")


def without_vectors(bundle: Path, out: Path) -> Path:
    """A copy of ``bundle`` as bundles were before they carried episode vectors: the
    importer embeds every endpoint episode (the before of issue 27 item 6)."""
    import json

    from grimoire.portable.vectors import FILE

    shutil.copytree(bundle, out)
    (out / FILE).unlink(missing_ok=True)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"].pop(FILE, None)
    manifest.pop("vectors", None)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def demo_rows(ticks: int, base: Path) -> list[tuple[str, str, str]]:
    """The README's demo (``grimoire run --feed sim``) for ``ticks`` ticks with the real
    model, exported with ``grimoire export``, imported into a fresh directory: as exported
    (its episode vectors carried) and without them (every endpoint episode embedded)."""
    grim = [sys.executable, "-m", "grimoire"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIMOIRE_")}
    t0 = time.perf_counter()
    subprocess.run([*grim, "run", "--feed", "sim", "--speed", "600", "--max-ticks", str(ticks),
                    "--data", str(base / "demo")], env=env, check=True, cwd=str(REPO),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"built the demo ({ticks} ticks) in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    subprocess.run([*grim, "export", "--data", str(base / "demo"), str(base / "demo-bundle")],
                   env=env, check=True, cwd=str(REPO), stdout=subprocess.DEVNULL)
    after = bundle_row(base / "demo-bundle", base / "after")
    before = bundle_row(without_vectors(base / "demo-bundle", base / "demo-bundle-bare"),
                        base / "before")
    return [(f"{after[0]}, episode vectors carried; goal >= 1,000 items/s", *after[1:]),
            (f"{before[0]}, without them (every episode embedded, as before)", *before[1:])]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--entries", type=int, default=2_000)
    ap.add_argument("--triples", type=int, default=10_000)
    ap.add_argument("--writes", type=int, default=300, help="idle episode.write samples")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--backup-only", action="store_true",
                    help="only the backup rows (skips MCP, export and the slow import)")
    ap.add_argument("--quick", action="store_true",
                    help="2k episodes / 500 entries / 2k triples, 100 writes, 10 queries")
    ap.add_argument("--bundle", type=Path,
                    help="also import this bundle (grimoire export of a demo directory) "
                         "with the real model; --bundle-only for just that row")
    ap.add_argument("--bundle-only", action="store_true")
    ap.add_argument("--demo-ticks", type=int, metavar="N",
                    help="only the demo rows: build the README's demo for N ticks (e.g. "
                    "600), export it and import it into a fresh directory, with and without "
                    "its episode vectors (real model)")
    args = ap.parse_args(argv)
    if args.demo_ticks:
        base = Path(tempfile.mkdtemp(prefix="gbp", dir="/tmp"))
        try:
            rows = demo_rows(args.demo_ticks, base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        print("| measurement | size | value |\n|---|---|---|")
        for what, sz, value in rows:
            print(f"| {what} | {sz} | {value} |")
        return
    if args.bundle_only:
        if args.bundle is None:
            ap.error("--bundle-only needs --bundle DIR")
        base = Path(tempfile.mkdtemp(prefix="gbp", dir="/tmp"))
        try:
            what, size, value = bundle_row(args.bundle, base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        print(f"| measurement | size | value |\n|---|---|---|\n| {what} | {size} | {value} |")
        return
    if args.quick:
        apply_quick(ap, args, {"episodes": 2_000, "entries": 500, "triples": 2_000,
                               "writes": 100, "queries": 10})
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    from tests.service.daemon_support import daemon_env, start_daemon, stop_daemon, wait_ready

    base = Path(tempfile.mkdtemp(prefix="gbp", dir="/tmp"))
    rows: list[tuple[str, str, str]] = []
    try:
        data = base / "d"
        fill_s = populate(data, args.episodes, args.entries, args.triples)
        size = f"{args.episodes} ep / {args.entries} entries / {args.triples} triples"
        print(f"populated {size} in {fill_s:.1f} s", file=sys.stderr)
        env = daemon_env()
        proc = start_daemon(data, "--feed", "none", env=env, stdout=subprocess.DEVNULL)
        sock = data / "grimoire.sock"
        try:
            wait_ready(proc, sock)
            writes(sock, 50)  # warm up
            idle = writes(sock, args.writes)
            from grimoire.portable.backup import backup

            for label, dest, run in (
                    ("backup() in the measuring client's own process, sharing its GIL", "bk",
                     lambda: backup(data, base / "bk")),
                    ("`grimoire backup` process", "bk2", lambda: subprocess.run(
                                   [sys.executable, "-m", "grimoire", "backup", "--data",
                                    str(data), str(base / "bk2")], env=env, check=True,
                                   stdout=subprocess.DEVNULL))):
                stop = threading.Event()
                lat: list[float] = []
                starts: list[float] = []
                t = threading.Thread(target=collect, args=(sock, stop, lat, starts))
                t.start()
                time.sleep(0.2)
                t0 = time.perf_counter()
                run()
                t1 = time.perf_counter()
                stop.set()
                t.join()
                # only the writes that started while the backup ran
                during = [d for s0, d in zip(starts, lat, strict=True) if t0 <= s0 <= t1]
                rows.append((f"backup, {label} (daemon serving writes)", size,
                             f"{t1 - t0:.2f} s, {du(base / dest) / 2**20:.1f} MiB "
                             f"(data dir {du(data) / 2**20:.1f} MiB)"))
                p95_idle, p95_busy = pct(idle, 95), pct(during, 95)
                rows.append((f"episode.write p95 idle / during backup ({label})",
                             f"{len(idle)} / {len(during)} writes",
                             f"{p95_idle:.2f} ms / {p95_busy:.2f} ms "
                             f"= {p95_busy / p95_idle:.2f}x (goal <= 2x)"))
            if not args.backup_only:
                rows.append(mcp_row(sock, data, env, args.queries))
        finally:
            stop_daemon(proc)
        if not args.backup_only:
            rows += transfer_rows(data, base)
        if args.bundle is not None:
            rows.append(bundle_row(args.bundle, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("| measurement | size | value |\n|---|---|---|")
    for what, sz, value in rows:
        print(f"| {what} | {sz} | {value} |")


if __name__ == "__main__":
    main()
