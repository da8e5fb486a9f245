"""Confidence and decay math (SPEC §4, §11): exact values, edge cases and invariants."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.clock import MS_PER_DAY, MS_PER_HOUR
from grimoire.config import DecayConfig
from grimoire.errors import ConfigError, ValidationError
from grimoire.gate import decay
from grimoire.records import Category, DecayClass, GrimoireEntry, Provenance

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
CFG = DecayConfig()


def make_entry(**overrides: Any) -> GrimoireEntry:
    values: dict[str, Any] = {
        "id": "e1",
        "category": Category.INSIGHT,
        "content": "gas is cheap between 02:00 and 04:00 UTC",
        "confidence": 0.8,
        "quality_score": 0.6,
        "decay_class": DecayClass.TACTICAL,
        "provenance": Provenance.SELF_LEARNED,
        "created_at": T0,
        "last_accessed_at": T0,
    }
    values.update(overrides)
    return GrimoireEntry(**values)


# --- half-lives -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decay_class", "days"),
    [(DecayClass.TACTICAL, 7), (DecayClass.REGIME_CONDITIONAL, 14), (DecayClass.EPHEMERAL, 1)],
)
def test_class_half_lives_match_the_spec_table(decay_class: DecayClass, days: float) -> None:
    assert decay.half_life_ms(make_entry(decay_class=decay_class), CFG) == days * MS_PER_DAY


def test_structural_entries_have_no_half_life() -> None:
    assert decay.half_life_ms(make_entry(decay_class=DecayClass.STRUCTURAL), CFG) is None


def test_warning_doubles_the_half_life_to_28_days() -> None:
    warning = make_entry(category=Category.WARNING, decay_class=DecayClass.REGIME_CONDITIONAL)
    assert decay.half_life_ms(warning, CFG) == 28 * MS_PER_DAY


@pytest.mark.parametrize(
    ("overrides", "factor"),
    [
        ({"is_bloodstain": True}, 3.0),
        ({"dream_validated": True}, 2.0),
        ({"quality_score": 0.29}, 0.5),
        ({"quality_score": 0.3}, 1.0),  # the threshold is strict: 0.3 is not low quality
        ({"strength": 5.0}, 1.0),  # strength is applied in retention, not in the half-life
    ],
)
def test_each_multiplier(overrides: dict[str, Any], factor: float) -> None:
    assert decay.half_life_ms(make_entry(**overrides), CFG) == 7 * MS_PER_DAY * factor


def test_multipliers_compound() -> None:
    entry = make_entry(
        category=Category.WARNING,
        decay_class=DecayClass.REGIME_CONDITIONAL,
        is_bloodstain=True,
        dream_validated=True,
        quality_score=0.1,
    )
    assert decay.half_life_ms(entry, CFG) == 14 * 2 * 3 * 2 * 0.5 * MS_PER_DAY


def test_half_lives_come_from_config() -> None:
    cfg = DecayConfig(half_life_days={"structural": None, "regime_conditional": 21.0,
                                      "tactical": 3.0, "ephemeral": 0.5})
    assert decay.half_life_ms(make_entry(), cfg) == 3 * MS_PER_DAY


def test_missing_class_in_config_is_a_config_error() -> None:
    cfg = DecayConfig(half_life_days={"structural": None})
    with pytest.raises(ConfigError, match="tactical"):
        decay.half_life_ms(make_entry(), cfg)


# --- retention and effective confidence --------------------------------------------------


def test_retention_is_one_half_after_one_half_life() -> None:
    entry = make_entry()
    assert decay.retention(entry, T0, CFG) == 1.0
    assert decay.retention(entry, T0 + 7 * MS_PER_DAY, CFG) == pytest.approx(0.5)
    assert decay.retention(entry, T0 + 14 * MS_PER_DAY, CFG) == pytest.approx(0.25)


def test_strength_divides_the_decay_rate() -> None:
    entry = make_entry(strength=2.0)
    assert decay.retention(entry, T0 + 7 * MS_PER_DAY, CFG) == pytest.approx(2 ** -0.5)
    assert decay.retention(entry, T0 + 14 * MS_PER_DAY, CFG) == pytest.approx(0.5)


def test_effective_confidence_decays_from_the_stored_confidence() -> None:
    entry = make_entry(confidence=0.8)
    assert decay.effective_confidence(entry, T0 + 7 * MS_PER_DAY, CFG) == pytest.approx(0.4)


def test_effective_confidence_never_falls_below_the_floor() -> None:
    entry = make_entry(confidence=0.9, decay_class=DecayClass.EPHEMERAL)
    assert decay.effective_confidence(entry, T0 + 365 * MS_PER_DAY, CFG) == 0.05


def test_a_clock_step_back_does_not_increase_confidence() -> None:
    entry = make_entry(confidence=0.6)
    assert decay.retention(entry, T0 - MS_PER_DAY, CFG) == 1.0
    assert decay.effective_confidence(entry, T0 - MS_PER_DAY, CFG) == 0.6


def test_structural_confidence_is_constant() -> None:
    entry = make_entry(decay_class=DecayClass.STRUCTURAL, confidence=0.7)
    assert decay.effective_confidence(entry, T0 + 10_000 * MS_PER_DAY, CFG) == 0.7


def test_strength_below_one_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        decay.retention(make_entry(strength=0.5), T0, CFG)
    assert info.value.field == "strength"


def test_non_finite_confidence_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        decay.effective_confidence(make_entry(confidence=math.nan), T0, CFG)
    assert info.value.field == "confidence"


# --- initial confidence and default classes ------------------------------------------


@pytest.mark.parametrize(
    ("provenance", "expected"),
    [
        (Provenance.SELF_LEARNED, 0.5),
        (Provenance.REPLICANT, 0.5),
        (Provenance.CLADE, 0.4),
        (Provenance.PREDECESSOR, 0.3),
        (Provenance.DEATH_REFLECTION, 0.3),
        (Provenance.STYX_QUERY, 0.25),
        (Provenance.LETHE, 0.25),
        (Provenance.MARKETPLACE, 0.25),
        (Provenance.DREAM, 0.3),
        ("clade", 0.4),
    ],
)
def test_initial_confidence_is_half_the_provenance_weight(
    provenance: Provenance | str, expected: float
) -> None:
    assert decay.initial_confidence(provenance, CFG) == pytest.approx(expected)


def test_unknown_provenance_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        decay.initial_confidence("rumour", CFG)
    assert info.value.field == "provenance"


def test_provenance_missing_from_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="clade"):
        decay.initial_confidence("clade", DecayConfig(provenance_weight={"self_learned": 1.0}))


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        (Category.INSIGHT, DecayClass.TACTICAL),
        (Category.HEURISTIC, DecayClass.REGIME_CONDITIONAL),
        (Category.WARNING, DecayClass.REGIME_CONDITIONAL),
        (Category.CAUSAL_LINK, DecayClass.REGIME_CONDITIONAL),
        (Category.STRATEGY_FRAGMENT, DecayClass.REGIME_CONDITIONAL),
        (Category.DREAM_JOURNAL, DecayClass.TACTICAL),
        ("observation", DecayClass.EPHEMERAL),
        ("heuristic", DecayClass.REGIME_CONDITIONAL),
    ],
)
def test_default_decay_class(category: Category | str, expected: DecayClass) -> None:
    assert decay.default_decay_class(category) == expected


def test_kg_confirmed_causal_link_is_structural_other_categories_are_not() -> None:
    assert decay.default_decay_class(Category.CAUSAL_LINK, kg_confirmed=True) == (
        DecayClass.STRUCTURAL
    )
    assert decay.default_decay_class(Category.INSIGHT, kg_confirmed=True) == DecayClass.TACTICAL


def test_unknown_category_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        decay.default_decay_class("gossip")
    assert info.value.field == "category"


# --- votes --------------------------------------------------------------------------------


def test_votes_are_asymmetric() -> None:
    assert decay.apply_vote(0.5, "up", CFG) == pytest.approx(0.6)
    assert decay.apply_vote(0.5, "down", CFG) == pytest.approx(0.35)


def test_votes_are_clamped() -> None:
    assert decay.apply_vote(0.95, "up", CFG) == 0.99
    assert decay.apply_vote(0.1, "down", CFG) == 0.05


def test_unknown_vote_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        decay.apply_vote(0.5, "sideways", CFG)  # type: ignore[arg-type]
    assert info.value.field == "vote"


def test_prediction_votes() -> None:
    assert decay.prediction_vote(0.5, True, CFG) == pytest.approx(0.55)
    assert decay.prediction_vote(0.5, False, CFG) == pytest.approx(0.4)
    assert decay.prediction_vote(0.98, True, CFG) == 0.99


def test_net_votes_is_order_independent_where_sequential_clamping_is_not() -> None:
    ups_first = 0.9
    for _ in range(9):
        ups_first = decay.apply_vote(ups_first, "up", CFG)
    ups_first = decay.apply_vote(ups_first, "down", CFG)
    down_first = decay.apply_vote(0.9, "down", CFG)
    for _ in range(9):
        down_first = decay.apply_vote(down_first, "up", CFG)
    assert ups_first == pytest.approx(0.84) and down_first == 0.99  # the problem
    assert decay.net_votes(0.9, 9, 1, CFG) == 0.99  # one net change, clamped once


def test_net_votes_adds_predictions() -> None:
    assert decay.net_votes(0.5, 3, 1, CFG) == pytest.approx(0.65)
    assert decay.net_votes(0.5, 0, 0, CFG, right=2, wrong=1) == pytest.approx(0.5)
    assert decay.net_votes(0.5, 1, 0, CFG, wrong=1) == pytest.approx(0.5)


@pytest.mark.parametrize("field", ["ups", "downs", "right", "wrong"])
def test_net_votes_rejects_negative_counts(field: str) -> None:
    counts = {"ups": 0, "downs": 0, "right": 0, "wrong": 0, field: -1}
    with pytest.raises(ValidationError) as info:
        decay.net_votes(0.5, counts["ups"], counts["downs"], CFG,
                        right=counts["right"], wrong=counts["wrong"])
    assert info.value.field == field


# --- strength bookkeeping ------------------------------------------------------------------


def test_reinforce_increments_strength_and_resets_the_clock() -> None:
    entry = make_entry(strength=2.0)
    later = T0 + 3 * MS_PER_DAY
    reinforced = decay.reinforce(entry, later)
    assert reinforced.strength == 3.0 and reinforced.last_accessed_at == later
    assert entry.strength == 2.0 and entry.last_accessed_at == T0  # records are immutable
    assert decay.effective_confidence(reinforced, later, CFG) == entry.confidence


def test_a_late_report_does_not_move_the_decay_clock_back() -> None:
    entry = make_entry(last_accessed_at=T0 + MS_PER_DAY)
    assert decay.reinforce(entry, T0).last_accessed_at == T0 + MS_PER_DAY


def test_dream_validation_adds_half_a_strength_and_doubles_the_half_life() -> None:
    entry = make_entry()
    dreamt = decay.dream_validate(entry, CFG)
    assert dreamt.strength == 1.5 and dreamt.dream_validated
    assert decay.half_life_ms(dreamt, CFG) == 2 * decay.half_life_ms(entry, CFG)  # type: ignore[operator]
    assert decay.dream_validate(entry).strength == 1.5  # default config


# --- context-aware penalty and episode recency -----------------------------------------


@pytest.mark.parametrize(("quality", "factor"), [(0.0, 0.7), (0.5, 0.825), (1.0, 0.95)])
def test_context_aware_penalty(quality: float, factor: float) -> None:
    assert decay.context_aware_penalty(quality) == pytest.approx(factor)


@pytest.mark.parametrize("quality", [-0.1, 1.1, math.nan])
def test_context_aware_penalty_rejects_out_of_range(quality: float) -> None:
    with pytest.raises(ValidationError) as info:
        decay.context_aware_penalty(quality)
    assert info.value.field == "region_quality"


def test_failure_penalises_only_a_followed_entry_of_the_same_task_type() -> None:
    args = {"cfg": CFG}
    assert decay.penalise_failure(0.8, 0.0, same_task_type=True, followed=True,
                                  **args) == pytest.approx(0.56)
    assert decay.penalise_failure(0.8, 0.0, same_task_type=False, followed=True, **args) == 0.8
    assert decay.penalise_failure(0.8, 0.0, same_task_type=True, followed=False, **args) == 0.8
    assert decay.penalise_failure(0.06, 0.0, same_task_type=True, followed=True, **args) == 0.05


def test_episode_recency_has_a_48_hour_half_life() -> None:
    assert decay.episode_recency(T0, T0, CFG) == 1.0
    assert decay.episode_recency(T0, T0 + 48 * MS_PER_HOUR, CFG) == pytest.approx(0.5)
    assert decay.episode_recency(T0, T0 + 96 * MS_PER_HOUR, CFG) == pytest.approx(0.25)
    assert decay.episode_recency(T0 + MS_PER_HOUR, T0, CFG) == 1.0


# --- invariants (hypothesis) -------------------------------------------------------------

entries = st.builds(
    make_entry,
    category=st.sampled_from(list(Category)),
    decay_class=st.sampled_from(list(DecayClass)),
    confidence=st.floats(0.05, 0.99),
    quality_score=st.floats(0.0, 1.0),
    strength=st.floats(1.0, 50.0),
    is_bloodstain=st.booleans(),
    dream_validated=st.booleans(),
)
deltas = st.integers(0, 400 * MS_PER_DAY)


@settings(max_examples=100, deadline=None)
@given(entries, deltas, deltas)
def test_effective_confidence_is_non_increasing_in_time(
    entry: GrimoireEntry, d1: int, d2: int
) -> None:
    early, late = sorted((d1, d2))
    assert decay.effective_confidence(entry, T0 + late, CFG) <= decay.effective_confidence(
        entry, T0 + early, CFG
    )


@settings(max_examples=100, deadline=None)
@given(entries, st.integers(-MS_PER_DAY, 10_000 * MS_PER_DAY))
def test_effective_confidence_stays_between_floor_and_confidence(
    entry: GrimoireEntry, delta: int
) -> None:
    value = decay.effective_confidence(entry, T0 + delta, CFG)
    assert CFG.floor <= value <= max(entry.confidence, CFG.floor)


@settings(max_examples=100, deadline=None)
@given(entries, deltas)
def test_structural_entries_are_constant_over_time(entry: GrimoireEntry, delta: int) -> None:
    structural = replace(entry, decay_class=DecayClass.STRUCTURAL)
    assert decay.effective_confidence(structural, T0 + delta, CFG) == structural.confidence


@settings(max_examples=100, deadline=None)
@given(entries, st.floats(1.0, 20.0), st.floats(0.5, 20.0),
       st.integers(MS_PER_HOUR, 60 * MS_PER_DAY))
def test_more_strength_decays_slower(
    entry: GrimoireEntry, strength: float, extra: float, delta: int
) -> None:
    entry = replace(entry, decay_class=DecayClass.TACTICAL, strength=strength)
    stronger = replace(entry, strength=strength + extra)
    assert decay.retention(stronger, T0 + delta, CFG) > decay.retention(entry, T0 + delta, CFG)


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.lists(st.sampled_from(["up", "down"]), max_size=40))
def test_votes_stay_within_the_clamps(confidence: float, votes: list[str]) -> None:
    for vote in votes:
        confidence = decay.apply_vote(confidence, vote, CFG)  # type: ignore[arg-type]
        assert CFG.min_confidence <= confidence <= CFG.max_confidence


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30),
       st.integers(0, 30))
def test_net_votes_stay_within_the_clamps(
    confidence: float, ups: int, downs: int, right: int, wrong: int
) -> None:
    value = decay.net_votes(confidence, ups, downs, CFG, right=right, wrong=wrong)
    assert CFG.min_confidence <= value <= CFG.max_confidence


@settings(max_examples=100, deadline=None)
@given(st.floats(CFG.min_confidence + CFG.downvote, CFG.max_confidence - CFG.upvote))
def test_a_downvote_moves_more_than_an_upvote(confidence: float) -> None:
    up = decay.apply_vote(confidence, "up", CFG) - confidence
    down = confidence - decay.apply_vote(confidence, "down", CFG)
    assert down > up > 0
    assert down == pytest.approx(1.5 * up)


# --- confidence from evidence (SPEC §13) ----------------------------------------------------

_COUNTS = st.integers(min_value=0, max_value=5_000)
_PROVENANCE = st.sampled_from(list(Provenance))


@settings(max_examples=300, deadline=None)
@given(_PROVENANCE, _COUNTS, _COUNTS)
def test_one_more_confirmation_never_lowers_confidence_one_more_contradiction_never_raises_it(
        provenance: Provenance, up: int, down: int) -> None:
    cfg = DecayConfig()
    here = decay.evidence_confidence(provenance, up, down, cfg)
    assert decay.evidence_confidence(provenance, up + 1, down, cfg) >= here
    assert decay.evidence_confidence(provenance, up, down + 1, cfg) <= here
    assert cfg.min_confidence <= here <= cfg.max_confidence


@settings(max_examples=200, deadline=None)
@given(_PROVENANCE, st.lists(st.booleans(), max_size=300), st.randoms())
def test_equal_evidence_gives_equal_confidence_in_any_order(
        provenance: Provenance, verdicts: list[bool], rnd: Any) -> None:
    """Folding the same verdicts in any order ends at one value: it is a function of the
    counts (the vote arithmetic it replaces clamped after each step, so order mattered)."""
    cfg = DecayConfig()
    shuffled = list(verdicts)
    rnd.shuffle(shuffled)
    ends = []
    for order in (verdicts, shuffled):
        up = down = 0
        value = decay.initial_confidence(provenance, cfg)
        for right in order:
            up, down = up + right, down + (not right)
            value = decay.evidence_confidence(provenance, up, down, cfg)
        ends.append(value)
    assert ends[0] == ends[1]


def test_confidence_from_evidence_starts_at_the_initial_confidence_and_needs_a_body_for_099(
        ) -> None:
    cfg = DecayConfig()
    learned = Provenance.SELF_LEARNED
    assert decay.evidence_confidence(learned, 0, 0, cfg) == decay.initial_confidence(learned, cfg)
    # the numbers: most of 199 episodes held -> high; 3 of 8 -> not promotable
    assert decay.evidence_confidence(learned, 183, 16, cfg) > 0.85
    assert decay.evidence_confidence(learned, 3, 5, cfg) < cfg.base_confidence
    assert decay.evidence_confidence(learned, 30, 0, cfg) < 0.9
    assert decay.evidence_confidence(learned, 100, 0, cfg) < 0.99
    assert decay.evidence_confidence(learned, 1_000, 0, cfg) == cfg.max_confidence
    # what was told or inherited starts lower and needs more to get as far
    assert (decay.evidence_confidence(Provenance.PREDECESSOR, 20, 2, cfg)
            < decay.evidence_confidence(learned, 20, 2, cfg))
    with pytest.raises(ValidationError):
        decay.evidence_confidence(learned, -1, 0, cfg)
    with pytest.raises(ConfigError):
        decay.evidence_confidence(learned, 1, 0, DecayConfig(prior_strength=0.0))
