"""Operations, claim matching, condition masks and the rendered sentences."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator.distiller.features import build_table, condition_mask, rate_population
from curator.distiller.match import effect_changed, match_claims
from curator.distiller.operations import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    ExistingClaim,
    Operation,
    OpKind,
    category_for_claim,
)
from curator.views.render import (
    band_cut_in,
    describe_event,
    format_duration,
    format_number,
    metric_label,
    render_against,
    render_causal,
    render_claim,
)
from grimoire.records import Category, Claim, Episode, EpisodeType, Outcome, Regime

HOUR = 3_600_000
T0 = 1_767_225_600_000  # midnight UTC


def claim(condition: dict[str, Any], target: str = "metric:gas_gwei", direction: str = "lower",
          effect: float = 6.1, baseline: float = 23.8, support: int = 41,
          strategy: str | None = None) -> Claim:
    return Claim(condition, target, direction, effect, baseline, support, 1e-9, strategy)


# ------------------------------------------------------------------- operation


def test_operation_needs_a_target_unless_it_adds() -> None:
    c = claim({"hour_window": [2, 4]})
    with pytest.raises(ValueError, match="UPVOTE"):
        Operation(OpKind.UPVOTE, Category.INSIGHT, c, "x")
    with pytest.raises(ValueError, match="ADD"):
        Operation(OpKind.ADD, Category.INSIGHT, c, "x", target_entry_id="e1")


def test_operation_to_dict_is_json() -> None:
    op = Operation(OpKind.EDIT, Category.WARNING, claim({"regime": "high_vol"}), "Avoid ...",
                   target_entry_id="e1", parent_episode_ids=("a", "b"), tags=("distiller",),
                   strategy="lp", regime=Regime.HIGH_VOL,
                   evidence={"support": 11, "pairs": [("a", "b")], "window": (2, 4)})
    data = json.loads(json.dumps(op.to_dict()))
    assert data["op"] == "EDIT" and data["category"] == "warning" and data["regime"] == "high_vol"
    assert data["evidence"]["pairs"] == [["a", "b"]]
    assert data["parent_episode_ids"] == ["a", "b"]


def test_category_follows_target_and_direction() -> None:
    assert category_for_claim(claim({})) is Category.INSIGHT
    assert category_for_claim(claim({}, NEGATIVE_RATE, "higher")) is Category.WARNING
    assert category_for_claim(claim({}, POSITIVE_RATE, "higher")) is Category.HEURISTIC
    assert category_for_claim(claim({}, NEGATIVE_RATE, "lower")) is Category.HEURISTIC
    assert category_for_claim(claim({}, "event:clade_alert", "higher")) is Category.CAUSAL_LINK


# -------------------------------------------------------------------- matching


def test_exact_key_matches_upvote_or_edit() -> None:
    old = claim({"hour_window": [2, 4]})
    same = claim({"hour_window": [2, 4]}, effect=6.5, baseline=24.0)
    moved = claim({"hour_window": [2, 4]}, effect=15.0)
    existing = [ExistingClaim("e1", old, 0.5)]
    matches, unmatched = match_claims([same], existing, 0.25)
    assert (matches[0].kind, matches[0].existing) == (OpKind.UPVOTE, existing[0])
    assert unmatched == []
    matches, _ = match_claims([moved], existing, 0.25)
    assert matches[0].kind is OpKind.EDIT


def test_refined_window_edits_only_an_overlapping_claim_of_the_same_family() -> None:
    wide = ExistingClaim("wide", claim({"hour_window": [1, 5]}), 0.5)
    far = ExistingClaim("far", claim({"hour_window": [14, 16]}), 0.5)
    other_metric = ExistingClaim("slip", claim({"hour_window": [2, 4]}, "metric:slippage_bps"),
                                 0.5)
    new = claim({"hour_window": [2, 4]})
    matches, unmatched = match_claims([new], [far, other_metric, wide], 0.25)
    assert (matches[0].kind, matches[0].existing) == (OpKind.EDIT, wide)
    assert unmatched == [far, other_metric]


def test_exact_match_wins_over_a_refinement() -> None:
    exact = ExistingClaim("exact", claim({"hour_window": [2, 4]}), 0.5)
    wide = ExistingClaim("wide", claim({"hour_window": [1, 5]}), 0.5)
    matches, unmatched = match_claims([claim({"hour_window": [2, 4]})], [wide, exact], 0.25)
    assert matches[0].existing == exact and unmatched == [wide]


def test_strategy_is_part_of_the_key() -> None:
    existing = [ExistingClaim("e1", claim({"regime": "bull"}, strategy="a"), 0.5)]
    matches, unmatched = match_claims([claim({"regime": "bull"}, strategy="b")], existing, 0.25)
    assert matches[0].kind is OpKind.ADD and unmatched == existing


def test_window_across_midnight_overlaps() -> None:
    old = ExistingClaim("e", claim({"hour_window": [22, 2]}), 0.5)
    matches, _ = match_claims([claim({"hour_window": [1, 3]})], [old], 0.25)
    assert matches[0].kind is OpKind.EDIT


@given(old_gap=st.floats(-50, 50).filter(lambda g: abs(g) > 1e-3),
       change=st.floats(0.0, 0.24))
def test_small_moves_are_not_edits(old_gap: float, change: float) -> None:
    old = claim({}, effect=10.0 + old_gap, baseline=10.0)
    new = claim({}, effect=10.0 + old_gap * (1 + change), baseline=10.0)
    assert not effect_changed(old, new, 0.25)
    assert effect_changed(old, claim({}, effect=10.0 + old_gap * 1.5, baseline=10.0), 0.25)


# --------------------------------------------------------------------- features


def _episodes() -> list[Episode]:
    out = []
    for i, (hour, regime, pair, act, gas) in enumerate([
        (1, "bull", "WETH/USDC", "swap", 10.0),
        (2, "bull", "WETH/USDC", "swap", 5.0),
        (3, "high_vol", "WBTC/WETH", "bridge", 30.0),
        (23, "high_vol", "WETH/USDC", None, 50.0),
        (0, "bear", None, None, 20.0),
        (12, "bear", "ARB/USDC", "swap", 40.0),
    ]):
        out.append(Episode(
            id=f"x{i}", text="t", type=EpisodeType.ACTION if act else EpisodeType.OBSERVATION,
            timestamp=T0 + hour * HOUR + 5, regime=Regime(regime), token_pair=pair,
            actions=(act,) if act else (), outcome=Outcome.NEGATIVE if act else
            Outcome.DESCRIPTIVE, metrics={"gas_gwei": gas},
        ))
    return out


def test_condition_masks() -> None:
    table = build_table(_episodes(), min_band_values=3)
    rows = lambda cond: list(np.flatnonzero(condition_mask(table, cond)))  # noqa: E731
    assert rows({"hour_window": [1, 3]}) == [0, 1]
    assert rows({"hour_window": [23, 1]}) == [3, 4]  # wraps midnight
    assert rows({"regime": "high_vol", "token_pair": "WETH/USDC"}) == [3]
    assert rows({"action": "swap"}) == [0, 1, 5]
    assert rows({"action": "stake"}) == []
    assert rows({"metric_band": ["gas_gwei", "upper"]}) == [3, 5]
    assert rows({}) == [0, 1, 2, 3, 4, 5]
    assert condition_mask(table, {"moon": "full"}) is None
    assert condition_mask(table, {"hour_window": [25, 2]}) is None
    assert condition_mask(table, {"metric_band": ["tvl", "upper"]}) is None
    assert list(np.flatnonzero(rate_population(table, {"action": "swap", "regime": "bull"}))) \
        == [0, 1, 5]
    assert list(np.flatnonzero(rate_population(table, {"action": "swap"}))) == [0, 1, 2, 5]


# ---------------------------------------------------------------------- render


def test_insight_sentence() -> None:
    text = render_claim(claim({"hour_window": [2, 4]}))
    assert text == "Gas averages 6.1 gwei (vs 23.8 overall) between 02:00 and 04:00 UTC (n=41)."


def test_warning_and_heuristic_sentences() -> None:
    warn = claim({"action": "swap", "regime": "high_vol", "token_pair": "WETH/USDC"},
                 NEGATIVE_RATE, "higher", 9 / 11, 0.3, 11)
    assert render_claim(warn, {"hits": 9}) == (
        "Avoid swap on WETH/USDC when the regime is high_vol: "
        "9 of 11 were negative (82% vs 30% for swap overall).")
    good = claim({"action": "rebalance", "metric_band": ["gas_gwei", "lower"]},
                 POSITIVE_RATE, "higher", 0.9, 0.55, 40)
    assert render_claim(good, {"hits": 36, "band_cut": 14.25}) == (
        "When gas is below 14.2 gwei, do rebalance because 36 of 40 were positive "
        "(90% vs 55% for rebalance overall).")
    # a band claim stored before the cut was kept in it: its sentence still states the cut
    sentence = render_claim(good, {"hits": 36, "band_cut": 14.25})
    assert band_cut_in(sentence, good.condition["metric_band"]) == 14.2
    assert band_cut_in(sentence, ["gas_gwei", "upper"]) is None
    assert band_cut_in(render_claim(good, {"hits": 36}), ["gas_gwei", "lower"]) is None
    volume = claim({"action": "swap", "metric_band": ["volume", "upper"]},
                   NEGATIVE_RATE, "higher", 0.7, 0.35, 40)
    text = render_claim(volume, {"hits": 28, "band_cut": 3_123_456.0})
    assert band_cut_in(text, ["volume", "upper"]) == 3_123_456.0
    plain = claim({"action": "bridge"}, POSITIVE_RATE, "higher", 0.9, 0.5, 30)
    assert render_claim(plain, {"hits": 27}).startswith(
        "When choosing an action, do bridge because 27 of 30 were positive (90% vs 50% overall)")


def test_contradiction_sentence() -> None:
    text = render_against(claim({"regime": "crisis"}, effect=24.0, baseline=23.0, support=30))
    assert text == ("Not confirmed by recent episodes: gas averages 24.0 gwei (vs 23.0 overall) "
                    "when the regime is crisis (n=30).")


def test_causal_sentence() -> None:
    c = Claim({"event": "regime_shift", "within_ms": 600_000}, "event:action:swap:negative",
              "higher", 0.7, 0.08, 14, 1e-9)
    text = render_causal(c, {"followed": 14, "occurrences": 20, "lag_ms": 192_000.0})
    assert text == ("A regime shift is followed by a negative swap within 10 min: 14 of 20 times "
                    "(70% vs 8% for any 10 min window), median lag 3.2 min.")


def test_small_formatters() -> None:
    assert [format_number(x) for x in (0, 6.1234, 23.84, 1240.4, 0.01234, -3.0)] == [
        "0", "6.1", "23.8", "1240", "0.012", "-3.0"]
    assert [format_duration(ms) for ms in (45_000, 600_000, 192_000, 7_200_000, 5_400_000)] == [
        "45 s", "10 min", "3.2 min", "2 h", "1.5 h"]
    assert metric_label("gas_gwei") == ("gas", "gwei")
    assert metric_label("pnl") == ("PnL", "")
    assert metric_label("pool_tvl_usd") == ("pool TVL", "usd")
    assert describe_event("safety_incident") == "a safety incident"
    assert describe_event("action:swap:negative") == "a negative swap"
    assert describe_event("oracle_update") == "an oracle update"


@given(st.dictionaries(st.sampled_from(["regime", "token_pair", "chain", "tool"]),
                       st.text(min_size=1, max_size=12), max_size=4),
       st.floats(0, 1), st.floats(0, 1), st.integers(3, 500))
def test_rendering_is_deterministic_and_carries_support(
    cond: dict[str, str], effect: float, base: float, n: int
) -> None:
    c = claim({"action": "swap", **cond}, NEGATIVE_RATE, "higher", effect, base, n)
    first = render_claim(c, {"hits": round(effect * n)})
    assert first == render_claim(c, {"hits": round(effect * n)})
    assert f"of {n} were negative" in first and first.startswith("Avoid swap")


# --------------------------------------------------------------- autocorrelation


def test_variance_inflation_is_one_for_independent_draws() -> None:
    from curator.distiller.autocorr import variance_inflation

    rng = np.random.default_rng(0)
    y = rng.normal(size=2000)
    cells = rng.random((5, 2000)) < 0.3
    assert np.all(variance_inflation(y, cells) < 1.2)


def test_variance_inflation_grows_when_both_series_persist() -> None:
    from curator.distiller.autocorr import variance_inflation

    rng = np.random.default_rng(1)
    y = np.zeros(2000)
    for i in range(1, 2000):
        y[i] = 0.95 * y[i - 1] + rng.normal()
    blocks = np.repeat(rng.random(2000 // 50) < 0.2, 50)[None, :]  # 50-row regime blocks
    scattered = (rng.random(2000) < 0.2)[None, :]
    assert variance_inflation(y, blocks)[0] > 5.0
    assert variance_inflation(y, scattered)[0] < 1.5


def test_a_real_shift_does_not_inflate_itself() -> None:
    """Residuals after the condition's mean shift carry the autocorrelation, not the shift."""
    from curator.distiller.autocorr import variance_inflation

    rng = np.random.default_rng(2)
    blocks = np.repeat(rng.random(40) < 0.3, 50)
    y = rng.normal(size=2000) + 5.0 * blocks
    assert variance_inflation(y, blocks[None, :])[0] < 1.3
