"""bench_privacy --part redo: what the redo copies (``grimoire.stores.redo``) cost a write.

Each write acknowledged keeps a second durable copy until a backup covers it: the episode
journal's ``kept`` rows (moved in the flush's own commit), and an appended, fdatasync'd
record per semantic or graph transaction. Measured through the facade (``Grimoire.open``,
hash embedder, a fresh directory per run): ``episode.write`` p50, the batched ingest rate
(``episode.write_batch`` of 32), ``entry.add`` p50 and ``kg.assert`` p50, and the disk the
copies take at the end.

``--baseline DIR``: a checkout of the code before the redo copies (``git archive
<commit> | tar -x -C DIR``); each round then runs both, alternating, in child processes
(same machine load for both), and the table gives the medians side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

T0 = 1_767_225_600_000


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure(root: Path, singles: int, batches: int, entries: int, triples: int
            ) -> dict[str, Any]:
    from grimoire import Grimoire
    from grimoire.clock import FrozenClock
    from grimoire.models.embedders import HashEmbedder

    out: dict[str, Any] = {}
    with Grimoire.open(root, clock=FrozenClock(T0), embedder=HashEmbedder(dim=384)) as g:
        took = []
        for i in range(singles):
            started = time.perf_counter()
            g.episode_write(text=f"swap {i} WETH/USDC at {20 + i % 50} gwei on base",
                            type="action", outcome="positive", actor="bot-a",
                            timestamp=T0 + i * 1000)
            took.append(time.perf_counter() - started)
        out["episode_write_p50_ms"] = _p50(took)
        started = time.perf_counter()
        for b in range(batches):
            g.episode_write_batch([{"text": f"batch {b} item {j}: bridge relay {j % 7} "
                                    "failed", "type": "observation",
                                    "timestamp": T0 + (singles + b * 32 + j) * 1000}
                                   for j in range(32)])
        out["batch_ingest_ep_s"] = batches * 32 / (time.perf_counter() - started)
        took = []
        for i in range(entries):
            started = time.perf_counter()
            g.entry_add(category="warning", content=f"Avoid pool {i} when gas_gwei > "
                        f"{40 + i} because fees eat the gain")
            took.append(time.perf_counter() - started)
        out["entry_add_p50_ms"] = _p50(took)
        took = []
        for i in range(triples):
            started = time.perf_counter()
            g.kg_assert(subject={"kind": "pool", "id": f"0x{i:040x}"},
                        predicate="custom:fee_bps", object=5 + i % 30, valid_from=1)
            took.append(time.perf_counter() - started)
        out["kg_assert_p50_ms"] = _p50(took)
        g.context.episodes.flush()
    redo = root / "redo"
    out["redo_log_bytes"] = sum(p.stat().st_size for p in redo.glob("*.log")) \
        if redo.is_dir() else 0
    out["journal_bytes"] = sum(p.stat().st_size for p in (root / "episodes").glob(
        "episodes_journal.sqlite*"))
    return out


def _child(tree: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="grimoire-redo-") as work:
        run = subprocess.run([sys.executable, __file__, "--child", work,
                              "--singles", str(args.singles), "--batches", str(args.batches),
                              "--entries", str(args.entries), "--triples", str(args.triples)],
                             capture_output=True, text=True, env=env, check=False)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    found: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default=None, help="a checkout of the code before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--triples", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="1 round, half the writes")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(Path(args.child) / "data", args.singles, args.batches,
                                 args.entries, args.triples)))
        return
    if args.quick:
        args.rounds, args.singles, args.batches = 1, 100, 20
        args.entries, args.triples = 50, 100
    trees: dict[str, Path | None] = {"with redo copies": Path(__file__).resolve().parents[2]}
    if args.baseline:
        trees = {"before (baseline)": Path(args.baseline), **trees}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(_child(tree, args))
    keys = list(next(iter(runs.values()))[0])
    print("| measure | " + " | ".join(trees) + " |\n|---|" + "---|" * len(trees))
    for key in keys:
        cells = [f"{statistics.median(r[key] for r in runs[name]):,.1f}" for name in trees]
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(f"\nmedian of {args.rounds} alternating round(s); {args.singles} single writes, "
          f"{args.batches} batches of 32, {args.entries} entries, {args.triples} triples")


if __name__ == "__main__":
    main()
