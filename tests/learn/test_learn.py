"""The distill hook on real stores: gate, batched votes, edits, causal edges, consolidation."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from curator.claims import change_points
from curator.learn import hook as learn
from curator.learn.hook import distill, existing_claims, strategy_window
from curator.learn.reflexion_hook import reflexion_hook
from curator.learn.votes import VOTES_KEY
from grimoire.clock import MS_PER_DAY, MS_PER_HOUR, FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.methods.episode import count_for_distillation
from grimoire.methods.status import HEALTH_METRICS
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Category, Claim, EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EdgeKind
from playbook.render_text import entry_sentence
from tests.learn.learn_support import (
    T0,
    alert_stream,
    entries,
    gas_observations,
    open_grimoire,
    stored,
    write,
)

NOW = T0 + 3 * MS_PER_DAY


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[Grimoire]:
    grimoire = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder)
    yield grimoire
    grimoire.close()


def gas_entry(g: Grimoire) -> list[GrimoireEntry]:
    return [e for e in entries(g) if e.claim is not None
            and e.claim.target == "metric:gas_gwei" and "hour_window" in e.claim.condition]


def test_open_wires_the_learning_pipeline(g: Grimoire) -> None:
    """The facade connects the distill hook, the Reflexion hook and the health metrics.

    The distillation counter runs first; other areas add their own hooks after it.
    """
    ctx = g.context
    assert ctx.distill_hook is learn.distill
    assert ctx.post_write_hooks[0] is count_for_distillation
    assert reflexion_hook in ctx.post_write_hooks
    assert {"admission_rate", "average_quality", "retrieval_hit_rate",
            "heuristic_survival_rate", "grimoire_size"} <= set(HEALTH_METRICS)
    assert "llm_paths" not in ctx.extras  # no LLM configured: no LLM paths


def test_a_planted_window_is_admitted_at_half_confidence(g: Grimoire) -> None:
    """ADD goes through the gate: an entry with the claim, 0.5, a logged decision."""
    ids = write(g, gas_observations(1))
    summary = distill(g.context, None, NOW)
    assert summary["episodes"] == len(ids) and summary["ops"]["ADD"] >= 1
    assert summary["admitted"] >= 1
    (entry,) = gas_entry(g)
    assert entry.claim is not None and entry.claim.direction == "lower"
    assert entry.claim.condition["hour_window"] == [2, 4]
    assert entry.confidence == pytest.approx(0.5) and entry.status is EntryStatus.CANDIDATE
    assert entry.category is Category.INSIGHT and entry.strategy is None
    assert entry.parent_episode_ids and set(entry.parent_episode_ids) <= set(ids)
    log = g.context.semantic.list_admissions(limit=None)
    assert any(r.entry_id == entry.id and r.decision == "admitted" for r in log)
    states = g.context.semantic.episode_states(entry.parent_episode_ids)
    assert all(s.consolidated for s in states.values())
    assert summary["consolidated"] >= len(entry.parent_episode_ids)


def test_confirmation_is_a_batched_vote_not_a_confidence_change(g: Grimoire) -> None:
    """The second run UPVOTEs: pending_votes grows, the entry's confidence does not move."""
    write(g, gas_observations(2))
    distill(g.context, None, NOW)
    (entry,) = gas_entry(g)
    again = distill(g.context, None, NOW)
    assert again["ops"]["UPVOTE"] >= 1 and again["admitted"] == 0 and again["votes"] >= 1
    votes = g.context.semantic.get_meta(VOTES_KEY)
    assert votes[entry.id] == {"up": 1, "down": 0}
    assert stored(g, entry.id).confidence == pytest.approx(0.5)
    distill(g.context, None, NOW)
    assert g.context.semantic.get_meta(VOTES_KEY)[entry.id] == {"up": 2, "down": 0}


def test_reversed_evidence_is_a_pending_downvote(g: Grimoire) -> None:
    """Once the window turns expensive, the stored "cheap" claim gets a DOWNVOTE vote."""
    write(g, gas_observations(3))
    distill(g.context, None, NOW)
    (entry,) = gas_entry(g)
    later = NOW + 4 * MS_PER_DAY
    g.context.clock.set(later)  # type: ignore[attr-defined]
    write(g, gas_observations(4, start=NOW, hours=96, cheap_mean=60.0))
    cfg = g.context.config.replace(**{"distiller.window_episodes": 384})
    g.context.config = cfg
    summary = distill(g.context, None, later)
    assert summary["ops"]["DOWNVOTE"] >= 1
    assert g.context.semantic.get_meta(VOTES_KEY)[entry.id]["down"] >= 1
    assert stored(g, entry.id).confidence == pytest.approx(0.5)


