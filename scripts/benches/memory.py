"""Where the daemon's memory goes: RSS idle and with a large store, split by mapping.

    python scripts/bench_speed.py --part memory                   # idle daemon + 100k store
    python scripts/bench_speed.py --part memory --episodes 10000  # a smaller store

Starts ``python -m grimoire run --feed none`` (the real model) on an empty data directory,
writes one episode and runs one retrieve (so the model, LanceDB and the read paths are all
warm), and reads its RSS; then builds a store of ``--episodes`` episodes + 2k entries + 10k
KG triples (stored vectors from the hash embedder, the model's id on the table, as
``bench_speed.py --part retrieval`` does), starts the daemon on it, runs 50 retrieves and 10 writes,
and reads its RSS again. Each figure is split by /proc/PID/smaps: the model (the ONNX
weights and the arena-less activations are anonymous memory attributed by loading order, so
this is reported as "anonymous"), the C heap, and the shared libraries (file-backed pages
of onnxruntime, LanceDB, pyarrow ...). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPEED = REPO / "scripts" / "bench_speed.py"  # this part's script, for the store-building child
sys.path.insert(0, str(REPO))

from benches import apply_quick  # noqa: E402
from grimoire.service.client import Client  # noqa: E402

IDLE_GOAL_MIB = 300
LOADED_GOAL_MIB = 400


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def smaps_split(pid: int) -> dict[str, float]:
    """MiB resident per kind of mapping: anonymous, heap, each large shared library."""
    out: collections.Counter[str] = collections.Counter()
    current = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            current = parts[5] if len(parts) >= 6 else "[anon]"
        elif parts and parts[0] == "Rss:":
            name = current if current.startswith("[") else Path(current).name
            out[name] += int(parts[1])
    return {k: v / 1024 for k, v in out.most_common()}


def start(data: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIMOIRE_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "grimoire", "run", "--data", str(data),
                             "--feed", "none"], env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, cwd=str(REPO))
    sock = data / "grimoire.sock"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"daemon exited with {proc.returncode}; see {log}")
        try:
            with Client(sock, timeout=5) as c:
                if c.call("health")["ok"]:
                    return proc
        except Exception:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("daemon did not get ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()


def exercise(sock: Path, retrieves: int, writes: int) -> None:
    queries = ["why did my swap revert", "when is gas cheapest", "slippage on WETH/USDC",
               "bridge delays to arbitrum", "funding rate spike"]
    with Client(sock, timeout=300) as c:
        for i in range(writes):
            c.call("episode.write", {"text": f"swap {i} WETH/USDC filled at {100 + i} gwei"})
        for i in range(retrieves):
            c.call("retrieve", {"query": queries[i % len(queries)], "k": 10})


def measure(label: str, data: Path, retrieves: int, writes: int
            ) -> tuple[str, float, dict[str, float]]:
    proc = start(data, data.parent / f"{label}.log")
    try:
        exercise(data / "grimoire.sock", retrieves, writes)
        time.sleep(2.0)  # deferred log writes, the writer's batch tail
        return label, rss_mib(proc.pid), smaps_split(proc.pid)
    finally:
        stop(proc)


def build_store(root: Path, episodes: int) -> None:
    import structlog

    from benches.retrieval import build
    from grimoire.models.embedders import FastEmbedEmbedder

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    g, _, _, _ = build(root, FastEmbedEmbedder(), episodes, 2_000, 10_000, 1_000, 7)
    g.close()


def run(episodes: int) -> list[tuple[str, float, dict[str, float]]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="gm", dir="/tmp") as tmp:
        rows.append(measure("idle (empty store, model loaded)", Path(tmp) / "idle", 1, 1))
        big = Path(tmp) / "big"
        # The store is built in a child so this process stays small and out of the way.
        subprocess.run([sys.executable, str(SPEED), "--part", "memory", "--build", str(big),
                        "--episodes", str(episodes)], check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        rows.append(measure(f"{episodes // 1000}k episodes + 2k entries + 10k triples", big,
                            50, 10))
    return rows


def print_rows(rows: list[tuple[str, float, dict[str, float]]]) -> None:
    for label, rss, split in rows:
        goal = IDLE_GOAL_MIB if label.startswith("idle") else LOADED_GOAL_MIB
        print(f"{label}: RSS {rss:.0f} MiB (goal <= {goal})")
        top = sorted(split.items(), key=lambda kv: -kv[1])[:8]
        print("    " + ", ".join(f"{name} {mib:.0f}" for name, mib in top))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="a 10k-episode store")
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        apply_quick(ap, args, {"episodes": 10_000})
    if args.build:
        build_store(args.build, args.episodes)
        return
    print_rows(run(args.episodes))

