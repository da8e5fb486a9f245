"""bench_privacy --part faults: each fault made for real, what survived it, time to recover.

Every fault happens to a child process (``fault_child.py``) that writes through the
facade as the daemon does and records each write it was answered for; the parent then
counts which of those acknowledged writes are still there. Faults:

- ``disk full mid-batch``: a file-size limit (RLIMIT_FSIZE) set in the child: batches go
  on until one is refused; recovery is the first write after the limit is lifted;
- ``kill -9 during backup / import / compaction / forget``: SIGKILL at a chosen point of
  the operation; recovery is the reopen (plus the operation run again for backup and
  import: a backup cut short leaves only DEST.partial, an import is idempotent);
- ``corrupted LanceDB fragment / SQLite page / LMDB file``: bytes of the file overwritten
  while no process has it open, after a backup and more writes; ``grimoire check`` must
  name the store, and recovery is ``grimoire repair`` (the backup, every intact store,
  the rows still readable, and the damaged store's redo copy replayed: every write
  acknowledged since the backup) and the open of the repaired copy.

Each row: the writes acknowledged before the fault, how many of them are missing after
recovery (goal 0), the recovery time, and a note. ``tests/portable/test_faults.py`` runs
the same scenarios and asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("fault_child.py")


@dataclass
class Row:
    fault: str
    acked: int
    lost: int
    recover_s: float
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def child(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(CHILD), args[0], str(work), *args[1:]],
                          capture_output=True, text=True, timeout=900, check=False, env=env)


def _open(data: Path) -> Any:
    sys.path.insert(0, str(CHILD.parent))
    from fault_child import DIM, T0  # type: ignore[import-not-found]

    from grimoire import Grimoire
    from grimoire.clock import FrozenClock
    from grimoire.models.embedders import HashEmbedder

    return Grimoire.open(data, clock=FrozenClock(T0), embedder=HashEmbedder(dim=DIM))


def acked(work: Path) -> list[tuple[str, str]]:
    path = work / "acked.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [(kind, ident) for kind, ident in (line.split(" ", 1) for line in lines)]


def missing(data: Path, writes: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The acknowledged writes not found in ``data`` (opened as the daemon would)."""
    from grimoire.errors import NotFoundError

    out = []
    with _open(data) as g:
        ctx = g.context
        for kind, ident in writes:
            if kind == "episode":
                found = ctx.episodes.get(ident) is not None
            elif kind == "entry":
                found = ctx.semantic.get_entry(ident) is not None
            else:
                try:
                    ctx.graph.get(ident)
                    found = True
                except NotFoundError:
                    found = False
            if not found:
                out.append((kind, ident))
    return out


def _seeded(work: Path, episodes: int) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run = child(work, "seed", str(episodes))
    if run.returncode != 0:
        raise RuntimeError(f"seed failed: {run.stderr[-2000:]}")


def _killed(work: Path, op: str, *args: str) -> subprocess.CompletedProcess[str]:
    run = child(work, op, *args)
    if run.returncode != -9:
        raise RuntimeError(f"{op}: expected death by SIGKILL, got {run.returncode}: "
                           f"{run.stderr[-2000:]}")
    return run


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


# ------------------------------------------------------------------ scenarios


def disk_full(work: Path, episodes: int) -> Row:
    _seeded(work, episodes)
    run = child(work, "disk_full")
    if run.returncode != 0:
        raise RuntimeError(f"disk_full child failed: {run.stderr[-2000:]}")
    report = json.loads(run.stdout.strip().splitlines()[-1])
    writes = acked(work)
    lost = missing(work / "data", writes)
    with _open(work / "data") as g:  # the refused batch left no row behind
        partial = g.context.episodes.find_ids(quoting=[f"full batch {report['failed_batch']} "])
    return Row("disk full mid-batch (RLIMIT_FSIZE)", len(writes), len(lost),
               report["recover_s"], f"batch {report['failed_batch']} refused "
               f"({report['error'][:60]}…); reads served: {report['reads_served']}",
               {**report, "refused_rows_found": len(partial), "missing": lost})


def kill_backup(work: Path, episodes: int) -> Row:
    _seeded(work, episodes)
    dest = work / "backup"
    _killed(work, "kill_backup", str(dest))
    writes = acked(work)
    left = {"dest_exists": dest.exists(), "partial_exists": dest.with_name("backup.partial")
            .exists()}
    from grimoire.portable.backup import backup

    _, seconds = _timed(lambda: backup(work / "data", dest))
    lost = missing(work / "data", writes)
    return Row("kill -9 during backup", len(writes), len(lost), seconds,
               "only DEST.partial was left; the next backup removed it and completed",
               {**left, "missing": lost})


def kill_import(work: Path, episodes: int) -> Row:
    _seeded(work, episodes)
    bundle = _bundle(work)
    clean = work / "clean"
    shutil.copytree(work / "data", clean)
    from grimoire.portable.session import import_bundle

    with _open(clean) as g:
        want = import_bundle(g.context, str(bundle), "predecessor")
        want_entries = g.context.semantic.counts().total
    _killed(work, "kill_import", str(bundle))
    writes = acked(work)

    def again() -> Any:
        with _open(work / "data") as g:
            import_bundle(g.context, str(bundle), "predecessor")
            return g.context.semantic.counts().total, import_bundle(
                g.context, str(bundle), "predecessor")

    (entries, twice), seconds = _timed(again)
    lost = missing(work / "data", writes)
    return Row("kill -9 during import", len(writes), len(lost), seconds,
               f"import run again: {entries} entries (a clean import: {want_entries})",
               {"entries": entries, "clean_entries": want_entries, "clean": want,
                "third_run": twice, "missing": lost})


