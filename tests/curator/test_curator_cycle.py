"""The whole curator cycle and its later phases: causal cross-reference, quarantine review,
hierarchical summaries, the region MDP, the cycle's bookkeeping, events and write batching."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import pytest

from curator.cycle.evidence import cross_reference_causal
from curator.cycle.learn import learn_module
from curator.cycle.lifecycle import review_quarantine
from curator.cycle.run import PHASES, run_cycle
from curator.cycle.state import Change, apply_changes
from curator.cycle.summaries import REGIONS_KEY, hierarchical_summaries
from curator.hierarchy.regions import RegionModel
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.gate.decay import evidence_confidence
from grimoire.records import Category, Claim, EntryStatus, GrimoireEntry, Provenance
from grimoire.stores.semantic.types import EdgeKind
from tests.curator.test_curator_support import (
    GAS_CLAIM,
    deltas,
    finish_cycle,
    gas_obs,
    get,
    hour,
    open_grimoire,
    put,
    start_cycle,
    swap,
    write,
)


def test_cycle_runs_every_phase_and_records_itself(g: Grimoire, clock: FrozenClock) -> None:
    write(g, [gas_obs(hour(1) + i * 60_000, 20.0 + i) for i in range(6)])
    clock.set(hour(2))
    summary = g.curator_run()
    assert list(summary["phases"]) == [name for name, _ in PHASES]
    assert summary["cycle"] == 1 and summary["episodes"] == 6
    for key in ("entries_pruned", "entries_promoted", "heuristics_proposed", "entries_demoted",
                "entries_decayed", "duration_ms"):
        assert isinstance(summary[key], int | float)
    stored = g.context.semantic.get_meta("last_curator_cycle")
    assert stored["cycle"] == 1 and stored["phases"]["compress"] == summary["phases"]["compress"]
    event = g.events.recent(1, name="CuratorCycleComplete")[0]
    assert {k: event[k] for k in ("entries_pruned", "entries_promoted",
                                  "heuristics_proposed")} == {
        "entries_pruned": summary["entries_pruned"],
        "entries_promoted": summary["entries_promoted"],
        "heuristics_proposed": summary["heuristics_proposed"]}
    # The window moves on: the next cycle sees only what arrived since.
    write(g, [gas_obs(hour(2.5), 22.0)])
    clock.set(hour(3))
    second = g.curator_run()
    assert second["cycle"] == 2 and second["episodes"] == 1
    assert g.context.config.playbook_path.exists()


def test_distil_phase_reports_whether_the_learning_core_is_installed(g: Grimoire) -> None:
    distil = g.curator_run()["phases"]["distil"]
    if learn_module() is None:
        assert distil["skipped"] == "not available: curator.learn.hook is not installed"
    else:
        assert "skipped" not in distil


def test_heartbeat_runs_the_cycle_every_n_ticks(tmp_path: Path, clock: FrozenClock) -> None:
    with open_grimoire(tmp_path / "d", clock, **{"curator.every_ticks": 3}) as g:
        ran = []
        for t in range(1, 7):
            clock.set(hour(t))
            summary = g.tick(now=hour(t), feed_episodes=[gas_obs(hour(t), 20.0)])
            ran.append("curator" in summary)
        assert ran == [False, False, True, False, False, True]
        assert g.context.semantic.get_meta("curator_state")["cycle"] == 2


def test_changes_apply_in_short_batches_on_the_writer(g: Grimoire) -> None:
    """20 changes with write_batch=8 are three writer jobs, each one transaction; a change
    is a function of the entry as stored when applied, not of the snapshot."""
    entries = [put(g, confidence=0.5) for _ in range(20)]
    cy = start_cycle(g)
    # Another writer bumps one entry after the snapshot was taken.
    bumped = dataclasses.replace(get(g, entries[0].id), validated_count=7)
    g.context.writer.call(lambda: g.context.semantic.update_entry(bumped))

    def plus(cur: GrimoireEntry) -> GrimoireEntry:
        return dataclasses.replace(cur, confidence=round(cur.confidence + 0.1, 6))

    before = g.context.writer.jobs_done
    applied = apply_changes(cy, [Change(e.id, "test", plus, why="t") for e in entries])
    assert len(applied) == 20
    assert g.context.writer.jobs_done - before == 3
    assert get(g, entries[0].id).validated_count == 7  # the concurrent write survived
    assert get(g, entries[0].id).confidence == pytest.approx(0.6)
    assert deltas(g, entries[0].id) == ["test"]


# --- 6. causal cross-reference -----------------------------------------------------------


def _alert(at: int) -> dict[str, Any]:
    return {"text": "Clade alert: whale moved 40,000 WETH", "type": "clade_alert",
            "timestamp": at, "importance": "notable"}


def _shift(at: int) -> dict[str, Any]:
    return {"text": "Regime shift to high_vol", "type": "regime_shift", "timestamp": at,
            "regime": "high_vol"}


def test_causal_links_gain_edges_and_evidence(g: Grimoire, clock: FrozenClock) -> None:
    claim = Claim({"event": "clade_alert", "within_ms": 600_000}, "event:regime_shift",
                  "higher", 0.85, 0.1, 5)
    link = put(g, category=Category.CAUSAL_LINK, claim=claim, confidence=0.6,
               content="A clade alert is followed by a regime shift within 10 min")
    minute = 60_000
    ids = write(g, [_alert(hour(1)), _shift(hour(1) + 3 * minute),
                    _alert(hour(2)), _shift(hour(2) + 5 * minute),
                    _alert(hour(3)), _shift(hour(3) + 2 * minute)])
    clock.set(hour(4))
    counts = cross_reference_causal(start_cycle(g))
    assert counts == {"links": 1, "occurrences": 3, "followed": 3, "edges": 3, "right": 1,
                      "wrong": 0}
    after = get(g, link.id)
    assert after.claim is not None and after.claim.support == 8
    assert after.validated_count == 3 and after.confidence == evidence_confidence(
        Provenance.SELF_LEARNED, 3, 0, g.context.config.decay)
    assert after.claim.effect == pytest.approx((0.85 * 5 + 3) / 8)  # the running rate
    edge = g.context.semantic.get_edge(ids[0], ids[1], EdgeKind.DISCOVERED)
    assert edge is not None and edge.lag_ms == 3 * minute and edge.evidence_count == 1
    assert edge.relationship == link.content
    assert deltas(g, link.id) == ["causal_check"]


def test_a_links_ticks_are_its_followed_occurrences_counted_once(
        g: Grimoire, clock: FrozenClock) -> None:
    """✓ / ✗ of a causal link are exactly the lead occurrences counted for it (issue 11):
    followed ones confirm, the others contradict, each once however often the lookback
    pools it again; the sentence's "k of n times" are the running totals, so ✓ never
    exceeds the k (nor the n) PLAYBOOK.md cites."""
    claim = Claim({"event": "clade_alert", "within_ms": 600_000}, "event:regime_shift",
                  "higher", 0.5, 0.05, 4)
    link = put(g, category=Category.CAUSAL_LINK, claim=claim, confidence=0.7,
               content="A clade alert is followed by a regime shift within 10 min")
    minute = 60_000
    write(g, [_alert(hour(1)), _shift(hour(1) + 3 * minute), _alert(hour(2)),
              _alert(hour(3)), _shift(hour(3) + 2 * minute), _alert(hour(4))])
    clock.set(hour(5))
    cy = start_cycle(g)
    cross_reference_causal(cy)
    finish_cycle(cy)
    after = get(g, link.id)
    assert (after.validated_count, after.contradicted_count) == (2, 2)
    assert g.context.semantic.count_evidence(link.id) == (2, 2)
    assert after.claim is not None and after.claim.support == 8
    assert after.claim.effect == pytest.approx(0.5)  # (2 + 2) of (4 + 4)
    for h in (6, 7):  # later cycles pool the same occurrences again: nothing new
        clock.set(hour(h))
        cy = start_cycle(g)
        cross_reference_causal(cy)
        finish_cycle(cy)
    again = get(g, link.id)
    assert (again.validated_count, again.contradicted_count) == (2, 2)
    assert again.claim == after.claim and again.confidence == after.confidence
    markdown = g.playbook_get()["markdown"]
    line = next(x for x in markdown.splitlines() if x.startswith(f"- `{link.id[:8]}"))
    assert "✓2 ✗2" in line and ": 4 of 8 times (50%" in line


# --- 7. quarantine -----------------------------------------------------------------------


def _quarantine(g: Grimoire, conflicting: GrimoireEntry, **fields: Any) -> GrimoireEntry:
    held = put(g, status=EntryStatus.CANDIDATE, content="gas is not cheap at night", **fields)
    g.context.writer.call(functools.partial(
        g.context.semantic.quarantine, held, reason="contradicts a confident entry",
        conflicting_id=conflicting.id))
    return held


def test_quarantine_released_when_the_conflict_weakens(g: Grimoire) -> None:
    strong = put(g, confidence=0.9, claim=GAS_CLAIM)
    held = _quarantine(g, strong)
    assert review_quarantine(start_cycle(g)) == {"reviewed": 1, "released": 0, "rejected": 0,
                                                  "held": 1}
    g.context.writer.call(lambda: g.context.semantic.update_entry(
        dataclasses.replace(get(g, strong.id), confidence=0.5)))
    assert review_quarantine(start_cycle(g))["released"] == 1
    assert get(g, held.id).status is EntryStatus.CANDIDATE
    assert deltas(g, held.id) == ["quarantine_hold", "quarantine_release"]


def test_quarantine_released_when_it_gains_support(g: Grimoire) -> None:
    strong = put(g, confidence=0.9)
    held = _quarantine(g, strong, validated_count=1)
    assert review_quarantine(start_cycle(g))["released"] == 1
    assert get(g, held.id).status is EntryStatus.CANDIDATE


def test_quarantine_rejected_after_n_reviews(g: Grimoire) -> None:
    strong = put(g, confidence=0.9)
    held = _quarantine(g, strong)
    outcomes = [review_quarantine(start_cycle(g)) for _ in range(3)]
    assert [o["held"] for o in outcomes] == [1, 1, 0] and outcomes[2]["rejected"] == 1
    assert get(g, held.id).status is EntryStatus.ARCHIVED
    assert g.context.semantic.get_quarantine(held.id).resolution == "rejected"  # type: ignore[union-attr]
    assert review_quarantine(start_cycle(g))["reviewed"] == 0


# --- 8. summaries and regions ------------------------------------------------------------


def _session(start: int, n: int = 6) -> list[dict[str, Any]]:
    return [swap(start + i * 60_000, "negative" if i % 3 else "positive") for i in range(n)]


def test_l1_each_cycle_l2_when_due_and_mus_pruning(tmp_path: Path, clock: FrozenClock) -> None:
    with open_grimoire(tmp_path / "d", clock, **{"curator.l2_every_cycles": 2}) as g:
        write(g, _session(hour(1)))
        clock.set(hour(2))
        cy = start_cycle(g)
        first = hierarchical_summaries(cy)
        finish_cycle(cy)
        assert first["l1"] == 1 and first["l2"] == 0
        l1 = next(e for e in g.entry_list(category="insight", kind="summary")["entries"]
                  if "summary:l1" in e["tags"])
        assert l1["tags"][:2] == ["summary", "summary:l1"] and l1["decay_class"] == "tactical"
        assert l1["provenance"] == "self_learned" and len(l1["parent_episode_ids"]) == 6
        assert deltas(g, l1["id"]) == ["summary_l1"]
        write(g, _session(hour(3)))
        clock.set(hour(4))
        cy = start_cycle(g)
        second = hierarchical_summaries(cy)
        finish_cycle(cy)
        assert second["l1"] == 1 and second["l2"] == 1
        l2 = next(e for e in g.entry_list(category="insight", kind="summary")["entries"]
                  if "summary:l2" in e["tags"])
        assert len(l2["parent_entry_ids"]) == 2 and len(l2["parent_episode_ids"]) == 12
        assert l2["content"].startswith("Chapter of 2 session summaries covering 12 episodes")
        # Eight days on, nothing retrieved them and the agent lives elsewhere: pruned.
        clock.advance(8 * MS_PER_DAY)
        write(g, [gas_obs(clock.now - i, 30.0, regime="bull") for i in range(200)])
        third = hierarchical_summaries(start_cycle(g))
        assert third["old_summaries"] == 3 and third["mus_pruned"] == 3
        assert g.entry_get(l2["id"])["status"] == "archived"



def test_summaries_are_retrievable_with_provenance_and_archived_entries_are_not(
        tmp_path: Path, clock: FrozenClock) -> None:
    """An L1 summary is an entry ``retrieve`` returns with its parent episodes in the item's
    provenance; once archived it is still readable with entry.get but no longer retrieved."""
    with open_grimoire(tmp_path / "d", clock) as g:
        write(g, _session(hour(1)))
        clock.set(hour(2))
        cy = start_cycle(g)
        assert hierarchical_summaries(cy)["l1"] == 1
        finish_cycle(cy)
        l1 = next(e for e in g.entry_list(category="insight", kind="summary")["entries"]
                  if "summary:l1" in e["tags"])
        query = {"query": l1["content"], "kinds": ["entry"], "mode": "browse"}
        (item,) = [i for i in g.retrieve(**query)["items"] if i["id"] == l1["id"]]
        assert item["provenance"]["parent_episode_ids"] == l1["parent_episode_ids"]
        assert len(item["provenance"]["parent_episode_ids"]) == 6
        g.context.writer.call(lambda: g.context.semantic.archive(l1["id"]))
        assert l1["id"] not in [i["id"] for i in g.retrieve(**query)["items"]]
        assert g.entry_get(l1["id"])["status"] == "archived"

def test_region_model_is_learned_and_persisted(g: Grimoire, clock: FrozenClock) -> None:
    write(g, [gas_obs(hour(1) + i * 60_000, 20.0) if i % 2 else
              swap(hour(1) + i * 60_000, "negative") for i in range(20)])
    clock.set(hour(2))
    summary = run_cycle(g.context)
    assert summary["phases"]["regions"]["episodes"] == 20
    model = RegionModel.from_dict(g.context.semantic.get_meta(REGIONS_KEY))
    assert model.fitted
    region = model.assign(g.context.episodes.vectors_for(
        [g.context.episodes.recent(1)[0].id])[0])
    assert 0.0 < model.p_success(region, "swap") < 1.0
    # Incremental: a cycle with no new episodes leaves the stored model alone.
    assert run_cycle(g.context)["phases"]["regions"]["episodes"] == 0
