"""Data time (SPEC §13, issue 24): the curator judges, decays, archives and re-finds on the
episodes' own timestamps, so a history backfilled with its past timestamps (the clock far
ahead of them) is learned exactly as the same history lived (the clock agreeing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator.cycle.evidence import validate_predictions
from grimoire.clock import FrozenClock
from grimoire.gate.decay import effective_confidence
from grimoire.records import EntryStatus
from grimoire.stores.semantic.types import EntryFilter
from tests.curator.replay_support import WALL, replay
from tests.curator.test_curator_support import (
    GAS_CLAIM,
    finish_cycle,
    gas_obs,
    get,
    hour,
    open_grimoire,
    put,
    start_cycle,
    write,
)

DAYS = 7


def _learned(path: Path, live: bool) -> tuple[list[int], list[tuple[Any, ...]]]:
    clock = FrozenClock()
    with open_grimoire(path, clock) as g:
        times = replay(g, clock, DAYS, live=live)
        found = g.context.semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)),
                                                limit=None)
        cfg = g.context.config.decay
        rows = sorted(
            (e.claim.key if e.claim else e.content, e.category.value, e.status.value,
             e.validated_count, e.contradicted_count, round(e.confidence, 6),
             round(effective_confidence(e, times[-1], cfg), 6))
            for e in found)
    return times, rows


def test_a_backfilled_history_is_learned_as_the_lived_one(tmp_path: Path) -> None:
    live_times, live = _learned(tmp_path / "live", live=True)
    replay_times, replayed = _learned(tmp_path / "replayed", live=False)
    # each cycle runs at the newest episode it has seen, not at the clock's reading
    assert replay_times == live_times
    assert all(t < WALL for t in replay_times)
    assert any(row[3] or row[4] for row in live)  # something was judged at all
    assert replayed == live


def test_entries_learned_from_a_replay_start_their_decay_at_the_data_time(
        tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as g:
        times = replay(g, clock, 4, live=False)
        learned = [e for e in g.context.semantic.list_entries(
            EntryFilter(statuses=tuple(EntryStatus)), limit=None)]
    assert learned
    for entry in learned:
        assert entry.created_at <= times[-1] < WALL
        assert entry.last_accessed_at <= times[-1]


def test_a_claim_its_new_episodes_cannot_decide_is_judged_on_all_its_pending_ones(
        tmp_path: Path) -> None:
    """Two matching episodes a cycle (a daily two-hour window, the curator run once a day)
    are fewer than one prediction needs: the claim is judged on every matching episode
    since its evidence was last counted, pooled, and each is counted once."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as g:
        insight = put(g, claim=GAS_CLAIM, confidence=0.5, valid_from=hour(0))
        counted = []
        for day in range(4):
            write(g, [*(gas_obs(hour(h, day), 6.0 + h / 10) for h in (2.5, 3.5)),
                      *(gas_obs(hour(h, day), 24.0) for h in (8, 12, 16, 20))])
            cy = start_cycle(g, now=hour(20, day))  # the data's time, as run_cycle's
            validate_predictions(cy)
            finish_cycle(cy)
            found = get(g, insight.id)
            counted.append((found.validated_count, found.contradicted_count))
    assert counted[0] == (0, 0)  # two episodes decide nothing yet
    assert counted[1] == (4, 0)  # the two pending ones and today's two, pooled
    assert counted[-1][0] == 8 and counted[-1][1] == 0  # each episode counted once


def test_the_owner_views_read_a_replayed_store_at_its_data_time(tmp_path: Path) -> None:
    """explain, entry.get and entry.list show each entry's effective confidence at the
    data's own time (the newest episode), as the curator's cycles judged
    it, not decayed by the 300-odd days between the replayed history and the clock."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as g:
        times = replay(g, clock, 4, live=False)
        assert clock.now - times[-1] > 200 * 86_400_000  # the clock reads a year later
        cfg = g.context.config.decay
        learned = g.context.semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)),
                                                  limit=None)
        entry = max(learned, key=lambda e: (e.validated_count, e.id))
        at_data = round(effective_confidence(entry, times[-1], cfg), 4)
        assert at_data > round(effective_confidence(entry, clock.now, cfg), 4)
        explained = g.entry_explain(id=entry.id)
        assert explained["now"] == times[-1]
        assert explained["decay"]["effective_confidence"] == at_data
        assert g.entry_get(id=entry.id)["effective_confidence"] == at_data
        listed = {e["id"]: e for e in g.entry_list(limit=1000, kind="all")["entries"]}
        assert listed[entry.id]["effective_confidence"] == at_data
