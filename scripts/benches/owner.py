"""``bench_daemon.py --part owner``: the owner's commands, with the daemon stopped and through it.

Each row runs one ``grimoire`` command as the owner does (a fresh process, the console
script's ``python -m grimoire``) on a demo data directory and prints the median wall time of
``--runs`` runs beside issue 27's goal: ≤ 1 s for ``status``, ``playbook``, ``explain`` and
``entry``, ≤ 2 s for ``retrieve`` (which loads the embedding model). Without ``--data`` it
builds the directory with the README's demo command (``grimoire run --feed sim --speed
600``) for ``--ticks`` ticks. The same commands then run through a daemon started on a copy
of the directory (no ticks run: ``--tick-seconds 3600``). The floor rows are what every
command pays before it does anything: the interpreter, the CLI's imports, LanceDB's
import (what a command that reads episodes pays on top, with no daemon) and fastembed's
(what ``retrieve`` pays on top to load the model). ``status`` with no daemon reads the
figures the daemon saved at its close (``grimoire.methods.status_cache``) and pays for
neither while the episodes are as it left them.

``--tree DIR`` measures another source tree (``git archive`` of an older commit) instead of
this checkout's, with this venv: the before/after of a change in one sitting.

    python scripts/bench_daemon.py --part owner --quick
    python scripts/bench_daemon.py --part owner --data data/demo --runs 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benches import apply_quick

REPO = Path(__file__).resolve().parents[2]
GOALS = {"status": 1.0, "playbook": 1.0, "explain": 1.0, "entry": 1.0, "retrieve": 2.0}


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def _timed(argv: list[str], env: dict[str, str], runs: int, cwd: Path) -> tuple[float, str]:
    times: list[float] = []
    out = ""
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            return float("nan"), done.stderr.strip().splitlines()[-1:][0] if done.stderr else "?"
        out = done.stdout
    return statistics.median(times), out


def build_demo(target: Path, ticks: int, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grimoire", "run", "--feed", "sim", "--data",
                    str(target), "--speed", "600", "--max-ticks", str(ticks)], env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _commands(data: Path, env: dict[str, str], cwd: Path) -> list[tuple[str, list[str]]]:
    """The owner's commands on this directory, with ids read from the directory itself."""
    import json

    grim = [sys.executable, "-m", "grimoire"]
    listed = subprocess.run([*grim, "entry", "list", "--json", "--data", str(data)], env=env,
                            cwd=cwd, capture_output=True, text=True, check=True)
    entries = json.loads(listed.stdout).get("entries") or []
    entry_id = entries[0]["id"] if entries else "0000"
    # The id as the table prints it (the shortest unique prefix): what an owner copies.
    short = entries[0].get("short_id") or entry_id if entries else entry_id
    out = [("status", ["status"]), ("playbook", ["playbook"]),
           ("explain", ["explain", short]), ("entry list", ["entry", "list"]),
           ("entry show", ["entry", "show", entry_id]),
           ("kg at", ["kg", "at", "token", "WETH", "99999999999"]),
           ("retrieve", ["retrieve", "gas is cheap", "-k", "5"])]
    return [(name, [*grim, *argv, "--data", str(data)]) for name, argv in out]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="an existing demo data directory (else built)")
    ap.add_argument("--ticks", type=int, default=600, help="demo ticks when building one")
    ap.add_argument("--runs", type=int, default=3, help="runs per command (median)")
    ap.add_argument("--tree", type=Path, help="measure this source tree instead")
    ap.add_argument("--quick", action="store_true", help="a 200-tick demo, one run each")
    args = ap.parse_args(argv)
    if args.quick:
        apply_quick(ap, args, {"ticks": 200, "runs": 1})
    env = _env(args.tree.resolve() if args.tree else None)
    cwd = Path(tempfile.gettempdir())  # not the checkout: its grimoire/ would shadow --tree
    base = Path(tempfile.mkdtemp(prefix="gbo", dir="/tmp"))
    rows: list[tuple[str, str, str]] = []
    try:
        data = args.data
        if data is None:
            data = base / "demo"
            took = build_demo(data, args.ticks, _env(None))
            print(f"built the demo ({args.ticks} ticks) in {took:.0f} s", file=sys.stderr)
        data = data.resolve()
        for name, code in [("floor: python -c pass", "pass"),
                           ("floor: import the CLI", "import grimoire.cli.app"),
                           ("floor: import lancedb", "import lancedb"),
                           ("floor: import fastembed", "import fastembed")]:
            took, _ = _timed([sys.executable, "-c", code], env, args.runs, cwd)
            rows.append((name, f"{took:.2f} s", ""))
        commands = _commands(data, env, cwd)
        for name, cmd in commands:
            took, note = _timed(cmd, env, args.runs, cwd)
            goal = GOALS.get(name.split()[0])
            verdict = "" if goal is None else f"goal ≤ {goal:.0f} s: " + (
                "met" if took <= goal else "missed")
            rows.append((f"{name}, no daemon", f"{took:.2f} s",
                         verdict if took == took else f"failed: {note}"))
        copy = base / "served"
        shutil.copytree(data, copy, ignore=shutil.ignore_patterns("grimoire.sock", "LOCK"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "grimoire", "run", "--feed", "sim", "--data", str(copy),
             "--tick-seconds", "3600", "--json"], env=env, cwd=cwd,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not (copy / "grimoire.sock").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(0.5)
            for name, cmd in _commands(copy, env, cwd):
                took, note = _timed(cmd, env, args.runs, cwd)
                rows.append((f"{name}, through the daemon", f"{took:.2f} s",
                             "" if took == took else f"failed: {note}"))
        finally:
            proc.terminate()
            proc.wait(60)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    tree = f" (tree {args.tree})" if args.tree else ""
    print(f"owner commands on {data}{tree}, median of {args.runs}")
    print(f"{'command':<{width}}  {'wall':>8}  notes")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 20}")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>8}  {note}")
