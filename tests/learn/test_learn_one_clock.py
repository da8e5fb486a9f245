"""The learner dates what it writes on the curator's clock, which never runs backwards.

Episodes backfilled behind the last curator cycle (an agent replaying a log, a feed that
delivers late) are learned at that cycle's data time at the earliest: an entry learned
from them is not made already decayed, and a change the learner records under the
completed cycle's number is never dated before that cycle, so the owner's views never show
a later cycle dated before an earlier one."""

from __future__ import annotations

from pathlib import Path

from curator.learn.hook import distill
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.models.embedders import HashEmbedder
from tests.learn.learn_support import T0, entries, gas_observations, open_grimoire, write

LATER = T0 + 30 * MS_PER_DAY  # the data time the curator's last cycle ran at
WALL = T0 + 400 * MS_PER_DAY  # the clock reads much later still


def test_a_backfill_behind_the_last_cycle_is_learned_at_that_cycles_time(
        tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    clock = FrozenClock(WALL)
    with open_grimoire(tmp_path, clock, hash_embedder) as g:
        write(g, [{"type": "observation", "text": "a quiet day", "timestamp": LATER}])
        cycle = g.curator_run()
        assert cycle["cycle"] == 1 and cycle["now"] == LATER
        # 72 h of one strategy's observations starting at T0, delivered after the cycle
        backfill = [{**p, "strategy": "s1"} for p in gas_observations(1)]
        assert max(p["timestamp"] for p in backfill) < LATER
        write(g, backfill)
        summary = distill(g.context, "s1", clock.now)
        assert summary["admitted"] >= 1
        learned = [e for e in entries(g) if e.claim is not None]
        assert learned
        for entry in learned:
            assert LATER <= entry.created_at < WALL
        admissions = g.context.semantic.list_admissions(limit=None)
        assert admissions and all(LATER <= a.decided_at < WALL for a in admissions)
        deltas = g.context.semantic.list_curator_deltas(cycle=1)
        assert all(d.created_at >= LATER for d in deltas)
