"""Curator phases on hand-built stores: compress, parameterize, promote, decay, demote and
prune (validation: test_curator_validate.py). Each test opens a real Grimoire in tmp_path
(frozen clock, hash embedder)."""

from __future__ import annotations

import dataclasses

import pytest

from curator.cycle.evidence import validate_predictions
from curator.cycle.learn import compress
from curator.cycle.lifecycle import decay, demote_and_prune
from curator.cycle.promote import parameterize, promote
from curator.cycle.run import run_cycle
from curator.views.playbook import select_entries
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, MS_PER_HOUR, FrozenClock
from grimoire.gate.decay import evidence_confidence
from grimoire.records import Category, DecayClass, EntryStatus, Provenance
from tests.curator.test_curator_support import (
    GAS_CLAIM,
    SWAP_CLAIM,
    deltas,
    finish_cycle,
    gas_obs,
    get,
    hour,
    put,
    start_cycle,
    swap,
    write,
)

# --- 2. compress -------------------------------------------------------------------------


def _losing_swaps(start: int, n: int) -> list[dict[str, object]]:
    return [swap(start + i * 60_000, "negative") for i in range(n)]


def test_coherent_regime_cluster_becomes_one_insight_through_the_gate(
        g: Grimoire, clock: FrozenClock) -> None:
    write(g, [*_losing_swaps(hour(1), 5), gas_obs(hour(1.5), 20.0, regime="bull")])
    clock.set(hour(2))
    cy = start_cycle(g)
    counts = compress(cy)
    assert counts["clusters"] == 1 and counts["admitted"] == 1 and counts["consolidated"] == 5
    insights = g.entry_list(category="insight")["entries"]
    assert len(insights) == 1
    made = insights[0]
    assert made["confidence"] == pytest.approx(0.45)  # mean episode confidence 0.5 × 0.9
    assert made["tags"][0] == "compressed" and made["market_regime"] == "high_vol"
    assert len(made["parent_episode_ids"]) == 5
    states = g.context.semantic.episode_states(made["parent_episode_ids"])
    assert all(s.consolidated for s in states.values())
    assert deltas(g, made["id"]) == ["compress"]
    finish_cycle(cy)
    # The same pattern next cycle restates the insight: merged (upvoted), not duplicated.
    write(g, _losing_swaps(hour(3), 5))
    clock.set(hour(4))
    counts = compress(start_cycle(g))
    assert counts["merged"] + counts["skipped"] == 1 and counts["admitted"] == 0
    assert len(g.entry_list(category="insight")["entries"]) == 1


def test_compress_needs_three_episodes_in_one_regime(g: Grimoire) -> None:
    write(g, [*_losing_swaps(hour(1), 2), swap(hour(1.5), "negative", regime="bull")])
    assert compress(start_cycle(g))["proposed"] == 0


# --- 3. parameterize and promote ---------------------------------------------------------


def test_active_cost_insight_yields_one_derived_heuristic(
        g: Grimoire, clock: FrozenClock) -> None:
    insight = put(g, claim=GAS_CLAIM, confidence=0.9, strategy=None)
    semantic = g.context.semantic
    held = [f"e{i}" for i in range(30)]
    g.context.writer.call(lambda: (
        semantic.record_evidence(insight.id, held, "confirm", cycle=1),
        semantic.record_evidence(insight.id, ["e-against"], "contradict", cycle=1)))
    counts = parameterize(start_cycle(g))
    assert counts["proposed"] == 1 and counts["heuristics"] == 1 and counts["admitted"] == 1
    rules = g.entry_list(category="heuristic")["entries"]
    assert len(rules) == 1
    rule = rules[0]
    # It starts from its parent's evidence (issue 11): the same counted episodes, ✓30 ✗1,
    # and the confidence they give (SPEC §13), not the bare one it was derived at.
    assert (rule["validated_count"], rule["contradicted_count"]) == (30, 1)
    assert semantic.count_evidence(rule["id"]) == (30, 1)
    assert rule["parent_entry_ids"] == [insight.id]
    assert rule["content"].startswith("When the time is between 02:00 and 04:00 UTC, prefer")
    assert rule["confidence"] == evidence_confidence(Provenance.SELF_LEARNED, 30, 1,
                                                     g.context.config.decay)
    # At 0.85 >= 0.7 and learnt here, it is promoted in the same cycle it is derived.
    assert rule["provenance"] == "self_learned" and rule["status"] == "active"
    assert counts["promoted"] == 1
    assert deltas(g, rule["id"]) == ["derive", "promote"]
    # Never derived twice from the same insight.
    assert parameterize(start_cycle(g))["proposed"] == 0
    # When the insight's numbers are edited, the rule's sentence follows.
    edited = dataclasses.replace(GAS_CLAIM, effect=5.0)
    g.context.writer.call(lambda: g.context.semantic.update_entry(
        dataclasses.replace(get(g, insight.id), claim=edited)))
    assert parameterize(start_cycle(g))["refreshed"] == 1
    assert "gas averages 5 gwei" in get(g, rule["id"]).content


