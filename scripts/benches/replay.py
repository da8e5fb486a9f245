"""Replayed time: does the curator learn the same from a backfilled history as from a live one?

Usage: python scripts/bench_curator.py --part replay [--days 21] [--seed 1]
                           [--clock wall|data|both] [--show] [--keep DIR] [--quick]

Issue 24. An agent that backfills its history (or replays a log) writes each episode with
its own past timestamp, in daily batches, and runs the curator after every batch; its clock
(the wall clock) is then far ahead of the episodes. This script writes one generated stream
(seeded, ``tests/curator/replay_support.py``: a daily gas window, a trade-size band that
loses, a bear-market warning, an outcome that reverses on the middle day) that way and, with
``--clock data``, again with the clock set to the end of each day's batch (the clock and the
episodes agree, as in the live demo).

Per day it prints, for each planted regularity, the entries whose structured claim states
it (any status but archived): how many, the oldest one's status, ✓ / ✗ and effective
confidence, and whether PLAYBOOK.md lists it; at the end the number of entries ever made
per planted claim, the live candidates, and the largest confidence reached one cycle after
an entry appeared. Nothing is asserted; the tests pin the mechanisms.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benches import apply_quick
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.gate.decay import effective_confidence
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Category, EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.curator.replay_support import PLANTED, WALL, day_episodes


def _entries(g: Grimoire) -> list[GrimoireEntry]:
    statuses = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED,
                EntryStatus.QUARANTINED, EntryStatus.ARCHIVED)
    return g.context.semantic.list_entries(EntryFilter(statuses=statuses),
                                           order="created_at", limit=None)


def run(days: int, seed: int, clock_mode: str, show: bool, keep: Path | None) -> dict[str, Any]:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix=f"replay-{clock_mode}-"))
    clock = FrozenClock(WALL)
    config = Config().replace(**{"curator.every_ticks": 1_000_000})
    ever: dict[str, set[str]] = {name: set() for name in PLANTED}
    seen_at: dict[str, int] = {}
    first_cycle_conf: list[float] = []
    missing_days: dict[str, int] = {name: 0 for name in PLANTED}
    first_day: dict[str, int | None] = {name: None for name in PLANTED}
    print(f"\n== clock {clock_mode}: {days} days, seed {seed} ==")
    try:
        with Grimoire.open(root / "data", config=config, clock=clock,
                           embedder=HashEmbedder(dim=384)) as g:
            for day in range(days):
                batch = day_episodes(day, days, rng)
                if clock_mode == "data":
                    clock.set(batch[-1]["timestamp"] + 60_000)
                else:
                    clock.advance(30_000)  # the wall clock moves on a little per batch
                g.episode_write_batch(batch)
                g.curator_run()
                # the data's time, as the cycle saw it (the clock is the wall clock here)
                now = int(g.context.semantic.get_meta("last_curator_cycle", {})["now"])
                cfg = g.context.config.decay
                playbook = g.playbook_get().get("markdown", "")
                row = [f"day {day + 1:2d}"]
                all_entries = _entries(g)
                for e in all_entries:
                    if e.id not in seen_at:
                        seen_at[e.id] = day
                    elif seen_at[e.id] == day - 1 and e.status is not EntryStatus.ARCHIVED:
                        first_cycle_conf.append(e.confidence)
                for name, test in PLANTED.items():
                    hits = [e for e in all_entries if e.claim is not None and test(e.claim)]
                    ever[name].update(e.id for e in hits)
                    live = [e for e in hits if e.status is not EntryStatus.ARCHIVED]
                    if not live:
                        if first_day[name] is not None:
                            missing_days[name] += 1
                        row.append(f"{name}: -")
                        continue
                    if first_day[name] is None:
                        first_day[name] = day + 1
                    e = min(live, key=lambda x: (x.status is not EntryStatus.ACTIVE,
                                                 x.created_at))
                    listed = "P" if e.id[-6:] in playbook else " "
                    row.append(f"{name}: {len(live)}x {e.status.value[:4]} "
                               f"✓{e.validated_count} ✗{e.contradicted_count} "
                               f"{effective_confidence(e, now, cfg):.2f}{listed}")
                if show or day == days - 1 or day % 5 == 4:
                    print("  ".join(row))
            final = _entries(g)
            candidates = sum(e.status is EntryStatus.CANDIDATE for e in final)
            summaries = sum(e.status is EntryStatus.CANDIDATE and "summary" in e.tags
                            for e in final)
            warnings = [e for e in final if e.category is Category.WARNING
                        and e.status is EntryStatus.ACTIVE]
            zero = sum(e.validated_count == 0 and e.contradicted_count == 0 for e in warnings)
            if keep is not None:
                shutil.copytree(root / "data", keep / clock_mode, dirs_exist_ok=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "entries_per_claim": {k: len(v) for k, v in ever.items()},
        "first_day": first_day, "days_missing_after_first": missing_days,
        "candidates": candidates, "candidate_summaries": summaries,
        "active_warnings": len(warnings), "active_warnings_with_no_evidence": zero,
        "max_confidence_one_cycle_after_creation": round(max(first_cycle_conf, default=0.0), 3),
    }
    for key, value in result.items():
        print(f"  {key}: {value}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=21)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "data", "both"), default="both")
    parser.add_argument("--show", action="store_true", help="print every day's row")
    parser.add_argument("--keep", type=Path, default=None, help="copy the stores here")
    parser.add_argument("--quick", action="store_true", help="7 days")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"days": 7})
    modes = ("wall", "data") if args.clock == "both" else (args.clock,)
    for mode in modes:
        run(args.days, args.seed, mode, args.show, args.keep)
    return 0