def test_a_change_point_inside_the_window_silences_that_claim_family(g: Grimoire) -> None:
    """Once the curator has seen the world change under a claim, a learner whose window
    still starts before that change votes neither way on the claim's family (a mixed
    window is evidence for neither world); a change before the window does not silence it."""
    write(g, gas_observations(2))
    distill(g.context, None, NOW)
    (entry,) = gas_entry(g)
    assert entry.claim is not None
    family = change_points.family(entry.claim)
    start = strategy_window(g.context, None, g.context.config.distiller.window_episodes)[0]
    change_points.record(g.context, {family: start.timestamp - 1})
    distill(g.context, None, NOW)
    assert g.context.semantic.get_meta(VOTES_KEY)[entry.id] == {"up": 1, "down": 0}
    # On the last of the three days: the whole window straddles it, and the day since it
    # has seen 02:00-04:00 once only, too little to read an hour window from.
    change_points.record(g.context, {family: start.timestamp + 2 * MS_PER_DAY})
    summary = distill(g.context, None, NOW)
    assert summary["dropped"] >= 1 and summary["ops"]["UPVOTE"] == 0
    assert g.context.semantic.get_meta(VOTES_KEY)[entry.id] == {"up": 1, "down": 0}


def test_after_a_change_point_the_family_is_learned_from_the_episodes_since_it(
        g: Grimoire) -> None:
    """Gas was cheap at 02:00-04:00 for four days, then dear there (40 gwei vs 24) for two
    and a half. Over the whole window the hours average out (no finding either way); once
    the curator has recorded the change, the learner judges the family on the episodes
    since it alone and finds the new direction."""
    change = T0 + 4 * MS_PER_DAY
    write(g, gas_observations(5, hours=96))
    distill(g.context, None, change)
    (cheap,) = gas_entry(g)
    assert cheap.claim is not None and cheap.claim.direction == "lower"
    write(g, gas_observations(6, start=change, hours=60, cheap_mean=40.0))
    later = change + 60 * MS_PER_HOUR

    def dear() -> list[GrimoireEntry]:
        return [e for e in gas_entry(g) if e.claim is not None and e.claim.direction == "higher"]

    distill(g.context, None, later)
    assert dear() == []  # the whole window mixes the two worlds
    change_points.record(g.context, {change_points.family(cheap.claim): change})
    summary = distill(g.context, None, later)
    assert summary["ops"]["ADD"] >= 1
    (found,) = dear()
    assert found.claim is not None and found.claim.condition["hour_window"][0] in (1, 2, 3)
    assert set(found.parent_episode_ids) <= {
        e.id for e in g.context.episodes.recent(10_000, since=change)}


def test_claim_families_ignore_bounds_and_direction_but_not_target_or_strategy() -> None:
    base = Claim(condition={"hour_window": [2, 4]}, target="metric:gas_gwei",
                 direction="lower", effect=6.0, baseline=24.0, support=40)
    same = [dataclasses.replace(base, condition={"hour_window": [1, 4]}),
            dataclasses.replace(base, direction="higher", effect=42.0)]
    other = [dataclasses.replace(base, target="metric:slippage_bps"),
             dataclasses.replace(base, strategy="eth-dca"),
             dataclasses.replace(base, condition={"hour_window": [2, 4], "regime": "bull"})]
    assert {change_points.family(c) for c in same} == {change_points.family(base)}
    assert change_points.family(base) not in {change_points.family(c) for c in other}
    assert len({change_points.family(c) for c in other}) == 3
    # an outcome's negative and positive rate: one family (the same actions judge both)
    wins = Claim(condition={"action": "swap", "token_pair": "WETH/DAI"},
                 target="outcome:positive_rate", direction="higher", effect=0.9,
                 baseline=0.65, support=40)
    loses = dataclasses.replace(wins, target="outcome:negative_rate", effect=0.7,
                                baseline=0.35)
    assert change_points.family(wins) == change_points.family(loses)
    assert change_points.family(wins) != change_points.family(
        dataclasses.replace(wins, target="metric:pnl"))


def test_hour_windows_wait_for_their_window_to_come_round(g: Grimoire) -> None:
    """Until 02:00-04:00 has been seen on a second day, the cheap hours are one stretch of
    time, not a time of day: no hour-of-day finding. By 04:00 on the second day (not the
    third morning, as a rule of two whole days had it) there is."""
    write(g, gas_observations(10, hours=26))
    distill(g.context, None, NOW)
    assert gas_entry(g) == []
    write(g, gas_observations(10, start=T0 + 26 * 3_600_000, hours=3))
    distill(g.context, None, NOW)
    assert len(gas_entry(g)) == 1


def test_global_window_holds_only_strategy_less_episodes(g: Grimoire) -> None:
    obs = gas_observations(5, hours=6)
    acts = [{"type": "action", "text": f"swap {i}", "strategy": "dca", "outcome": "positive",
             "timestamp": T0 + i * 60_000, "actions": ["swap"]} for i in range(40)]
    write(g, obs + acts)
    window = strategy_window(g.context, None, 10_000)
    assert len(window) == len(obs) and all(e.strategy is None for e in window)
    assert [e.timestamp for e in window] == sorted(e.timestamp for e in window)
    assert len(strategy_window(g.context, None, 5)) == 5
    dca = strategy_window(g.context, "dca", 10_000)
    assert len(dca) == 40 and all(e.strategy == "dca" for e in dca)