def test_a_rule_the_gate_skipped_is_not_proposed_every_cycle(g: Grimoire) -> None:
    put(g, claim=GAS_CLAIM, confidence=0.9)
    put(g, category=Category.HEURISTIC, decay_class=DecayClass.REGIME_CONDITIONAL,
        content="When the time is between 02:00 and 04:00 UTC, prefer swap, rebalance or "
                "bridge because gas averages 6 gwei (vs 24 gwei otherwise; 40 episodes).")
    first = parameterize(start_cycle(g))
    assert first["proposed"] == 1 and first["skipped"] == 1
    again = parameterize(start_cycle(g))
    assert again["proposed"] == 0 and again["tried"] == 1


def test_outside_insights_must_be_validated_before_a_rule_is_derived(g: Grimoire) -> None:
    clade = put(g, claim=GAS_CLAIM, confidence=0.9, provenance=Provenance.CLADE)
    assert parameterize(start_cycle(g))["unvalidated"] == 1
    g.context.writer.call(lambda: g.context.semantic.update_entry(
        dataclasses.replace(clade, validated_count=1)))
    assert parameterize(start_cycle(g))["proposed"] == 1


def test_candidate_insights_are_not_parameterized(g: Grimoire) -> None:
    put(g, claim=GAS_CLAIM, confidence=0.9, status=EntryStatus.CANDIDATE)
    assert parameterize(start_cycle(g))["proposed"] == 0


def test_promotion_thresholds_in_the_store(g: Grimoire) -> None:
    cand = EntryStatus.CANDIDATE
    low_insight = put(g, confidence=0.59, status=cand)
    insight = put(g, confidence=0.6, status=cand)
    low_rule = put(g, category=Category.HEURISTIC, confidence=0.69, status=cand,
                   decay_class=DecayClass.REGIME_CONDITIONAL)
    rule = put(g, category=Category.HEURISTIC, confidence=0.7, status=cand,
               decay_class=DecayClass.REGIME_CONDITIONAL)
    outside = put(g, category=Category.HEURISTIC, confidence=0.95, status=cand,
                  provenance=Provenance.MARKETPLACE)
    warning = put(g, category=Category.WARNING, confidence=0.3, status=cand)
    counts = promote(start_cycle(g))
    assert counts["promoted"] == 3
    assert counts["insight"] == 1 and counts["heuristic"] == 1 and counts["warning"] == 1
    status = {e.id: get(g, e.id).status for e in (low_insight, insight, low_rule, rule,
                                                    outside, warning)}
    assert status == {low_insight.id: cand, insight.id: EntryStatus.ACTIVE, low_rule.id: cand,
                      rule.id: EntryStatus.ACTIVE, outside.id: cand,
                      warning.id: EntryStatus.ACTIVE}
    assert deltas(g, rule.id) == ["promote"]


def test_a_claim_the_distiller_established_is_listed_in_the_cycle_that_sees_it(
        g: Grimoire) -> None:
    """Issue 24: an insight (and an outcome heuristic) whose claim passed the learner's
    family-wise test goes into PLAYBOOK.md at the next cycle at ✓0, not after new
    episodes confirmed it (for a two-hour window, a day later); the same claim untested
    (p = 1) still waits for ✓."""
    cand = EntryStatus.CANDIDATE
    found = dataclasses.replace(GAS_CLAIM, p_value=1e-9)
    insight = put(g, confidence=0.5, status=cand, claim=found,
                  content="Gas averages 6 gwei between 02:00 and 04:00 UTC (vs 24).")
    win = put(g, category=Category.HEURISTIC, confidence=0.5, status=cand,
              claim=dataclasses.replace(SWAP_CLAIM, target="outcome:positive_rate",
                                        p_value=1e-5),
              content="Swaps in high_vol win more often (80% vs 35%).")
    untested = put(g, confidence=0.5, status=cand,
                   claim=dataclasses.replace(GAS_CLAIM, condition={"hour_window": [5, 7]}),
                   content="Gas averages 6 gwei between 05:00 and 07:00 UTC (vs 24).")
    run_cycle(g.context)
    assert get(g, insight.id).status is EntryStatus.ACTIVE
    assert get(g, insight.id).validated_count == 0
    assert get(g, win.id).status is EntryStatus.ACTIVE
    assert get(g, untested.id).status is cand
    listed = {e.id for e in select_entries(g.context)}
    assert {insight.id, win.id} <= listed and untested.id not in listed


