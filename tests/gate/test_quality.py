"""Rule-based quality score (SPEC §6): each dimension, each red flag, and their negatives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.config import QualityConfig
from grimoire.errors import ConfigError, ValidationError
from grimoire.gate.quality import (
    DIMENSIONS,
    RED_FLAGS,
    QualityScore,
    actionability_score,
    find_red_flags,
    hedge_count,
    score_quality,
    specificity_score,
    text_dimensions,
    verifiability_score,
)

CFG = QualityConfig()
GAS = "ETH gas drops below 10 gwei between 2–4 AM UTC"
HEDGED = "markets may possibly move"
TX = "0x" + "ab12" * 16
ADDRESS = "0x" + "c0ffee00" * 5
PLAIN_FACTS = [
    "The Uniswap V3 WETH/USDC pool charges a 0.3% fee.",
    "Gas averaged 24 gwei on 2026-01-02.",
    "The vault holds 1,200 ETH.",
    "Swap volume rose 20% on Monday.",
]


def score(text: str, similarity: float | None = None, **kw: float) -> QualityScore:
    return score_quality(text, novelty_similarity=similarity, cfg=CFG, **kw)


# --- the two required examples -------------------------------------------------------------


def test_a_concrete_gas_window_is_specific() -> None:
    assert specificity_score(GAS) >= 0.7
    assert specificity_score(GAS) > specificity_score(HEDGED)
    assert score(GAS).total > score(HEDGED).total
    assert score(GAS).red_flags == ()


def test_stacked_hedging_scores_low_and_is_flagged() -> None:
    result = score(HEDGED)
    assert result.dimensions["specificity"] == 0.0
    assert "weasel_words" in result.red_flags
    assert result.total < 0.3


# --- specificity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Slippage on WETH/USDC exceeds 35 bps above $50,000 notional",
        f"Router {ADDRESS} reverted 4 swaps",
        "Gas is lowest at 02:00–04:00 UTC on Sundays",
        f"tx {TX} at block 19,000,000",
    ],
)
def test_concrete_claims_are_specific(text: str) -> None:
    assert specificity_score(text) >= 0.7


@pytest.mark.parametrize(
    "text",
    ["Things change over time", "The market is volatile", "Prices go up and down"],
)
def test_vague_generalities_are_not_specific(text: str) -> None:
    assert specificity_score(text) == 0.0


def test_each_hedge_lowers_specificity() -> None:
    base = "Gas drops below 10 gwei at 03:00 UTC"
    one = "Gas may drop below 10 gwei at 03:00 UTC"
    two = "Gas might possibly drop below 10 gwei at 03:00 UTC"
    assert specificity_score(base) > specificity_score(one) > specificity_score(two) > 0
    assert hedge_count(base) == 0 and hedge_count(one) == 1 and hedge_count(two) == 2


def test_digits_inside_hashes_and_times_are_not_counted_twice() -> None:
    # A hash is one concrete reference, not 30 numbers; the score would saturate otherwise.
    assert specificity_score(f"see {TX}") < specificity_score(f"see {TX} and {ADDRESS}")
    assert specificity_score("at 02:00") == specificity_score("at 14:30")


# --- actionability -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "When gas exceeds 80 gwei, delay swaps",
        "IF slippage > 50 bps THEN split the order",
        "Avoid bridging when the queue exceeds 100 txs",
        "Never swap WETH/USDC if the oracle is stale",
        "Don't rebalance during high_vol regimes",
        "If gas is low, swap; if gas is high, wait",
    ],
)
def test_condition_plus_directive_is_fully_actionable(text: str) -> None:
    assert actionability_score(text) == 1.0


def test_directive_alone_condition_alone_and_implicit_trigger() -> None:
    assert actionability_score("Prefer the 0.05% pool") == 0.6
    assert actionability_score("You should rebalance daily") == 0.6
    assert actionability_score("When gas exceeds 80 gwei, swaps revert") == 0.4
    assert actionability_score(GAS) == 0.25  # a threshold and a time window, no directive
    assert actionability_score("The market is volatile") == 0.0


@pytest.mark.parametrize(
    "text", ["Swap volume rose 20% on Monday", "Stop losses are common", "Gas never spiked"]
)
def test_descriptions_that_start_with_a_verb_word_are_not_directives(text: str) -> None:
    assert actionability_score(text) < 0.6


# --- novelty and consistency --------------------------------------------------------------


def test_novelty_is_one_minus_the_nearest_similarity() -> None:
    assert score(GAS, 0.8).dimensions["novelty"] == pytest.approx(0.2)
    assert score(GAS, None).dimensions["novelty"] == 1.0  # nothing to compare with
    assert score(GAS, -0.3).dimensions["novelty"] == 1.0
    assert score(GAS, 1.0).dimensions["novelty"] == 0.0
    assert score(GAS, 0.2).total > score(GAS, 0.9).total


def test_consistency_is_neutral_without_an_llm() -> None:
    assert score(GAS).dimensions["consistency"] == 0.5
    assert score(GAS, consistency=0.9).dimensions["consistency"] == 0.9
    assert score(GAS, consistency=0.9).total > score(GAS).total


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"similarity": 1.5}, "novelty_similarity"),
        ({"similarity": float("nan")}, "novelty_similarity"),
        ({"consistency": 1.2}, "consistency"),
    ],
)
def test_out_of_range_inputs_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        score(GAS, **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize("text", ["", "   ", None])
def test_empty_or_non_string_text_is_rejected(text: object) -> None:
    with pytest.raises(ValidationError) as info:
        score(text)  # type: ignore[arg-type]
    assert info.value.field == "text"


# --- verifiability ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "minimum"),
    [
        (f"Exploit tx {TX}", 1.0),
        ("Reorg at block 19,000,123", 0.7),
        (f"Deployer {ADDRESS}", 0.6),
        ("Observed on 2026-01-02T03:00Z", 0.5),
        ("Gas was 8 gwei at 03:00 UTC", 0.5),
    ],
)
def test_on_chain_references_are_verifiable(text: str, minimum: float) -> None:
    assert verifiability_score(text) >= minimum


def test_verifiability_caps_plain_quantities_and_the_total() -> None:
    assert verifiability_score("The market is volatile") == 0.0
    many = "gas 8 gwei, 9 gwei, 10 gwei, 11 gwei, 12 gwei, 13 gwei"
    assert verifiability_score(many) == 0.5
    assert verifiability_score(f"tx {TX} at block 5 from {ADDRESS}") == 1.0


# --- red flags ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("This vault is a game changer", "empty_rhetoric"),
        ("ETH is going to the moon", "empty_rhetoric"),
        ("A revolutionary yield strategy", "empty_rhetoric"),
        ("Some say the market will turn", "weasel_words"),
        ("Many believe gas will fall", "weasel_words"),
        ("It is known that pools rebalance", "weasel_words"),
        (HEDGED, "weasel_words"),
        ("Gas rises because demand rises", "unverified_causal"),
        ("High volatility leads to losses", "unverified_causal"),
        ("Liquidations are caused by oracle lag", "unverified_causal"),
        ("My brilliant strategy works", "self_praise"),
        ("I am great at timing entries", "self_praise"),
        ("We never lose on this pair", "self_praise"),
        ("Gas is gas.", "tautology"),
        ("It is what it is", "tautology"),
        ("A deal is a deal, so hold", "tautology"),
        ("Prices rise when prices rise", "tautology"),
        ("Gas is cheap because gas is cheap", "tautology"),
    ],
)
def test_each_red_flag(text: str, flag: str) -> None:
    assert flag in find_red_flags(text)


@pytest.mark.parametrize("text", [*PLAIN_FACTS, GAS])
def test_plain_factual_sentences_are_not_flagged(text: str) -> None:
    assert find_red_flags(text) == ()


@pytest.mark.parametrize(
    "text",
    [
        "Gas rose to 80 gwei because of an NFT mint at block 19000000",
        "When gas is below 10 gwei, prefer swap because gas averages 8.1 (vs 24.0)",
        "The pool may rebalance at 03:00 UTC",  # one hedge is caution, not weaselling
        "The fee is the fee tier of the pool",  # 'X is X' only at the end of a clause
        "Swap when gas is low and swap when slippage is low",
    ],
)
def test_near_misses_are_not_flagged(text: str) -> None:
    assert find_red_flags(text) == ()


def test_each_red_flag_kind_costs_its_penalty_once() -> None:
    text = "Gas is cheap because gas is cheap"  # tautology + unverified causal claim
    result = score(text)
    assert result.red_flags == ("unverified_causal", "tautology")
    weights = CFG.weights
    unpenalised = sum(weights[k] * result.dimensions[k] for k in DIMENSIONS)
    assert result.total == pytest.approx(max(0.0, unpenalised - 0.2))


def test_all_flags_together_clamp_to_zero() -> None:
    text = ("Some say my brilliant, revolutionary plan wins because it is what it is, "
            "and it may possibly work")
    result = score(text, 0.99)
    assert set(result.red_flags) == set(RED_FLAGS)
    assert result.total == 0.0


# --- the combination ----------------------------------------------------------------------


def test_total_is_the_weighted_sum_of_the_dimensions() -> None:
    result = score(f"When gas exceeds 80 gwei at block 19,000,000, delay swaps (tx {TX})", 0.4)
    expected = sum(CFG.weights[k] * result.dimensions[k] for k in DIMENSIONS)
    assert result.total == pytest.approx(expected)
    assert result.total > 0.8
    assert set(result.to_dict()) == {"total", "dimensions", "red_flags"}


def test_weights_are_normalised_and_validated() -> None:
    doubled = QualityConfig(weights={k: 2 * w for k, w in CFG.weights.items()})
    assert score_quality(GAS, novelty_similarity=0.3, cfg=doubled).total == pytest.approx(
        score(GAS, 0.3).total
    )
    with pytest.raises(ConfigError):
        score_quality(GAS, novelty_similarity=None, cfg=QualityConfig(weights={"novelty": 1.0}))


def test_ranking_of_realistic_entries() -> None:
    texts = [
        f"Avoid swapping WETH/USDC when gas exceeds 80 gwei: 7 of 9 swaps reverted (tx {TX})",
        GAS,
        "Gas is sometimes expensive",
        HEDGED,
    ]
    totals = [score(t, 0.4).total for t in texts]
    assert totals == sorted(totals, reverse=True)


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=300).filter(str.strip), st.none() | st.floats(-1.0, 1.0),
       st.none() | st.floats(0.0, 1.0))
def test_total_and_dimensions_are_always_in_unit_range(
    text: str, similarity: float | None, consistency: float | None
) -> None:
    result = score_quality(text, novelty_similarity=similarity, cfg=CFG, consistency=consistency)
    assert 0.0 <= result.total <= 1.0
    assert set(result.dimensions) == set(DIMENSIONS)
    assert all(0.0 <= v <= 1.0 for v in result.dimensions.values())
    assert set(result.red_flags) <= set(RED_FLAGS)


def test_matching_ignores_case() -> None:
    assert find_red_flags("THIS IS A GAME CHANGER") == ("empty_rhetoric",)
    assert find_red_flags("Some Say It Is What It Is") == ("weasel_words", "tautology")
    assert actionability_score("WHEN GAS > 80 GWEI, DELAY SWAPS") == 1.0
    assert specificity_score("GAS BELOW 10 GWEI AT 03:00 UTC") == pytest.approx(
        specificity_score("gas below 10 gwei at 03:00 utc"), abs=0.1
    )


def test_token_symbols_count_but_caps_keywords_do_not() -> None:
    assert specificity_score("Prefer WETH/USDC") > specificity_score("Prefer the pool")
    assert specificity_score("IF THEN WHEN AND OR NOT") == 0.0


def test_text_dimensions_match_the_single_scores() -> None:
    for text in [GAS, HEDGED, *PLAIN_FACTS]:
        assert text_dimensions(text) == {
            "specificity": specificity_score(text),
            "actionability": actionability_score(text),
            "verifiability": verifiability_score(text),
        }