def _bundle(work: Path) -> Path:
    from grimoire.portable.session import export_store

    source = work / "source"
    with _open(source) as g:
        for i in range(12):
            g.entry_add(category="insight", confidence=0.8, content=f"On chain {i}, bridge "
                        f"fees rise {i + 2}% after {i + 1} failed relays in an hour")
        export_store(g.context, str(work / "bundle"))
    return work / "bundle"


def kill_compact(work: Path, episodes: int) -> Row:
    _seeded(work, episodes)
    _killed(work, "kill_compact")
    writes = acked(work)
    lost, seconds = _timed(lambda: missing(work / "data", writes))
    return Row("kill -9 during compaction", len(writes), len(lost), seconds,
               "killed between compaction's rewrite and its cleanup; reopened",
               {"missing": lost})


def kill_forget(work: Path, episodes: int) -> Row:
    _seeded(work, episodes)
    _killed(work, "kill_forget", "bot-a")
    writes = acked(work)

    def reopen() -> tuple[int, list[tuple[str, str]]]:
        with _open(work / "data") as g:  # the pending tombstone is finished at open
            left = len(g.context.episodes.find_ids(actor="bot-a"))
        return left, missing(work / "data", writes)

    (left, gone), seconds = _timed(reopen)
    forgotten = _forgotten_ids(work / "data")
    lost = [w for w in gone if w[1] not in forgotten]  # forgetting them was the point
    return Row("kill -9 during forget", len(writes) - len(forgotten & {i for _, i in writes}),
               len(lost), seconds, f"forget finished at reopen; bot-a episodes left: {left}",
               {"bot_a_left": left, "missing": lost})


def _forgotten_ids(data: Path) -> set[str]:
    out: set[str] = set()
    path = data / "TOMBSTONES.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        record = json.loads(line)
        for key in ("episodes", "ids", "episode_ids"):
            value = record.get(key)
            if isinstance(value, list):
                out.update(str(v) for v in value)
            elif isinstance(value, dict):
                for ids in value.values():
                    if isinstance(ids, list):
                        out.update(str(v) for v in ids)
    return out


def acked_after_backup(work: Path) -> list[tuple[str, str]]:
    """The writes acknowledged after the backup a corruption scenario took."""
    return acked(work)[int((work / "acked_at_backup.txt").read_text()):]


def check_of(data: Path) -> dict[str, Any]:
    from grimoire.portable.check import check

    return check(data)


def _garble(path: Path, offset: int, size: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def corrupted(work: Path, episodes: int, store: str) -> Row:
    """Seed, back up, write more, damage ``store``'s file, check, repair, reopen."""
    from grimoire.portable.backup import backup
    from grimoire.portable.check import check, repair

    _seeded(work, episodes)
    backup(work / "data", work / "backup")
    (work / "acked_at_backup.txt").write_text(str(len(acked(work))))
    run = child(work, "seed", str(episodes // 2), "1")  # new writes after the backup
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    writes = acked(work)
    data = work / "data"
    if store == "episodes":
        files = sorted((data / "episodes/episodes.lance/data").glob("*.lance"),
                       key=lambda p: p.stat().st_mtime_ns)
        target = files[-1]  # the newest fragment: it holds the writes after the backup
        _garble(target, max(0, target.stat().st_size - 4096), 4096)
    elif store == "semantic":
        target = data / "semantic.sqlite"
        _garble(target, target.stat().st_size // 2 // 4096 * 4096, 3 * 4096)
    else:
        target = data / "graph.lmdb/data.mdb"  # every page but the two meta pages
        _garble(target, 2 * 4096, target.stat().st_size - 2 * 4096)
    found = check(data)
    fixed = work / "repaired"
    started = time.perf_counter()
    repaired = repair(data, work / "backup", fixed)
    lost = missing(fixed, writes)
    seconds = time.perf_counter() - started
    kinds = sorted({k for k, _ in lost})
    return Row(f"corrupted {_NAMES[store]}", len(writes), len(lost), seconds,
               f"check named {found['damaged']}; repaired from the backup + "
               f"{repaired['from_live']}" + (f"; lost: {kinds}" if lost else ""),
               {"check": found, "repair": {k: v for k, v in repaired.items()
                                           if k != "check"}, "missing": lost})


_NAMES = {"episodes": "LanceDB fragment", "semantic": "SQLite page", "graph": "LMDB file"}

SCENARIOS: dict[str, Callable[[Path, int], Row]] = {
    "disk_full": disk_full,
    "kill_backup": kill_backup,
    "kill_import": kill_import,
    "kill_compact": kill_compact,
    "kill_forget": kill_forget,
    "corrupt_lance": lambda w, n: corrupted(w, n, "episodes"),
    "corrupt_sqlite": lambda w, n: corrupted(w, n, "semantic"),
    "corrupt_lmdb": lambda w, n: corrupted(w, n, "graph"),
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=400, help="episodes seeded first")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=None)
    parser.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick and args.episodes == parser.get_default("episodes"):
        args.episodes = 100
    import tempfile

    root = Path(args.work or tempfile.mkdtemp(prefix="grimoire-faults-"))
    print("| fault | acknowledged writes before it | writes lost (goal 0) | time to recover "
          "| note |\n|---|---|---|---|---|")
    for name in args.only or SCENARIOS:
        row = SCENARIOS[name](root / name, args.episodes)
        print(f"| {row.fault} | {row.acked} | {row.lost} | {row.recover_s:.2f} s | "
              f"{row.note} |", flush=True)
    if args.work is None:
        shutil.rmtree(root, ignore_errors=True)
