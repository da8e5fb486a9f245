"""Promotion, demotion and prune rules (cycle.transitions) and derived rules (cycle.derive)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from curator.cycle.derive import derive_rule
from curator.cycle.transitions import (
    demotion_reason,
    is_established,
    is_reversed,
    low_confidence_count,
    promotion_reason,
    prune_reason,
    reversal_reason,
)
from grimoire.config import CuratorConfig, DistillerConfig
from grimoire.records import (
    Category,
    Claim,
    DecayClass,
    EntryStatus,
    GrimoireEntry,
    Provenance,
)
from tests.curator.test_curator_support import GAS_CLAIM

CFG = CuratorConfig()


def entry(**fields: Any) -> GrimoireEntry:
    base = GrimoireEntry(
        id="e1", category=Category.INSIGHT, content="x", confidence=0.5, quality_score=0.5,
        decay_class=DecayClass.TACTICAL, provenance=Provenance.SELF_LEARNED, created_at=0,
        last_accessed_at=0, status=EntryStatus.CANDIDATE)
    return dataclasses.replace(base, **fields)


def test_promotion_thresholds_per_category() -> None:
    assert promotion_reason(entry(), 0.59, CFG) is None
    assert promotion_reason(entry(), 0.6, CFG) is not None
    heuristic = entry(category=Category.HEURISTIC)
    assert promotion_reason(heuristic, 0.69, CFG) is None
    assert promotion_reason(heuristic, 0.7, CFG) is not None
    link = entry(category=Category.CAUSAL_LINK)
    assert promotion_reason(link, 0.6, CFG) is not None
    assert promotion_reason(entry(status=EntryStatus.ACTIVE), 0.9, CFG) is None
    assert promotion_reason(entry(status=EntryStatus.ARCHIVED), 0.9, CFG) is None
    assert promotion_reason(entry(tags=("summary", "summary:l1")), 0.9, CFG) is None


def test_outside_heuristics_need_a_local_validation() -> None:
    """Seed 004: heuristics are never promoted straight from outside knowledge."""
    clade = entry(category=Category.HEURISTIC, provenance=Provenance.CLADE)
    assert promotion_reason(clade, 0.95, CFG) is None
    assert promotion_reason(dataclasses.replace(clade, validated_count=1), 0.95, CFG) is not None
    replicant = entry(category=Category.HEURISTIC, provenance=Provenance.REPLICANT)
    assert promotion_reason(replicant, 0.7, CFG) is not None


def test_warnings_are_listed_at_any_confidence_once() -> None:
    warning = entry(category=Category.WARNING)
    assert promotion_reason(warning, 0.3, CFG) is not None
    assert promotion_reason(warning, 0.05, CFG) is None  # faded below the prune line
    demoted = dataclasses.replace(warning, status=EntryStatus.DEMOTED)
    assert promotion_reason(demoted, 0.3, CFG) is None
    assert promotion_reason(demoted, 0.4, CFG) is not None


def test_a_claim_its_learners_test_established_is_listed_when_new() -> None:
    """Issue 24: the distiller's family-wise test already established the claim; a second
    wait for ✓ (a cycle, or a day for a two-hour window to come round) is not required of
    it, whatever its category. Evidence against it still keeps it out, and once demoted
    it comes back at its category's threshold."""
    found = dataclasses.replace(GAS_CLAIM, p_value=1e-6)
    insight = entry(claim=found)
    assert is_established(insight, 0.01)
    assert promotion_reason(insight, 0.5, CFG) is None  # without the test's word: a wait
    assert promotion_reason(insight, 0.5, CFG, established=True) is not None
    heuristic = entry(category=Category.HEURISTIC, claim=found)
    assert promotion_reason(heuristic, 0.5, CFG, established=True) is not None
    # its evidence turned against it: not listed
    assert promotion_reason(insight, 0.39, CFG, established=True) is None
    demoted = entry(claim=found, status=EntryStatus.DEMOTED)
    assert promotion_reason(demoted, 0.5, CFG, established=True) is None
    assert promotion_reason(demoted, 0.6, CFG, established=True) is not None
    # what no learner's test found is not established
    assert not is_established(entry(claim=GAS_CLAIM), 0.01)  # p = 1: no test
    assert not is_established(entry(claim=dataclasses.replace(GAS_CLAIM, p_value=0.02)), 0.01)
    assert not is_established(entry(claim=found, provenance=Provenance.CLADE), 0.01)
    assert not is_established(entry(), 0.01)  # no claim (a compressed cluster)
    assert not is_established(entry(claim=found, tags=("summary",)), 0.01)