# --- 4. decay ----------------------------------------------------------------------------


def test_decay_event_reports_this_cycles_decay(g: Grimoire, clock: FrozenClock) -> None:
    """Two tactical insights (7-day half-life) and a structural one; 7 days between cycles:
    the tactical ones halve, the structural one does not move."""
    a = put(g, confidence=0.8)
    b = put(g, confidence=0.4)
    put(g, confidence=0.9, decay_class=DecayClass.STRUCTURAL)
    cy = start_cycle(g)
    finish_cycle(cy)
    clock.advance(7 * MS_PER_DAY)
    counts = decay(start_cycle(g))
    assert counts["entries_decayed"] == 2
    assert counts["avg_confidence_before"] == pytest.approx((0.8 + 0.4 + 0.9) / 3, abs=1e-4)
    assert counts["avg_confidence_after"] == pytest.approx((0.4 + 0.2 + 0.9) / 3, abs=1e-4)
    event = g.events.recent(1, name="GrimoireDecay")[0]
    assert event["entries_decayed"] == 2
    assert event["avg_confidence_after"] == counts["avg_confidence_after"]
    # Decay is computed on read: the stored, evidence-based confidence is unchanged.
    assert get(g, a.id).confidence == 0.8 and get(g, b.id).confidence == 0.4


# --- 5. demote and prune -----------------------------------------------------------------


def test_demotion_takes_derived_rules_with_it(g: Grimoire) -> None:
    insight = put(g, claim=GAS_CLAIM, confidence=0.35)
    child = put(g, category=Category.HEURISTIC, confidence=0.9, tags=("derived",),
                parent_entry_ids=(insight.id,), decay_class=DecayClass.REGIME_CONDITIONAL)
    fine = put(g, category=Category.HEURISTIC, confidence=0.8,
               decay_class=DecayClass.REGIME_CONDITIONAL)
    counts = demote_and_prune(start_cycle(g))
    assert counts["demoted"] == 2
    assert get(g, insight.id).status is EntryStatus.DEMOTED
    assert get(g, child.id).status is EntryStatus.DEMOTED
    assert get(g, fine.id).status is EntryStatus.ACTIVE
    assert deltas(g, child.id) == ["demote"]
    history = g.context.semantic.list_curator_deltas(entry_id=child.id)[0]
    assert history.before == {"status": "active"}
    assert history.after is not None and "no longer active" in history.after["why"]


def test_prune_after_three_low_cycles_keeps_exempt_entries(
        g: Grimoire, clock: FrozenClock) -> None:
    low = dict(confidence=0.08, status=EntryStatus.DEMOTED)
    doomed = put(g, **low)  # type: ignore[arg-type]
    warning = put(g, category=Category.WARNING, **low)  # type: ignore[arg-type]
    structural = put(g, decay_class=DecayClass.STRUCTURAL, **low)  # type: ignore[arg-type]
    blood = put(g, is_bloodstain=True, **low)  # type: ignore[arg-type]
    for expected in (1, 2):
        assert demote_and_prune(start_cycle(g))["pruned"] == 0
        assert get(g, doomed.id).consecutive_low_confidence == expected
        clock.advance(MS_PER_HOUR)
    counts = demote_and_prune(start_cycle(g))
    assert counts["pruned"] == 1
    assert get(g, doomed.id).status is EntryStatus.ARCHIVED
    for kept in (warning, structural, blood):
        assert get(g, kept.id).status is EntryStatus.DEMOTED
        assert get(g, kept.id).consecutive_low_confidence == 3
    # The count stops at 3: an exempt entry at the floor is not rewritten every cycle.
    clock.advance(MS_PER_HOUR)
    demote_and_prune(start_cycle(g))
    assert get(g, warning.id).consecutive_low_confidence == 3
    assert get(g, warning.id).updated_at < clock.now
    # Archived: still readable by id, gone from lists and from similarity search.
    assert g.entry_get(doomed.id)["status"] == "archived"
    listed = {e["id"] for e in g.entry_list()["entries"]}
    assert doomed.id not in listed and warning.id in listed
    vector = g.context.semantic.get_embedding(doomed.id)
    assert vector is not None
    assert doomed.id not in {e.id for e, _ in g.context.semantic.knn(vector, 10)}
    assert deltas(g, doomed.id) == ["prune"]  # counter bumps are not audit noise


