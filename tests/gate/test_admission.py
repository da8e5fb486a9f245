"""The admission gate (SPEC §5): every decision path, the firewall, and composite invariants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.clock import MS_PER_DAY
from grimoire.config import AdmissionConfig, QualityConfig
from grimoire.errors import ConfigError, ValidationError
from grimoire.gate.admission import FACTORS, AdmissionDecision, Candidate, Neighbour, assess
from grimoire.gate.quality import score_quality
from grimoire.records import Category, Claim, DecayClass, GrimoireEntry, Provenance

T0 = 1_767_225_600_000
CFG = AdmissionConfig()
WARNING = ("Avoid swapping WETH/USDC when gas exceeds 80 gwei: 7 of 9 swaps reverted "
           "(blocks 19,000,000–19,000,500)")
SWAP_RULE = "Swap WETH/USDC when gas exceeds 80 gwei"
NEVER_SWAP = "Never swap WETH/USDC when gas exceeds 80 gwei"
NIGHT = {"hour_window": [2, 4]}


def make_entry(id: str = "e1", content: str = SWAP_RULE, **overrides: Any) -> GrimoireEntry:
    values: dict[str, Any] = {
        "id": id,
        "category": Category.HEURISTIC,
        "content": content,
        "confidence": 0.8,
        "quality_score": 0.6,
        "decay_class": DecayClass.REGIME_CONDITIONAL,
        "provenance": Provenance.SELF_LEARNED,
        "created_at": T0,
        "last_accessed_at": T0,
    }
    values.update(overrides)
    return GrimoireEntry(**values)


def near(id: str, similarity: float, confidence: float = 0.8, content: str = SWAP_RULE,
         **overrides: Any) -> Neighbour:
    return Neighbour(make_entry(id, content, **overrides), similarity, confidence)


def candidate(content: str = WARNING, **overrides: Any) -> Candidate:
    values: dict[str, Any] = {"category": "warning", "content": content, "event_time": T0,
                              "support": 9}
    values.update(overrides)
    return Candidate(**values)


def claim(direction: str = "lower", condition: dict[str, Any] | None = None,
          strategy: str | None = None, target: str = "metric:gas_gwei") -> Claim:
    return Claim(condition=condition or NIGHT, target=target, direction=direction,
                 effect=8.0, baseline=24.0, support=12, strategy=strategy)


def run(cand: Candidate, neighbours: list[Neighbour] | None = None, **kw: Any) -> AdmissionDecision:
    cfg = kw.pop("cfg", CFG)
    return assess(cand, neighbours or [], now=kw.pop("now", T0), cfg=cfg, **kw)


# --- each decision path ---------------------------------------------------------------------


def test_a_specific_recent_warning_is_admitted_at_standard_confidence() -> None:
    decision = run(candidate())
    assert decision.decision == "admitted"
    assert decision.confidence is None and not decision.low_confidence
    assert decision.composite > 0.55
    assert decision.factors["content_type_prior"] == 0.9
    assert decision.factors["semantic_novelty"] == 1.0
    assert decision.factors["factual_confidence"] == 0.5  # nothing to agree or disagree with


def test_vague_low_support_text_is_rejected() -> None:
    for age in (0, 30 * MS_PER_DAY):
        cand = candidate("markets may possibly move", category="insight", support=0,
                         event_time=T0 - age)
        decision = run(cand, [near("n1", 0.6, content="gas is cheap at night")])
        assert decision.decision == "rejected"
        assert decision.composite < 0.45
        assert decision.factors["future_utility"] == 0.0


def test_borderline_candidate_is_admitted_at_confidence_0_3() -> None:
    cand = candidate("Gas averaged 30 gwei today", category="insight", support=2,
                     event_time=T0 - MS_PER_DAY)
    decision = run(cand, [near("n1", 0.6, content="Gas is cheap at night")])
    assert 0.45 <= decision.composite <= 0.55
    assert decision.decision == "admitted" and decision.confidence == 0.3
    assert decision.low_confidence


def test_duplicate_is_skipped() -> None:
    decision = run(candidate(SWAP_RULE, category="heuristic"), [near("dup", 0.97)])
    assert decision.decision == "skipped"
    assert decision.nearest_id == "dup" and decision.merge_target_id is None
    assert decision.factors["semantic_novelty"] == pytest.approx(0.03)


def test_near_duplicate_is_merged_into_the_nearest() -> None:
    neighbours = [near("far", 0.85), near("nearest", 0.93), near("middle", 0.91)]
    decision = run(candidate(SWAP_RULE, category="heuristic"), neighbours)
    assert decision.decision == "merged"
    assert decision.merge_target_id == "nearest"


def test_thresholds_are_strict() -> None:
    assert run(candidate(SWAP_RULE), [near("n", 0.95)]).decision == "merged"
    assert run(candidate(SWAP_RULE), [near("n", 0.90)]).decision == "admitted"


def test_contradicting_a_confident_entry_is_quarantined() -> None:
    decision = run(candidate(NEVER_SWAP, category="heuristic"),
                   [near("other", 0.5, 0.9, content="Bridge USDC when fees are low"),
                    near("confident", 0.93, 0.85)])
    assert decision.decision == "quarantined"
    assert decision.conflicting_id == "confident"
    assert decision.factors["factual_confidence"] < 0.3
    assert decision.contradicting_ids == ("confident",)


def test_a_claim_reversed_before_the_candidate_contradicts_nothing() -> None:
    """The curator found "gas is lower at 02-04" decisively reversed at T0 - 1 h (its
    ``valid_until``): "gas is higher at 02-04", about the time after it, is not held by a
    firewall its own reversal had to get past (nor merged into the old claim), while a
    claim about the time before the reversal still is."""
    old = near("reversed", 0.93, 0.95, claim=claim("lower"), valid_until=T0 - 3_600_000)
    after = run(candidate(claim=claim("higher"), category="warning"), [old])
    assert after.decision == "admitted" and after.contradicting_ids == ("reversed",)
    assert after.factors["factual_confidence"] == CFG.neutral_factual
    before = run(candidate(claim=claim("higher"), category="warning",
                           event_time=T0 - 7_200_000), [old])
    assert before.decision == "quarantined" and before.conflicting_id == "reversed"


def test_a_contradiction_is_never_skipped_or_merged_as_a_duplicate() -> None:
    # Measured with the bundled model: the negated rule sits at cosine 0.975.
    decision = run(candidate(NEVER_SWAP, category="heuristic"), [near("weak", 0.975, 0.4)])
    assert decision.decision not in {"skipped", "merged", "quarantined"}
    assert decision.contradicting_ids == ("weak",)
    assert decision.factors["factual_confidence"] == pytest.approx(0.5 - 0.5 * 0.975 * 0.4)


def test_a_contradicted_nearest_does_not_hide_an_agreeing_near_duplicate() -> None:
    neighbours = [near("opposite", 0.97, 0.4, content=NEVER_SWAP), near("same", 0.93, 0.6)]
    decision = run(candidate(SWAP_RULE, category="heuristic"), neighbours)
    assert decision.decision == "merged" and decision.merge_target_id == "same"


def test_the_firewall_picks_the_most_confident_contradicted_entry() -> None:
    decision = run(candidate(NEVER_SWAP), [near("a", 0.9, 0.75), near("b", 0.8, 0.95)])
    assert decision.decision == "quarantined" and decision.conflicting_id == "b"


def test_the_firewall_needs_both_low_factual_confidence_and_a_confident_entry() -> None:
    weak = run(candidate(NEVER_SWAP), [near("w", 0.93, 0.69)])
    assert weak.decision != "quarantined"  # 0.5 − 0.5·0.93·0.69 < 0.3, but confidence < 0.7
    trusted = run(candidate(NEVER_SWAP), [near("c", 0.93, 0.9)],
                  llm_scores={"factual_confidence": 0.8})
    assert trusted.decision != "quarantined"


# --- factual confidence: structured claims first, then text ---------------------------------


def test_same_structured_claim_agrees_and_merges_at_any_cosine() -> None:
    cand = candidate("Gas is cheapest 2–4 AM UTC", category="insight", claim=claim("lower"))
    decision = run(cand, [near("c1", 0.8, 0.7, content="Gas averages 8 gwei at night",
                               claim=claim("lower"))])
    assert decision.decision == "merged" and decision.merge_target_id == "c1"
    assert decision.factors["factual_confidence"] == pytest.approx(0.5 + 0.5 * 0.7)


def test_opposite_direction_of_the_same_claim_is_quarantined_at_low_cosine() -> None:
    cand = candidate("Gas is dearest 2–4 AM UTC", category="insight", claim=claim("higher"))
    decision = run(cand, [near("c1", 0.6, 0.8, content="Gas averages 8 gwei at night",
                               claim=claim("lower"))])
    assert decision.decision == "quarantined" and decision.conflicting_id == "c1"


def test_structured_claims_with_another_scope_are_unrelated() -> None:
    cand = candidate(NEVER_SWAP, claim=claim("higher", condition={"hour_window": [14, 16]}))
    other = near("c1", 0.92, 0.9, claim=claim("lower"))  # negated text, but the claims decide
    decision = run(cand, [other])
    assert decision.factors["factual_confidence"] == 0.5
    assert decision.decision == "merged"  # cosine > 0.90 and no contradiction: SPEC merges


@pytest.mark.parametrize(("mine", "theirs", "related"),
                         [("a", "b", False), (None, "b", True), ("a", "a", True)])
def test_claim_strategies_must_be_compatible(mine: str | None, theirs: str, related: bool) -> None:
    cand = candidate(claim=claim("higher", strategy=mine))
    decision = run(cand, [near("c1", 0.3, 0.5, claim=claim("lower", strategy=theirs))])
    assert (decision.contradicting_ids == ("c1",)) is related


def test_antonyms_flip_a_claim_unless_the_numbers_differ() -> None:
    lower = "Gas is lower between 02:00 and 04:00 UTC"
    higher_same = run(candidate("Gas is higher between 02:00 and 04:00 UTC"),
                      [near("n", 0.95, 0.5, content=lower)])
    assert higher_same.contradicting_ids == ("n",)
    higher_other = run(candidate("Gas is higher between 14:00 and 16:00 UTC"),
                       [near("n", 0.85, 0.5, content=lower)])
    assert higher_other.contradicting_ids == () and higher_other.agreeing_ids == ()


@pytest.mark.parametrize(
    ("mine", "theirs", "relation"),
    [
        ("Slippage increases after 20:00 UTC", "Slippage decreases after 20:00 UTC", "contradict"),
        ("Range orders yield profits in sideways", "Range orders yield losses in sideways",
         "contradict"),
        ("Swaps succeed when gas is cheap", "Swaps fail when gas is cheap", "contradict"),
        ("Swaps fail when gas is cheap", "Swaps never fail when gas is expensive", "agree"),
        ("Gas rises and falls with volume", "Gas falls with volume", "agree"),  # both sides
    ],
)
def test_text_relations(mine: str, theirs: str, relation: str) -> None:
    decision = run(candidate(mine), [near("n", 0.9, 0.5, content=theirs)])
    ids = decision.contradicting_ids if relation == "contradict" else decision.agreeing_ids
    assert ids == ("n",)


def test_agreement_raises_factual_confidence() -> None:
    decision = run(candidate(WARNING), [near("a", 0.8, 0.9, content=NEVER_SWAP)])
    assert decision.agreeing_ids == ("a",)  # avoid ~ never: same polarity
    assert decision.factors["factual_confidence"] == pytest.approx(0.5 + 0.5 * 0.8 * 0.9)


def test_text_below_the_related_similarity_is_neither_agreement_nor_contradiction() -> None:
    decision = run(candidate(NEVER_SWAP), [near("n", 0.7, 0.95)])
    assert decision.factors["factual_confidence"] == 0.5 and decision.decision != "quarantined"


# --- novelty, recency, prior, utility --------------------------------------------------------


def test_off_topic_is_flagged_only_against_existing_neighbours() -> None:
    far = run(candidate(), [near("n", 0.3, content="Rebalance the ETH vault daily")])
    assert far.off_topic and any("off-topic" in r for r in far.reasons)
    assert far.factors["semantic_novelty"] == pytest.approx(0.7)
    assert not run(candidate(), []).off_topic


def test_temporal_recency_halves_every_half_life() -> None:
    assert run(candidate(event_time=T0 - 7 * MS_PER_DAY)).factors["temporal_recency"] == (
        pytest.approx(0.5)
    )
    assert run(candidate(event_time=T0 + MS_PER_DAY)).factors["temporal_recency"] == 1.0


@pytest.mark.parametrize(("category", "prior"),
                         [("warning", 0.9), ("causal_link", 0.7), ("heuristic", 0.6),
                          ("insight", 0.5), ("strategy_fragment", 0.4), ("observation", 0.2)])
def test_content_type_prior(category: str, prior: float) -> None:
    assert run(candidate(category=category)).factors["content_type_prior"] == prior


def test_support_saturates_at_ten_episodes() -> None:
    utilities = [run(candidate(support=s)).factors["future_utility"] for s in (0, 5, 10, 50)]
    assert utilities[0] < utilities[1] < utilities[2] == utilities[3]


def test_a_given_quality_score_is_reused_for_future_utility() -> None:
    quality = score_quality("markets may possibly move", novelty_similarity=None,
                            cfg=QualityConfig())
    reused = run(candidate(WARNING, support=0), quality=quality)
    assert reused.factors["future_utility"] == 0.0  # the vague text's dimensions, not WARNING's
    assert run(candidate(WARNING, support=0)).factors["future_utility"] > 0.5


def test_llm_scores_override_utility_and_factual_confidence() -> None:
    decision = run(candidate(), llm_scores={"future_utility": 0.1, "factual_confidence": 0.2})
    assert decision.factors["future_utility"] == 0.1
    assert decision.factors["factual_confidence"] == 0.2
    assert sum("LLM" in r for r in decision.reasons) == 2


@pytest.mark.parametrize(("scores", "field"),
                         [({"semantic_novelty": 0.5}, "llm_scores"),
                          ({"future_utility": 1.5}, "llm_scores.future_utility"),
                          ({"factual_confidence": float("nan")}, "llm_scores.factual_confidence")])
def test_bad_llm_scores_name_the_field(scores: dict[str, float], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        run(candidate(), llm_scores=scores)
    assert info.value.field == field


# --- thresholds, exactly --------------------------------------------------------------------


@pytest.mark.parametrize(("prior", "decision", "confidence"),
                         [(0.4499, "rejected", None), (0.45, "admitted", 0.3),
                          (0.55, "admitted", 0.3), (0.5501, "admitted", None)])
def test_composite_thresholds(prior: float, decision: str, confidence: float | None) -> None:
    only_prior = {name: 0.0 for name in FACTORS} | {"content_type_prior": 1.0}
    cfg = AdmissionConfig(weights=only_prior, type_prior={"warning": prior})
    result = run(candidate(), cfg=cfg)
    assert result.composite == pytest.approx(prior)
    assert (result.decision, result.confidence) == (decision, confidence)


# --- validation and logging ------------------------------------------------------------------


@pytest.mark.parametrize(("overrides", "field"),
                         [({"content": "  "}, "content"), ({"category": "gossip"}, "category"),
                          ({"support": -1}, "support"), ({"event_time": 1.5}, "event_time"),
                          ({"provenance": "rumour"}, "provenance"), ({"claim": "x"}, "claim")])
def test_bad_candidates_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        candidate(**overrides)
    assert info.value.field == field


@pytest.mark.parametrize(("similarity", "confidence", "field"),
                         [(1.5, 0.5, "neighbours.similarity"),
                          (float("nan"), 0.5, "neighbours.similarity"),
                          (0.5, 1.2, "neighbours.effective_confidence")])
def test_bad_neighbours_name_the_field(similarity: float, confidence: float, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Neighbour(make_entry(), similarity, confidence)
    assert info.value.field == field


def test_float32_cosine_overshoot_is_clamped() -> None:
    assert Neighbour(make_entry(), 1.0000001, 0.5).similarity == 1.0


def test_bad_now_and_bad_config() -> None:
    with pytest.raises(ValidationError):
        assess(candidate(), [], now=1.5, cfg=CFG)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        run(candidate(), cfg=AdmissionConfig(weights={"future_utility": 1.0}))
    with pytest.raises(ConfigError, match="warning"):
        run(candidate(), cfg=AdmissionConfig(type_prior={"insight": 0.5}))


def test_every_decision_is_loggable_with_its_five_factors() -> None:
    decisions = [
        run(candidate()),
        run(candidate(SWAP_RULE), [near("d", 0.97)]),
        run(candidate(SWAP_RULE), [near("m", 0.92)]),
        run(candidate(NEVER_SWAP), [near("q", 0.93, 0.9)]),
        run(candidate("markets may possibly move", support=0, category="observation"),
            [near("n", 0.6, content="gas is cheap at night")]),
    ]
    assert {d.decision for d in decisions} == {"admitted", "skipped", "merged", "quarantined",
                                               "rejected"}
    for decision in decisions:
        logged = json.loads(json.dumps(decision.to_dict()))
        assert list(logged["factors"]) == list(FACTORS)
        assert logged["decision"] == decision.decision and logged["reasons"]


# --- invariants (hypothesis) -------------------------------------------------------------------

unit = st.floats(0.0, 1.0)
texts = st.sampled_from([WARNING, SWAP_RULE, NEVER_SWAP, "markets may possibly move",
                         "Gas is higher between 02:00 and 04:00 UTC", "ETH price 3000 USDC"])
neighbour_lists = st.lists(
    st.builds(near, id=st.sampled_from(["a", "b", "c", "d"]), similarity=st.floats(-1.0, 1.0),
              confidence=unit, content=texts),
    max_size=5,
)
weight_maps = st.fixed_dictionaries({name: st.floats(0.0, 5.0) for name in FACTORS}).filter(
    lambda w: sum(w.values()) > 0.01
)


@settings(max_examples=100, deadline=None)
@given(texts, st.sampled_from(["warning", "insight", "heuristic", "observation"]),
       st.integers(0, 40), st.integers(-30 * MS_PER_DAY, MS_PER_DAY), neighbour_lists,
       weight_maps, st.none() | st.fixed_dictionaries({"future_utility": unit}))
def test_composite_is_the_normalised_weighted_sum_and_stays_in_unit_range(
    text: str, category: str, support: int, age: int, neighbours: list[Neighbour],
    weights: dict[str, float], llm: dict[str, float] | None,
) -> None:
    cfg = AdmissionConfig(weights=weights)
    cand = candidate(text, category=category, support=support, event_time=T0 + age)
    decision = assess(cand, neighbours, now=T0, cfg=cfg, llm_scores=llm)
    assert set(decision.factors) == set(FACTORS)
    assert all(0.0 <= v <= 1.0 for v in decision.factors.values())
    expected = sum(weights[k] * decision.factors[k] for k in FACTORS) / sum(weights.values())
    assert decision.composite == pytest.approx(expected)
    assert 0.0 <= decision.composite <= 1.0
    if decision.decision == "rejected":
        assert decision.composite < cfg.reject_below
    if decision.decision == "admitted":
        assert decision.composite >= cfg.reject_below
        assert (decision.confidence == cfg.low_confidence) == (
            decision.composite <= cfg.low_confidence_below)


@settings(max_examples=100, deadline=None)
@given(texts, neighbour_lists)
def test_default_weights_sum_to_one_so_the_composite_is_the_plain_weighted_sum(
    text: str, neighbours: list[Neighbour]
) -> None:
    assert sum(CFG.weights.values()) == pytest.approx(1.0)
    decision = assess(candidate(text), neighbours, now=T0, cfg=CFG)
    plain = sum(CFG.weights[k] * decision.factors[k] for k in FACTORS)
    assert decision.composite == pytest.approx(plain)


# --- with the real embedding model ----------------------------------------------------------


@pytest.mark.slow
def test_real_embeddings_negation_is_quarantined_paraphrase_is_not_new() -> None:
    from grimoire.models.embedders import FastEmbedEmbedder

    embedder = FastEmbedEmbedder()
    existing = [make_entry("rule", SWAP_RULE),
                make_entry("night", "Gas is lowest between 02:00 and 04:00 UTC")]
    vectors = embedder.embed([e.content for e in existing])

    def neighbours_of(text: str) -> list[Neighbour]:
        query = embedder.embed([text])[0]
        return [Neighbour(e, float(vectors[i] @ query), 0.85) for i, e in enumerate(existing)]

    negated = assess(candidate(NEVER_SWAP), neighbours_of(NEVER_SWAP), now=T0, cfg=CFG)
    assert negated.nearest_similarity is not None and negated.nearest_similarity > 0.95
    assert negated.decision == "quarantined" and negated.conflicting_id == "rule"
    restated = "Swap WETH/USDC whenever gas exceeds 80 gwei"
    again = assess(candidate(restated, category="heuristic"), neighbours_of(restated),
                   now=T0, cfg=CFG)
    assert again.decision in {"skipped", "merged"} and again.nearest_id == "rule"