def test_demotion_below_the_active_threshold() -> None:
    active = entry(status=EntryStatus.ACTIVE, category=Category.HEURISTIC)
    assert demotion_reason(active, 0.4, CFG) is None
    assert demotion_reason(active, 0.39, CFG) is not None
    assert demotion_reason(dataclasses.replace(active, status=EntryStatus.CANDIDATE), 0.1,
                           CFG) is None


def test_warnings_leave_only_when_contradicted_or_faded() -> None:
    warning = entry(status=EntryStatus.ACTIVE, category=Category.WARNING)
    assert demotion_reason(warning, 0.3, CFG) is None
    assert demotion_reason(dataclasses.replace(warning, contradicted_count=1), 0.3,
                           CFG) is not None
    assert demotion_reason(warning, 0.09, CFG) is not None


def test_derived_rules_follow_their_insight() -> None:
    child = entry(status=EntryStatus.ACTIVE, category=Category.HEURISTIC, tags=("derived",),
                  parent_entry_ids=("p",))
    assert demotion_reason(child, 0.9, CFG, parent_active=False) is not None
    assert demotion_reason(child, 0.9, CFG, parent_active=True) is None
    waiting = dataclasses.replace(child, status=EntryStatus.CANDIDATE)
    assert promotion_reason(waiting, 0.9, CFG, parent_active=False) is None


def test_a_reversed_claim_leaves_at_any_confidence_and_is_not_listed_again() -> None:
    """A claim the episodes decisively reversed (its valid time ended) is demoted by that
    alone, at any confidence and in any category, and never promoted while it stays so; a
    summary's ``valid_until`` (the last episode it covers) is no reversal."""
    for category in (Category.INSIGHT, Category.HEURISTIC, Category.WARNING):
        active = entry(category=category, status=EntryStatus.ACTIVE, valid_until=7_200_000)
        assert is_reversed(active)
        reason = reversal_reason(active)
        assert reason is not None and "1970-01-01 02:00" in reason
        assert demotion_reason(active, 0.99, CFG) == reason
        demoted = dataclasses.replace(active, status=EntryStatus.DEMOTED)
        assert reversal_reason(demoted) is None
        assert promotion_reason(demoted, 0.99, CFG) is None
        assert promotion_reason(dataclasses.replace(demoted, valid_until=None), 0.99,
                                CFG) is not None
    summary = entry(status=EntryStatus.ACTIVE, tags=("summary", "summary:l1"), valid_until=5)
    assert not is_reversed(summary) and reversal_reason(summary) is None


def test_prune_after_three_low_cycles_with_exemptions() -> None:
    low = entry(status=EntryStatus.DEMOTED)
    counts = []
    for _ in range(3):
        n = low_confidence_count(low, 0.08, CFG)
        counts.append(n)
        low = dataclasses.replace(low, consecutive_low_confidence=n)
    assert counts == [1, 2, 3]
    assert prune_reason(low, 2, CFG) is None
    assert prune_reason(low, 3, CFG) is not None
    assert low_confidence_count(low, 0.2, CFG) == 0  # one good cycle resets the count
    for exempt in (dict(decay_class=DecayClass.STRUCTURAL), dict(category=Category.WARNING),
                   dict(is_bloodstain=True)):
        assert prune_reason(dataclasses.replace(low, **exempt), 9, CFG) is None  # type: ignore[arg-type]


def test_low_quality_prune() -> None:
    junk = entry(quality_score=0.04, access_count=1)
    assert prune_reason(junk, 0, CFG) is not None
    assert prune_reason(dataclasses.replace(junk, access_count=2), 0, CFG) is None
    assert prune_reason(dataclasses.replace(junk, quality_score=0.05), 0, CFG) is None