def test_a_good_cycle_resets_the_low_confidence_count(g: Grimoire) -> None:
    entry = put(g, confidence=0.5, status=EntryStatus.CANDIDATE, consecutive_low_confidence=2)
    demote_and_prune(start_cycle(g))
    assert get(g, entry.id).consecutive_low_confidence == 0


def test_low_quality_entries_are_pruned_unless_used(g: Grimoire) -> None:
    junk = put(g, quality_score=0.01, status=EntryStatus.CANDIDATE)
    used = put(g, quality_score=0.01, status=EntryStatus.CANDIDATE, access_count=5)
    counts = demote_and_prune(start_cycle(g))
    assert counts["pruned_low_quality"] == 1
    assert get(g, junk.id).status is EntryStatus.ARCHIVED
    assert get(g, used.id).status is EntryStatus.CANDIDATE


def test_full_cycle_promotes_then_later_demotes_out_of_the_playbook(
        g: Grimoire, clock: FrozenClock) -> None:
    rule = put(g, category=Category.HEURISTIC, confidence=0.75, status=EntryStatus.CANDIDATE,
               decay_class=DecayClass.REGIME_CONDITIONAL,
               content="When gas is below 10 gwei, do swap because fees are 40% lower")
    summary = run_cycle(g.context)
    assert summary["entries_promoted"] == 1
    short = rule.id[:8]
    text = g.context.config.playbook_path.read_text(encoding="utf-8")
    assert short in text and "do swap because fees" in text
    # 14-day half-life: after 14 days 0.375 < 0.4 → demoted, out of PLAYBOOK.md.
    clock.advance(14 * MS_PER_DAY)
    summary = run_cycle(g.context)
    assert summary["entries_demoted"] == 1
    assert get(g, rule.id).status is EntryStatus.DEMOTED
    assert short not in g.context.config.playbook_path.read_text(encoding="utf-8")
    assert deltas(g, rule.id) == ["promote", "demote"]


def test_a_metric_window_rule_is_confirmed_by_observations_alone(
        g: Grimoire, clock: FrozenClock) -> None:
    """Issue 11 item 3: a rule derived from a gas-window insight is confirmed when gas is
    again low in that window in new *observations*, though no action carries gas; and it
    starts from its parent's counted episodes, never from a bare confidence with ✓0."""
    insight = put(g, claim=GAS_CLAIM, confidence=0.6)
    child = put(g, category=Category.HEURISTIC, tags=("derived",), confidence=0.6,
                parent_entry_ids=(insight.id,), content="When 02-04, prefer swap")
    write(g, [gas_obs(hour(2.1) + i, 6.0) for i in range(6)]
          + [swap(hour(2.5) + i, "positive") for i in range(3)])  # actions: no gas metric
    clock.set(hour(5))
    validate_predictions(start_cycle(g))
    after = get(g, child.id)
    assert after.validated_count == 6 and after.confidence > child.confidence
    assert get(g, insight.id).validated_count == 6


def test_an_outcome_rate_is_judged_on_its_actions_pooled_and_counted_once(
        g: Grimoire, clock: FrozenClock) -> None:
    """Two losing high_vol swaps a cycle decide nothing (P(2 of 2 | 35%) = 0.12): the
    claim waits, its ledger empty, instead of drawing a coin-flip verdict. Pooled over the
    lookback, the losses decide it once they are many, and each swap counts once."""
    entry = put(g, category=Category.WARNING, claim=SWAP_CLAIM, confidence=0.6)
    for cycle in range(4):
        write(g, [swap(hour(1 + cycle) + i * 60_000, "negative") for i in range(2)])
        clock.set(hour(1.5 + cycle))
        cy = start_cycle(g)
        counts = validate_predictions(cy)
        finish_cycle(cy)
        if cycle == 0:
            assert counts["undecided"] == 1 and counts["right"] == 0
            assert g.context.semantic.count_evidence(entry.id) == (0, 0)
    after = get(g, entry.id)
    assert after.validated_count == 8 and after.contradicted_count == 0
    assert g.context.semantic.count_evidence(entry.id) == (8, 0)
    assert after.confidence > 0.6