def test_a_refined_window_edits_the_entry_with_a_curator_delta(g: Grimoire) -> None:
    """A stored [1, 4] window that the data place at [2, 4] is EDITed, and the edit audited."""
    write(g, gas_observations(6))
    distill(g.context, None, NOW)
    (entry,) = gas_entry(g)
    assert entry.claim is not None
    wide = Claim({"hour_window": [1, 4]}, "metric:gas_gwei", "lower", 9.0, 21.0, 30,
                 strategy=None)
    import dataclasses

    g.context.writer.call(lambda: g.context.semantic.update_entry(
        dataclasses.replace(entry, claim=wide, content="Gas is low 01:00-04:00 UTC.")))
    summary = distill(g.context, None, NOW)
    assert summary["edited"] == 1
    edited = stored(g, entry.id)
    assert edited.claim is not None and edited.claim.condition == {"hour_window": [2, 4]}
    assert edited.content != "Gas is low 01:00-04:00 UTC." and "02:00" in edited.content
    # its words are the sentence of the numbers it stores, as every view shows them
    assert edited.content == entry_sentence(edited)
    (delta,) = g.context.semantic.list_curator_deltas(entry_id=entry.id)
    assert delta.before is not None and delta.after is not None and delta.op == "edit"
    assert delta.before["content"] == "Gas is low 01:00-04:00 UTC."
    assert delta.after["claim"]["condition"] == {"hour_window": [2, 4]}


def test_a_causal_link_becomes_an_entry_and_discovered_edges(g: Grimoire) -> None:
    ids = write(g, alert_stream(7))
    summary = distill(g.context, None, NOW)
    links = [e for e in entries(g) if e.category is Category.CAUSAL_LINK]
    assert len(links) == 1 and summary["edges"] >= 1
    claim = links[0].claim
    assert claim is not None and claim.condition["event"] == "clade_alert"
    assert claim.target == "event:regime_shift_to_high_vol"
    edges = g.context.semantic.list_edges(kinds=[EdgeKind.DISCOVERED])
    cap = g.context.config.distiller.causal_edge_pairs
    assert 1 <= len(edges) <= cap and len(edges) == summary["edges"]
    by_id = {e.id: e for e in (g.context.episodes.get(i) for i in ids) if e is not None}
    for edge in edges:
        cause, effect = by_id[edge.cause_id], by_id[edge.effect_id]
        assert cause.type.value == "clade_alert" and effect.type.value == "regime_shift"
        assert edge.lag_ms == effect.timestamp - cause.timestamp and 0 < edge.lag_ms <= 600_000
        assert 0.5 < edge.weight <= 1.0 and edge.evidence_count == claim.support


def test_findings_that_restate_arithmetic_are_dropped(g: Grimoire) -> None:
    """P&L vs outcome never becomes an entry (a fee coupled with gas: ``without_echoes``)."""
    acts = []
    for i in range(120):
        gain = (-1) ** i * (5.0 + i % 7)
        acts.append({"type": "action", "text": f"swap {i}", "strategy": "s", "actions": ["swap"],
                     "outcome": "positive" if gain > 0 else "negative", "gain": gain,
                     "timestamp": T0 + i * 600_000,
                     "metrics": {"pnl": gain, "return_bps": gain * 3, "size_usd": 1000.0 + i}})
    write(g, acts)
    distill(g.context, "s", NOW)
    for entry in entries(g):
        assert entry.claim is not None
        band = entry.claim.condition.get("metric_band")
        assert not (band and band[0] in ("pnl", "return_bps"))


def test_existing_claims_skip_archived_and_keep_quarantined(g: Grimoire) -> None:
    write(g, gas_observations(8))
    distill(g.context, None, NOW)
    (entry,) = gas_entry(g)
    assert [c.entry_id for c in existing_claims(g.context, None, NOW)] == [entry.id]
    assert existing_claims(g.context, "other", NOW) == []
    g.context.writer.call(lambda: g.context.semantic.quarantine(entry, reason="test"))
    assert [c.entry_id for c in existing_claims(g.context, None, NOW)] == [entry.id]
    g.context.writer.call(lambda: g.context.semantic.archive(entry.id))
    assert existing_claims(g.context, None, NOW) == []


def test_the_heartbeat_runs_the_hook_per_due_strategy(tmp_path: Path,
                                                      hash_embedder: HashEmbedder) -> None:
    clock = FrozenClock(NOW)
    with open_grimoire(tmp_path, clock, hash_embedder,
                       changes={"distiller.every_episodes": 100}) as g:
        summary = g.tick(now=NOW, feed_episodes=gas_observations(9, hours=60))
        (run,) = summary["distilled"]
        assert run["strategy"] is None and run["episodes"] == 240
        assert run["admitted"] >= 1 and run["ms"] > 0
        health = g.status()["health"]["learning"]
        assert health["runs"] == 1 and health["last"]["global"]["episodes"] == 240