@given(category=st.sampled_from(list(Category)),
       status=st.sampled_from([EntryStatus.CANDIDATE, EntryStatus.ACTIVE,
                               EntryStatus.DEMOTED]),
       provenance=st.sampled_from(list(Provenance)), eff=st.floats(0.05, 0.99),
       validated=st.integers(0, 3), contradicted=st.integers(0, 3),
       derived=st.booleans(), parent_active=st.booleans(), ended=st.booleans(),
       established=st.booleans())
def test_promotion_and_demotion_never_both_fire(
        category: Category, status: EntryStatus, provenance: Provenance, eff: float,
        validated: int, contradicted: int, derived: bool, parent_active: bool,
        ended: bool, established: bool) -> None:
    """Promoting an entry and then judging it for demotion at the same confidence never
    demotes it again: no flapping within a cycle."""
    e = entry(category=category, status=status, provenance=provenance,
              validated_count=validated, contradicted_count=contradicted,
              tags=("derived",) if derived else (), parent_entry_ids=("p",) if derived else (),
              valid_until=5 if ended else None)
    if promotion_reason(e, eff, CFG, parent_active=parent_active,
                        established=established) is not None:
        promoted = dataclasses.replace(e, status=EntryStatus.ACTIVE)
        assert demotion_reason(promoted, eff, CFG, parent_active=parent_active) is None


# --- derived rules -------------------------------------------------------------------------

DCFG = DistillerConfig()


def test_cheap_cost_window_becomes_a_heuristic() -> None:
    insight = entry(status=EntryStatus.ACTIVE, claim=GAS_CLAIM)
    rule = derive_rule(insight, DCFG)
    assert rule is not None and rule.category is Category.HEURISTIC
    assert rule.content == (
        "When the time is between 02:00 and 04:00 UTC, prefer swap, rebalance or bridge "
        "because gas averages 6 gwei (vs 24 gwei otherwise: 75% lower; 40 episodes).")
    assert rule.tags[0] == "derived" and "metric:gas_gwei" in rule.tags


def test_expensive_cost_window_and_bad_gain_become_warnings() -> None:
    dear = dataclasses.replace(GAS_CLAIM, direction="higher", effect=42.0)
    rule = derive_rule(entry(claim=dear), DCFG)
    assert rule is not None and rule.category is Category.WARNING
    assert rule.content.startswith("Avoid swap, rebalance or bridge when the time is between "
                                   "02:00 and 04:00 UTC because gas averages 42 gwei")
    pnl = Claim({"action": "swap", "regime": "high_vol"}, "metric:pnl", "lower", -4.0, 3.0, 12)
    rule = derive_rule(entry(claim=pnl), DCFG)
    assert rule is not None and rule.category is Category.WARNING
    assert rule.actions == ("swap",)
    assert rule.content.startswith("Avoid swap when the regime is high_vol because pnl")
    good = dataclasses.replace(pnl, effect=9.0, direction="higher")
    rule = derive_rule(entry(claim=good), DCFG)
    assert rule is not None and rule.category is Category.HEURISTIC


def test_insights_that_do_not_parameterize() -> None:
    volume = Claim({"hour_window": [2, 4]}, "metric:volume", "higher", 3.0, 2.0, 9)
    assert derive_rule(entry(claim=volume), DCFG) is None  # neither a cost nor a gain
    odd = Claim({"mood": "calm"}, "metric:gas_gwei", "lower", 3.0, 20.0, 9)
    assert derive_rule(entry(claim=odd), DCFG) is None  # a condition we cannot phrase
    assert derive_rule(entry(), DCFG) is None  # no claim
    assert derive_rule(entry(claim=GAS_CLAIM, category=Category.WARNING), DCFG) is None
    assert derive_rule(entry(claim=GAS_CLAIM, tags=("summary",)), DCFG) is None
    cfg = dataclasses.replace(DCFG, metric_actions={})
    assert derive_rule(entry(claim=GAS_CLAIM), cfg) is None  # no action to name
