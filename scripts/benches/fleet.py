"""``bench_scale.py --part fleet``: twenty agents on one Clade table (issue 29, part 4).

Each agent is its own Grimoire in its own process (``benches/fleet_child.py``), with the
**hash embedder** (twenty processes each loading the model would measure the model on two
shared cores, not the Clade; what is exchanged does not depend on the vectors) and its own
data directory; all of them point ``clade.uri`` at one table on an S3-compatible server on
a loopback port (moto's server, from PyPI, as the tests start it). They start together and
run ``--cycles`` curator cycles each, writing ``--per-cycle`` new warnings of their own
before each; every cycle ends with the Clade exchange (publish, then pull). Then each drains
(exchange cycles until every agent's items are in and nothing new is left to pull).

Reported: items published (rows in the table; acknowledged by the Clade to their publisher)
and pulled (foreign rows each agent imported, summed), duplicates (a key in more than one
row, an item recorded as more than one alert episode by an agent), losses (an item
acknowledged but not in the table; a foreign row some agent never pulled), exchanges that
failed (retried at the next cycle), the pull's duration p50 / p95 (its share of the
exchange: reading the table's keys, reading the new rows, importing them through the gate),
and the table's objects over time: data files, manifests (versions) and transaction files,
sampled while the fleet runs, with how many compactions the agents ran. Nothing is asserted
here; ``tests/portable/test_clade_fleet.py`` runs the same fleet and asserts.

    .venv/bin/python scripts/bench_scale.py --part fleet [--agents 20 --cycles 4] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("fleet_child.py")
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def s3_server() -> Iterator[tuple[str, str]]:
    """moto's S3-compatible server on a free loopback port with one bucket; sets the AWS_*
    variables LanceDB reads (children inherit them). Yields (table URI, endpoint)."""

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved = dict(os.environ)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the S3 server did not start") from None
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update({"AWS_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": "test",
                           "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                           "AWS_ALLOW_HTTP": "true"})
        _client(endpoint).create_bucket(Bucket="clade")
        yield "s3://clade/shared", endpoint
    finally:
        os.environ.clear()
        os.environ.update(saved)
        proc.terminate()
        proc.wait(30)


def _client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                        aws_secret_access_key="test", region_name="us-east-1")


def table_objects(uri: str) -> dict[str, int]:
    """The Clade table's objects by kind: ``data`` files, ``_versions`` (manifests: one per
    version kept), ``_transactions``, ``_indices`` (local directory or s3:// URI)."""
    names: list[str] = []
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        root = f"{prefix}/clade.lance/"
        pages = _client(os.environ["AWS_ENDPOINT"]).get_paginator("list_objects_v2")
        names = [o["Key"][len(root):] for page in pages.paginate(Bucket=bucket, Prefix=root)
                 for o in page.get("Contents", [])]
    else:
        base = Path(uri) / "clade.lance"
        names = [str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()]
    out = {"data": 0, "_versions": 0, "_transactions": 0}
    for name in names:
        kind = name.split("/", 1)[0]
        out[kind] = out.get(kind, 0) + 1
    return out


def run_fleet(uri: str, work: Path, *, agents: int = 20, cycles: int = 4,
              per_cycle: int = 2, drain: int = 40, config: dict[str, Any] | None = None,
              niceness: int = 10, sample_s: float = 2.0) -> dict[str, Any]:
    """Run the fleet against ``uri`` (the AWS_* variables already set for s3://) in ``work``;
    returns the summary (see the module doc) with every agent's report under ``reports``."""
    spec = {"agents": agents, "cycles": cycles, "per_cycle": per_cycle, "drain": drain,
            "config": config or {}}
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(
        [sys.executable, str(CHILD), str(i), str(work), uri, json.dumps(spec)],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: os.nice(niceness)) for i in range(agents)]
    samples: list[dict[str, Any]] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 600
        while not all((work / f"ready-{i:02d}").exists() for i in range(agents)):
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("an agent did not start: " + (dead[0].communicate()[1]
                                                                 if dead else "timeout"))
            time.sleep(0.1)
        started = time.time()
        (work / "go").touch()

        def sample() -> None:
            while not stop.wait(sample_s):
                try:
                    samples.append({"t": time.time() - started, **table_objects(uri)})
                except Exception:  # the table is not there yet
                    continue

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        errors = [p.communicate(timeout=1200)[1] for p in procs]
        elapsed = time.time() - started
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
    failed = [e for p, e in zip(procs, errors, strict=True) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} agent(s) failed:\n{failed[0][-3000:]}")
    reports = [json.loads((work / f"agent{i:02d}.json").read_text()) for i in range(agents)]
    samples.append({"t": elapsed, **table_objects(uri)})
    return {**summarize(uri, reports), "seconds": elapsed, "samples": samples,
            "reports": reports}


