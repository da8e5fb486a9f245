"""The process a fault happens to (``benches.faults``): ``python fault_child.py OP WORK``.

Each op opens the data directory ``WORK/data`` the way the daemon does (one writer),
appends every write it got an answer for to ``WORK/acked.txt`` (``kind id``, fsync'd:
what the caller was told is stored), and, for a kill, sends itself SIGKILL at the chosen
point by wrapping the function that runs there: the process dies as ``kill -9`` kills it,
with no cleanup, no flush and no close.

- ``seed N [ROUND]``: N episodes in batches of 25, six told entries and KG triples (new
  ones for each ROUND);
- ``disk_full``: a file-size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored so a write fails
  with EFBIG as on a full disk) a little above the largest file, then batches until one
  is refused; reads are served after it; the limit lifted, one more batch; prints a JSON
  line with what happened;
- ``kill_backup DEST``, ``kill_import BUNDLE``, ``kill_compact``, ``kill_forget ACTOR``:
  the operation, killed at its point (see ``KILL_AT``).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder

DIM = 384
T0 = 1_767_225_600_000
# Where each kill lands: the function it wraps, and after how many calls it fires.
KILL_AT = {
    "kill_backup": ("grimoire.portable.backup", "_lance_backup", 1),  # store copies half done
    "kill_import": ("grimoire.portable.transfer", "admit", 5),  # 5th entry, mid-bundle
    "kill_compact": ("grimoire.stores.episodes.lance", "LanceEpisodes.sync", 2),  # between
    # compaction's rewrite and its cleanup of old versions (the first sync is the flush's)
    "kill_forget": ("grimoire.stores.episodes.store", "EpisodeStore.erase", 1),  # episodes
    # erased, entries not yet recounted, files not yet scrubbed
}


def open_data(work: Path) -> Grimoire:
    return Grimoire.open(work / "data", clock=FrozenClock(T0), embedder=HashEmbedder(dim=DIM))


class Acked:
    def __init__(self, work: Path) -> None:
        self._file = open(work / "acked.txt", "a", encoding="utf-8")  # noqa: SIM115

    def add(self, kind: str, ids: list[str]) -> None:
        self._file.write("".join(f"{kind} {i}\n" for i in ids))
        self._file.flush()
        os.fsync(self._file.fileno())


def _batch(tag: str, n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"text": f"{tag} item {start + j}: swap WETH/USDC at {30 + j % 40} gwei on base",
             "type": "action", "outcome": "positive" if j % 3 else "negative",
             "actor": "bot-a" if j % 2 else "bot-b", "timestamp": T0 + (start + j) * 60_000,
             "metrics": {"gas_gwei": float(30 + j % 40)}} for j in range(n)]


def seed(work: Path, n: int, round_: int = 0) -> None:
    acked = Acked(work)
    with open_data(work) as g:
        for start in range(0, n, 25):
            out = g.episode_write_batch(_batch(f"seed {round_}", min(25, n - start), start))
            acked.add("episode", out["ids"])
        for i in range(6):
            entry = g.entry_add(category="warning", content=f"Avoid swaps on {chr(65 + i)}"
                                f"{round_} pools when {_METRIC[i]} > {60 + 5 * i + round_} "
                                "because fees eat the gain")
            if entry["id"]:
                acked.add("entry", [entry["id"]])
            triple = g.kg_assert(subject={"kind": "pool", "id": f"0x{i + 10 * round_:040x}"},
                                 predicate="custom:fee_bps", object=5 + i, valid_from=1)
            acked.add("triple", [triple["id"]])
        g.context.episodes.flush()


_METRIC = ("gas_gwei", "slippage_bps", "base_fee", "priority_fee", "queue_depth", "spread")


def disk_full(work: Path) -> None:
    acked = Acked(work)
    report: dict[str, Any] = {}
    with open_data(work) as g:
        g.context.episodes.flush()
        biggest = max(p.stat().st_size for p in (work / "data").rglob("*") if p.is_file())
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill, as ENOSPC
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (biggest + (512 << 10), hard))
        for k in range(400):
            try:
                out = g.episode_write_batch(_batch(f"full batch {k}", 50))
            except Exception as exc:  # the refused write: its caller is told
                report.update(failed_batch=k, error=f"{type(exc).__name__}: {exc}"[:300])
                break
            acked.add("episode", out["ids"])
        # Reads go on while the disk is full.
        report["reads_served"] = (bool(g.retrieve(query="swap WETH/USDC", k=5)["items"])
                                  and g.status() is not None)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space is back
        started = time.perf_counter()
        out = g.episode_write_batch(_batch("after the disk was freed", 10))
        report["recover_s"] = time.perf_counter() - started
        acked.add("episode", out["ids"])
    print(json.dumps(report))


def _arm(op: str) -> None:
    """Wrap the function at ``KILL_AT[op]`` so that its n-th call ends in SIGKILL (after the
    call for a store step that must have happened; before it for a copy)."""
    import importlib

    module_name, qualname, nth = KILL_AT[op]
    module = importlib.import_module(module_name)
    owner: Any = module
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] >= nth and op == "kill_backup":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if calls[0] >= nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapped)


def killed(work: Path, op: str, arg: str | None) -> None:
    acked = Acked(work)
    with open_data(work) as g:
        out = g.episode_write_batch(_batch("before the kill", 25))
        acked.add("episode", out["ids"])
        if op == "kill_backup":  # a backup is its own process beside the writer's
            close_and_back_up = True
        else:
            close_and_back_up = False
            _arm(op)
        if op == "kill_import":
            from grimoire.portable.session import import_bundle

            import_bundle(g.context, str(arg), "predecessor")
        elif op == "kill_compact":
            g.context.episodes.compact()
        elif op == "kill_forget":
            g.forget(actor=arg)
    if close_and_back_up:
        from grimoire.portable.backup import backup

        _arm(op)
        backup(work / "data", str(arg))
    raise SystemExit(f"{op}: the kill point was never reached")


def main(argv: list[str]) -> None:
    op, work = argv[0], Path(argv[1])
    if op == "seed":
        seed(work, int(argv[2]), int(argv[3]) if len(argv) > 3 else 0)
    elif op == "disk_full":
        disk_full(work)
    elif op in KILL_AT:
        killed(work, op, argv[2] if len(argv) > 2 else None)
    else:
        raise SystemExit(f"unknown op {op}")


if __name__ == "__main__":
    main(sys.argv[1:])