def _pct(values: Sequence[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


def summarize(uri: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
    import lancedb

    table = lancedb.connect(uri).open_table("clade")
    keys = [r["key"] for r in table.search().select(["key"]).limit(None).to_arrow()
            .to_pylist()]
    in_table = set(keys)
    acked = {k for r in reports for k in r["acked"]}
    offered = {k for r in reports for k in r["offered"]}
    cycles = [c for r in reports for c in r["cycles"]]
    pulls = [c["pull_ms"] for c in cycles if "pull_ms" in c]
    reads = [c["pull_read_ms"] for c in cycles if "pull_read_ms" in c]
    pending = {r["agent"]: {"keys": len(set(r["offered"]) - set(r["acked"])),
                            "drained": r["drained"],
                            "errors": [c.get("error") for c in r["cycles"] if "error" in c]}
               for r in reports if set(r["offered"]) - set(r["acked"])}
    # each agent is judged against the table as it stands now, every agent done
    foreign = [in_table - set(r["offered"]) for r in reports]
    return {
        "agents": len(reports), "rows": len(keys), "offered": len(offered),
        "acked": len(acked), "pending": len(offered - acked), "pending_detail": pending,
        "pulled": sum(len(f & set(r["imported"])) for f, r in zip(foreign, reports,
                                                                  strict=True)),
        "expected_pulls": sum(len(f) for f in foreign),
        "dup_rows": len(keys) - len(in_table),
        "dup_alerts": sum(sum(n - 1 for n in r["alert_dups"].values()) for r in reports),
        "lost_acked": len(acked - in_table),
        "lost_pulls": sum(len(f - set(r["imported"])) for f, r in zip(foreign, reports,
                                                                      strict=True)),
        "unsettled": [r["agent"] for r in reports if not r.get("settled")],
        "cycles": sum(1 for c in cycles if c["cycle"] != "drain"),
        "drain_cycles": sum(1 for c in cycles if c["cycle"] == "drain"),
        "failed_exchanges": sum(1 for c in cycles if "error" in c),
        "errors": sorted({str(c["error"])[:160] for c in cycles if "error" in c})[:3],
        "compactions": sum(1 for c in cycles if c.get("compacted")),
        "compactions_lost": sum(1 for c in cycles if c.get("compacted") is False),
        "pull_p50_ms": _pct(pulls, 50), "pull_p95_ms": _pct(pulls, 95),
        "read_p50_ms": _pct(reads, 50), "read_p95_ms": _pct(reads, 95),
        "cycle_p95_s": _pct([c["end"] - c["start"] for c in cycles], 95),
        "versions": len(table.list_versions()), "version": table.version,
        "fragments": int(table.stats()["fragment_stats"]["num_fragments"]),
    }


def print_report(s: dict[str, Any], title: str) -> None:
    print(f"\n{title}: {s['agents']} agents, {s['cycles']} cycles + {s['drain_cycles']} drain "
          f"cycles in all, {s['seconds']:.0f} s")
    rows = [
        ("items published (rows in the table)", f"{s['rows']}"),
        ("  acknowledged to their publisher / offered", f"{s['acked']} / {s['offered']}"),
        ("items pulled (summed over agents) / expected", f"{s['pulled']} / "
                                                        f"{s['expected_pulls']}"),
        ("duplicates: rows per key / alerts per item (goal 0)",
         f"{s['dup_rows']} / {s['dup_alerts']}"),
        ("losses: acknowledged not in table / never pulled (goal 0)",
         f"{s['lost_acked']} / {s['lost_pulls']}"),
        ("exchanges that failed (retried next cycle)", f"{s['failed_exchanges']}"),
        ("pull p50 / p95, ms (reading the table / all of it)",
         f"{s['read_p50_ms']:.0f} / {s['read_p95_ms']:.0f}  /  "
         f"{s['pull_p50_ms']:.0f} / {s['pull_p95_ms']:.0f}"),
        ("curator cycle (with the exchange) p95, s", f"{s['cycle_p95_s']:.1f}"),
        ("compactions run / lost a race", f"{s['compactions']} / {s['compactions_lost']}"),
        ("versions kept at the end / latest version", f"{s['versions']} / {s['version']}"),
        ("data files the latest version reads (fragments)", f"{s['fragments']}"),
    ]
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    if s["unsettled"]:
        print(f"  agents that ran out of drain cycles: {', '.join(s['unsettled'])}")
    for error in s["errors"]:
        print(f"  error seen: {error}")
    print("  table objects over time (s: data files / manifests / transaction files):")
    picks = s["samples"][:: max(1, len(s["samples"]) // 8)] + s["samples"][-1:]
    print("   " + ", ".join(f"{p['t']:.0f}s: {p['data']}/{p['_versions']}/"
                            f"{p['_transactions']}" for p in picks))


def main(argv: Sequence[str] | None = None) -> None:
    from benches import apply_quick, json_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--per-cycle", type=int, default=2, help="new warnings per agent "
                        "before each cycle")
    parser.add_argument("--drain", type=int, default=40, help="most drain cycles per agent")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a config override for every agent (e.g. clade.compact_every=8)")
    parser.add_argument("--local", action="store_true", help="a local directory instead of "
                        "the S3-compatible server")
    parser.add_argument("--quick", action="store_true", help="8 agents, 2 cycles")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"agents": 8, "cycles": 2})
    config = json_settings(args.set)
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        if args.local:
            uri = str(Path(tmp) / "clade")
            s = run_fleet(uri, Path(tmp) / "work", agents=args.agents, cycles=args.cycles,
                          per_cycle=args.per_cycle, drain=args.drain, config=config)
        else:
            with s3_server() as (uri, _endpoint):
                s = run_fleet(uri, Path(tmp) / "work", agents=args.agents,
                              cycles=args.cycles, per_cycle=args.per_cycle,
                              drain=args.drain, config=config)
    where = "a local directory" if args.local else "an S3-compatible server (moto)"
    print_report(s, f"fleet on one Clade table on {where}, hash embedder")
