"""Judging stored claims against new episodes (curator.claims): pure, no stores."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator.claims import (
    EpisodeWindow,
    EventIndex,
    check_causal,
    condition_mask,
    event_key,
    event_keys,
    judge_claim,
    last_pass_start,
    midpoint_verdict,
    rate_alternative,
    reversal,
)
from grimoire.ids import new_id
from grimoire.records import Claim, Episode, episode_from_params
from tests.curator.test_curator_support import GAS_CLAIM, SWAP_CLAIM, gas_obs, hour, swap


def ep(params: dict[str, Any]) -> Episode:
    return episode_from_params(params, id=new_id(params["timestamp"]), now_ms=params["timestamp"])


def test_condition_mask_reads_the_distiller_vocabulary() -> None:
    """Regime, token pair, action and hour windows (wrapping midnight) select episodes."""
    window = EpisodeWindow.of([
        ep(gas_obs(hour(2.5), 5.0)), ep(gas_obs(hour(23.5), 20.0)),
        ep(swap(hour(3), "negative")), ep(swap(hour(12), "positive", regime="bull")),
    ])
    assert condition_mask(window, {"hour_window": [2, 4]}).tolist() == [True, False, True, False]
    assert condition_mask(window, {"hour_window": [23, 1]}).tolist() == [False, True, False,
                                                                         False]
    assert condition_mask(window, {"action": "swap", "regime": "high_vol"}).tolist() == [
        False, False, True, False]
    assert condition_mask(window, {"action": "bridge"}).tolist() == [False] * 4
    assert condition_mask(window, {"token_pair": "WETH/USDC"}).all()
    # Scoped as the learner scopes claims: a strategy's episodes, or (None) the global ones.
    assert condition_mask(window, {}, scope=True, strategy="eth-dca").tolist() == [
        False, False, True, True]
    assert condition_mask(window, {}, scope=True, strategy=None).tolist() == [
        True, True, False, False]


def test_unreadable_conditions_give_no_verdict() -> None:
    window = EpisodeWindow.of([ep(gas_obs(hour(3), 5.0))])
    assert condition_mask(window, {"metric_band": ["volume", "upper"]}) is None
    assert condition_mask(window, {"hour_window": [2]}) is None
    claim = Claim({"mood": "calm"}, "metric:gas_gwei", "lower", 6.0, 24.0, 10)
    assert judge_claim(window, claim, 1) is None


BAND_CLAIM = Claim({"action": "swap", "metric_band": ["gas_gwei", "upper"]},
                   "outcome:negative_rate", "higher", 0.8, 0.35, 30, strategy="eth-dca",
                   band_cut=30.0)


def gas_swap(at: int, outcome: str, gas: float) -> dict[str, Any]:
    return {**swap(at, outcome), "metrics": {"gas_gwei": gas}}


def test_a_metric_band_is_read_at_the_claims_own_cut() -> None:
    """"When gas is above 30 gwei": the episodes at or above the cut the claim states, not
    the thirds of whatever window the curator holds now; an episode without gas is in no
    band; a band with no cut (a claim stored before the cut was kept) stays unreadable."""
    window = EpisodeWindow.of([ep(gas_swap(hour(1), "negative", 31.0)),
                               ep(gas_swap(hour(2), "positive", 30.0)),
                               ep(gas_swap(hour(3), "positive", 12.0)),
                               ep(swap(hour(4), "negative")),            # no gas metric
                               ep(gas_obs(hour(5), 45.0))])
    upper = condition_mask(window, {"metric_band": ["gas_gwei", "upper"]}, band_cut=30.0)
    lower = condition_mask(window, {"metric_band": ["gas_gwei", "lower"]}, band_cut=30.0)
    assert upper is not None and upper.tolist() == [True, True, False, False, True]
    assert lower is not None and lower.tolist() == [False, True, True, False, False]
    assert condition_mask(window, {"metric_band": ["gas_gwei", "upper"]}) is None
    assert condition_mask(window, {"metric_band": ["gas_gwei", "middle"]}, band_cut=3.0) is None
    assert condition_mask(window, {"metric_band": ["tvl", "upper"]}, band_cut=3.0).tolist() == [
        False] * 5
    assert judge_claim(window, dataclasses.replace(BAND_CLAIM, band_cut=None), 1) is None


def test_a_band_warning_is_right_when_swaps_lose_in_the_band_and_wrong_when_not() -> None:
    """Only the rated swaps in the band are its episodes; those outside are the rest it is
    measured against (``against_rest``), not evidence for or against it."""
    outside = [ep(gas_swap(hour(0) + i, "positive" if i % 3 else "negative", 15.0))
               for i in range(9)]
    losing = [ep(gas_swap(hour(1) + i, "negative" if i % 5 else "positive", 35.0 + i))
              for i in range(10)]
    verdict = judge_claim(EpisodeWindow.of(losing + outside), BAND_CLAIM, 3, level=0.05)
    assert verdict is not None and verdict.right is True and verdict.n == 10
    assert set(verdict.episode_ids) == {e.id for e in losing}
    as_usual = [ep(gas_swap(hour(2) + i, "negative" if i % 3 == 0 else "positive", 40.0))
                for i in range(12)]
    verdict = judge_claim(EpisodeWindow.of(as_usual + outside), BAND_CLAIM, 3, level=0.05)
    assert verdict is not None and verdict.right is False and verdict.n == 12
    assert verdict.observed == pytest.approx(4 / 12)
    # losing as often as the swaps outside the band: wrong, but no sign of the opposite
    assert verdict.log_p_against > -1.0
    assert reversal(BAND_CLAIM, verdict, min_support=3, min_effect=0.25,
                    min_rate_gap=0.2) is None


def test_a_band_claim_reverses_at_its_own_cut() -> None:
    """Swaps in the band now win while the others lose: the opposite claim, about the same
    band at the same cut."""
    winning = [ep(gas_swap(hour(1) + i, "positive", 36.0)) for i in range(8)]
    losing = [ep(gas_swap(hour(2) + i, "negative", 20.0)) for i in range(8)]
    verdict = judge_claim(EpisodeWindow.of(winning + losing), BAND_CLAIM, 3, level=0.05)
    assert verdict is not None and verdict.right is False and verdict.log_p_against < -5
    flipped = reversal(BAND_CLAIM, verdict, min_support=3, min_effect=0.25, min_rate_gap=0.2)
    assert flipped is not None and flipped.direction == "lower" and flipped.effect == 0.0
    assert flipped.band_cut == 30.0 and flipped.condition == BAND_CLAIM.condition


def test_a_metric_claim_on_a_band_is_measured_against_the_rest_with_the_metric() -> None:
    """"Slippage is higher when volume is above 3M": the level outside the band is read over
    the episodes that carry volume and fall below the cut; a tick without volume says
    nothing about the band."""
    claim = Claim({"metric_band": ["volume", "upper"]}, "metric:slippage_bps", "higher",
                  20.0, 10.0, 30, band_cut=3e6)

    def obs(at: int, volume: float | None, slip: float) -> Episode:
        metrics = {"slippage_bps": slip, **({} if volume is None else {"volume": volume})}
        return ep({"text": "tick", "timestamp": at, "type": "observation", "metrics": metrics})

    window = EpisodeWindow.of([obs(hour(1) + i, 4e6, 21.0) for i in range(4)]
                              + [obs(hour(2) + i, 1e6, 9.0) for i in range(4)]
                              + [obs(hour(3) + i, None, 40.0) for i in range(4)])
    verdict = judge_claim(window, claim, 3)
    assert verdict is not None and verdict.right is True and verdict.n == 4
    assert verdict.reference == 9.0


def test_metric_claim_right_wrong_and_undecided() -> None:
    """Cheap gas in 02-04 is right when the new window's mean sits on the cheap side of the
    midpoint (15), wrong on the other side, undecided below the minimum support."""
    cheap = EpisodeWindow.of([ep(gas_obs(hour(2 + i / 10), 7.0 + i)) for i in range(4)])
    verdict = judge_claim(cheap, GAS_CLAIM, 3)
    assert verdict is not None and verdict.right is True and verdict.n == 4
    assert verdict.observed == 8.5
    dear = EpisodeWindow.of([ep(gas_obs(hour(3), 40.0 + i)) for i in range(3)]
                            + [ep(gas_obs(hour(10), 1.0))])  # outside the window: ignored
    verdict = judge_claim(dear, GAS_CLAIM, 3)
    assert verdict is not None and verdict.right is False and verdict.n == 3
    few = EpisodeWindow.of([ep(gas_obs(hour(3), 40.0)), ep(gas_obs(hour(3.1), 41.0))])
    verdict = judge_claim(few, GAS_CLAIM, 3)
    assert verdict is not None and verdict.right is None and verdict.n == 2


@given(start=st.integers(0, 23), width=st.integers(1, 23), now=st.integers(hour(0), hour(0, day=9)))
def test_last_pass_start_is_the_latest_pass_of_the_window_ended_by_now(
        start: int, width: int, now: int) -> None:
    """Every hour of the pass is in the window, the pass has ended by ``now``, and the next
    one has not (hour windows wrap midnight: [22, 2] is 22:00-02:00)."""
    value = [start, (start + width) % 24]
    began = last_pass_start(value, now)
    assert began is not None
    ended = began + width * 3_600_000
    assert ended <= now < ended + 86_400_000
    window = EpisodeWindow.of([ep(gas_obs(t, 5.0)) for t in range(began, ended, 900_000)])
    assert condition_mask(window, {"hour_window": value}).all()
    assert last_pass_start([25, 3], now) is None and last_pass_start("20-23", now) is None


def test_an_hour_claim_is_judged_within_regimes() -> None:
    """Gas claimed dear at 12-15 (60 vs 30). The lookback's other hours sit at 30 in
    sideways and 10 in low_vol; today's afternoon fell in low_vol at 28: still 18 above
    its regime's other hours, so right within regimes (midpoint 10 + 15), though below
    the raw midpoint (20 + 15). An afternoon at its regime's level is wrong either way."""
    claim = Claim({"hour_window": [12, 15]}, "metric:gas_gwei", "higher", 60.0, 30.0, 40)
    others = [ep(gas_obs(hour(h), 30.0)) for h in (1, 3, 5, 7, 9, 17)] + [
        ep(gas_obs(hour(h), 10.0, regime="low_vol")) for h in (18, 19, 20, 21, 22, 23)]

    def judged(level: float, strata: tuple[str, ...]) -> bool | None:
        today = [ep(gas_obs(hour(12 + i / 2, day=1), level, regime="low_vol"))
                 for i in range(6)]
        verdict = judge_claim(EpisodeWindow.of(today), claim, 3, 10,
                              reference=EpisodeWindow.of(others + today), strata=strata)
        assert verdict is not None
        return verdict.right

    assert judged(28.0, ("regime",)) is True
    assert judged(28.0, ()) is False
    assert judged(11.0, ("regime",)) is False
    # a claim that names the regime is its own stratum: judged as before, against all the
    # episodes outside its condition
    inside = Claim({"hour_window": [12, 15], "regime": "low_vol"}, "metric:gas_gwei",
                   "higher", 60.0, 30.0, 40)
    today = [ep(gas_obs(hour(12 + i / 2, day=1), 28.0, regime="low_vol")) for i in range(6)]
    verdict = judge_claim(EpisodeWindow.of(today), inside, 3, 10,
                          reference=EpisodeWindow.of(others + today), strata=("regime",))
    assert verdict is not None and verdict.reference == 20.0


def test_outcome_rate_claim_counts_only_rated_matching_actions() -> None:
    """The claim is eth-dca's (swaps carry that strategy): rated swaps in high_vol count."""
    losing = [ep(swap(hour(1 + i), "negative")) for i in range(3)] + [
        ep(swap(hour(5), "positive")), ep(swap(hour(6), "positive", regime="bull")),
        ep(gas_obs(hour(7), 20.0, regime="high_vol"))]
    verdict = judge_claim(EpisodeWindow.of(losing), SWAP_CLAIM, 3)
    assert verdict is not None and verdict.n == 4 and verdict.observed == 0.75
    assert verdict.right is True
    winning = [ep(swap(hour(1 + i), "positive")) for i in range(4)]
    verdict = judge_claim(EpisodeWindow.of(winning), SWAP_CLAIM, 3)
    assert verdict is not None and verdict.right is False and verdict.observed == 0.0


def test_every_min_support_episodes_count_as_one_prediction() -> None:
    """Forty observations are more evidence than three: judged once on the pool, counted as
    n // min_support predictions, at most max_predictions."""
    dear = [ep(gas_obs(hour(2) + i * 60_000, 40.0)) for i in range(40)]
    verdict = judge_claim(EpisodeWindow.of(dear[:7]), GAS_CLAIM, 3, max_predictions=10)
    assert verdict is not None and verdict.right is False and verdict.predictions == 2
    verdict = judge_claim(EpisodeWindow.of(dear), GAS_CLAIM, 3, max_predictions=10)
    assert verdict is not None and verdict.predictions == 10
    assert len(verdict.episode_ids) == 40
    undecided = judge_claim(EpisodeWindow.of(dear[:2]), GAS_CLAIM, 3, max_predictions=10)
    assert undecided is not None and undecided.predictions == 0


def test_decisive_reversals_become_the_reversed_claim() -> None:
    dear = [ep(gas_obs(hour(2) + i * 60_000, 42.0)) for i in range(6)]
    rest = [ep(gas_obs(hour(10) + i * 60_000, 24.0)) for i in range(3)]  # the other hours
    verdict = judge_claim(EpisodeWindow.of(dear + rest), GAS_CLAIM, 3)
    assert verdict is not None and verdict.reference == 24.0
    flipped = reversal(GAS_CLAIM, verdict, min_support=3, min_effect=0.25, min_rate_gap=0.2)
    assert flipped is not None
    assert (flipped.direction, flipped.effect, flipped.baseline, flipped.support) == (
        "higher", 42.0, 24.0, 6)
    assert flipped.condition == GAS_CLAIM.condition and flipped.target == GAS_CLAIM.target
    # Too few episodes, or wrong but not past the baseline: no reversal.
    few = judge_claim(EpisodeWindow.of(dear[:5] + rest), GAS_CLAIM, 3)
    assert few is not None and reversal(GAS_CLAIM, few, min_support=3, min_effect=0.25,
                                        min_rate_gap=0.2) is None
    # Nothing outside the condition to measure the reversal against: no reversal either.
    alone = judge_claim(EpisodeWindow.of(dear), GAS_CLAIM, 3)
    assert alone is not None and alone.right is False and alone.reference is None
    assert reversal(GAS_CLAIM, alone, min_support=3, min_effect=0.25, min_rate_gap=0.2) is None
    meh = judge_claim(EpisodeWindow.of([ep(gas_obs(hour(2) + i, 20.0)) for i in range(6)]
                                       + rest), GAS_CLAIM, 3)
    assert meh is not None and meh.right is False
    assert reversal(GAS_CLAIM, meh, min_support=3, min_effect=0.25, min_rate_gap=0.2) is None
    # Swaps in high_vol that now win: the warning's claim reverses into "negative rate lower".
    wins = judge_claim(EpisodeWindow.of([ep(swap(hour(1) + i, "positive")) for i in range(6)]),
                       SWAP_CLAIM, 3)
    assert wins is not None
    flipped = reversal(SWAP_CLAIM, wins, min_support=3, min_effect=0.25, min_rate_gap=0.2)
    assert flipped is not None and flipped.direction == "lower" and flipped.effect == 0.0
    assert flipped.strategy == "eth-dca"


@given(effect=st.floats(-1e6, 1e6), baseline=st.floats(-1e6, 1e6),
       t=st.floats(0.0, 2.0))
def test_midpoint_verdict_sides(effect: float, baseline: float, t: float) -> None:
    """An observation between the midpoint and beyond the effect is right; beyond the
    baseline's side wrong; a claim with no gap is never judged."""
    observed = baseline + t * (effect - baseline)
    verdict = midpoint_verdict(observed, effect, baseline)
    mid = (effect + baseline) / 2
    if effect == baseline or observed == mid:
        assert verdict is None
    elif abs(observed - effect) < abs(observed - baseline):
        assert verdict is True
    elif abs(observed - effect) > abs(observed - baseline):
        assert verdict is False


def _alert(at: int) -> dict[str, Any]:
    return {"text": "Clade alert: whale moved WETH", "type": "clade_alert", "timestamp": at}


def _shift(at: int) -> dict[str, Any]:
    return {"text": "regime shift to high_vol", "type": "regime_shift", "timestamp": at,
            "regime": "high_vol"}


LINK = Claim({"event": "clade_alert", "within_ms": 600_000}, "event:regime_shift", "higher",
             0.85, 0.1, 10)


def test_event_key_matches_causal_discovery_names() -> None:
    at = hour(1)
    assert event_key(ep(_alert(at))) == "clade_alert"
    assert event_key(ep(gas_obs(at, 10.0))) is None
    assert event_key(ep(swap(at, "negative"))) == "action:swap:negative"
    assert event_keys(ep(_shift(at))) == {"regime_shift", "regime_shift_to_high_vol"}


def test_event_key_agrees_with_causal_discovery() -> None:
    discovery = pytest.importorskip("curator.learn.causal_discovery")
    at = hour(1)
    for params in (_alert(at), gas_obs(at, 10.0), swap(at, "negative"), _shift(at)):
        assert event_key(ep(params)) == discovery.default_event_key(ep(params))


def test_check_causal_counts_each_occurrence_once_across_cycles() -> None:
    """An alert is counted in the cycle in which its 10-minute window closed, never twice."""
    m = 60_000
    eps = [ep(e) for e in (_alert(hour(1)), _shift(hour(1) + 4 * m),      # followed
                           _alert(hour(2)),                                # not followed
                           _alert(hour(3)), _shift(hour(3) + 9 * m),       # followed
                           _alert(hour(4) - 5 * m))]                       # window still open
    cut = hour(2) + 20 * m
    index = EventIndex.of(eps)
    first = check_causal(index, LINK, closed_after=hour(0), closed_until=cut, min_support=1)
    second = check_causal(index, LINK, closed_after=cut, closed_until=hour(4), min_support=1)
    whole = check_causal(index, LINK, closed_after=hour(0), closed_until=hour(4), min_support=1)
    assert first is not None and second is not None and whole is not None
    assert (first.occurrences, first.followed) == (2, 1)
    assert (second.occurrences, second.followed) == (1, 1)
    assert (whole.occurrences, whole.followed) == (3, 2)
    assert [p[2] for p in whole.pairs] == [4 * m, 9 * m]
    assert whole.verdict.right is True  # 2/3 is above the (0.85 + 0.1) / 2 midpoint
    assert check_causal(index, GAS_CLAIM, closed_after=0, closed_until=hour(5),
                        min_support=1) is None


def test_a_link_is_judged_only_when_its_occurrences_say_something() -> None:
    """The midpoint picks the side; a few occurrences decide nothing chance explains."""
    from curator.claims import causal_verdict

    assert causal_verdict(1, 5, 0.4, 0.02, 0.05) is None  # P(<= 1 | 5, 0.4) = 0.34
    assert causal_verdict(0, 4, 0.4, 0.02, 0.05) is None  # 0.6^4 = 0.13
    assert causal_verdict(0, 12, 0.4, 0.02, 0.05) is False  # 0.6^12 = 0.002
    assert causal_verdict(1, 3, 0.4, 0.02, 0.05) is None  # P(>= 1 | 3, 0.02) = 0.06
    assert causal_verdict(2, 4, 0.4, 0.02, 0.05) is True  # P(>= 2 | 4, 0.02) = 0.002
    assert causal_verdict(0, 0, 0.4, 0.02, 0.05) is None


def test_a_claim_whose_numbers_lost_their_direction_is_judged_wrong() -> None:
    """Running totals can drift past the baseline: "gas is lower 02-04: 25 vs 24" no longer
    says what it claims, so new episodes count against it, whatever side they fall on."""
    drifted = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 25.0, 24.0, 40)
    dear = EpisodeWindow.of([ep(gas_obs(hour(2 + i / 10), 30.0)) for i in range(4)])
    verdict = judge_claim(dear, drifted, 3)  # past its midpoint (24.5) on the dear side
    assert verdict is not None and verdict.right is False
    cheap = EpisodeWindow.of([ep(gas_obs(hour(2 + i / 10), 7.0)) for i in range(4)])
    assert judge_claim(cheap, GAS_CLAIM, 3).right is True  # type: ignore[union-attr]


def test_a_rate_claimed_below_its_baseline_is_judged_by_the_lower_tail() -> None:
    """A reversed warning ("swaps in high_vol now lose 0% of the time, vs 50%") claims a rate
    *below* its baseline: the actions that keep winning confirm it and the losing ones
    contradict it. Judged by the upper tail, as a rate above its baseline is, a run of wins
    was never rare enough and the reversed rule stayed undecided (✓0) for good."""
    from curator.claims import causal_verdict

    assert causal_verdict(0, 12, 0.0, 0.5, 0.05) is True  # P(<= 0 | 12, 0.5) = 0.0002
    assert causal_verdict(1, 12, 0.05, 0.5, 0.05) is True  # P(<= 1 | 12, 0.5) = 0.003
    assert causal_verdict(1, 3, 0.05, 0.5, 0.05) is None  # P(<= 1 | 3, 0.5) = 0.5
    assert causal_verdict(9, 12, 0.05, 0.5, 0.05) is False  # P(>= 9 | 12, 0.05) ~ 0
    assert causal_verdict(2, 3, 0.2, 0.5, 0.05) is None  # P(>= 2 | 3, 0.2) = 0.10
    reversed_claim = Claim({"action": "swap", "regime": "high_vol"}, "outcome:negative_rate",
                           "lower", 0.0, 0.5, 6, strategy="eth-dca")
    wins = EpisodeWindow.of([ep(swap(hour(1) + i, "positive")) for i in range(12)])
    verdict = judge_claim(wins, reversed_claim, 3, 10, level=0.05)
    assert verdict is not None and verdict.right is True and verdict.predictions == 4
    losses = EpisodeWindow.of([ep(swap(hour(1) + i, "negative")) for i in range(12)])
    verdict = judge_claim(losses, reversed_claim, 3, 10, level=0.05)
    assert verdict is not None and verdict.right is False


def test_a_metric_claim_is_judged_and_reversed_against_the_level_outside_it() -> None:
    """Cheap gas 02-04 (6 vs 24): when the whole market doubles, gas at 02-04 (17) is still
    far below the other hours (48): right, against that level, though above the midpoint
    of the stored 6 and 24. And a window as dear as everything else (48 at 02-04 and
    elsewhere) is wrong but not reversed: it is not dearer than the rest."""
    night = [ep(gas_obs(hour(2) + i * 60_000, 17.0 + i % 2)) for i in range(6)]
    day = [ep(gas_obs(hour(10) + i * 60_000, 48.0 + i % 3)) for i in range(6)]
    verdict = judge_claim(EpisodeWindow.of(night + day), GAS_CLAIM, 3)
    assert verdict is not None and verdict.reference == 49.0 and verdict.right is True
    alone = judge_claim(EpisodeWindow.of(night), GAS_CLAIM, 3)  # vs the stored 24: wrong
    assert alone is not None and alone.right is False
    dear_night = [ep(gas_obs(hour(2) + i * 60_000, 48.0 + i % 2)) for i in range(6)]
    verdict = judge_claim(EpisodeWindow.of(dear_night + day), GAS_CLAIM, 3)
    assert verdict is not None and verdict.right is False
    assert reversal(GAS_CLAIM, verdict, min_support=3, min_effect=0.25, min_rate_gap=0.2) is None
    # The reference may come from a wider window (the curator's lookback) than the verdict.
    verdict = judge_claim(EpisodeWindow.of(dear_night), GAS_CLAIM, 3,
                          reference=EpisodeWindow.of(dear_night + day))
    assert verdict is not None and verdict.reference == 49.0


def test_against_rest_tests_the_reversed_direction_within_the_window() -> None:
    """log p of "the condition now lies on the other side of the rest of its window": tiny
    when gas at 02-04 is far dearer than the other hours, 0-ish when it is as dear."""
    from curator.claims import against_rest, condition_mask

    day = [ep(gas_obs(hour(10) + i * 60_000, 24.0 + i % 3)) for i in range(6)]
    dear = EpisodeWindow.of([ep(gas_obs(hour(2) + i * 60_000, 42.0 + i % 2))
                             for i in range(6)] + day)
    mask = condition_mask(dear, GAS_CLAIM.condition, scope=True)
    assert mask is not None and against_rest(dear, GAS_CLAIM, mask) < -10
    same = EpisodeWindow.of([ep(gas_obs(hour(2) + i * 60_000, 24.0 + i % 3))
                             for i in range(6)] + day)
    mask = condition_mask(same, GAS_CLAIM.condition, scope=True)
    assert mask is not None and against_rest(same, GAS_CLAIM, mask) > -1
    # An outcome rate: swaps in high_vol that win while the other swaps lose.
    wins = [ep(swap(hour(1) + i, "positive")) for i in range(8)]
    others = [ep(swap(hour(1) + i, "negative", regime="bull")) for i in range(8)]
    window = EpisodeWindow.of(wins + others)
    mask = condition_mask(window, SWAP_CLAIM.condition, scope=True, strategy="eth-dca")
    assert mask is not None and against_rest(window, SWAP_CLAIM, mask) < -5
    window = EpisodeWindow.of(wins + [ep(swap(hour(1) + i, "positive", regime="bull"))
                                      for i in range(8)])
    mask = condition_mask(window, SWAP_CLAIM.condition, scope=True, strategy="eth-dca")
    assert mask is not None and against_rest(window, SWAP_CLAIM, mask) > -1


def test_a_reversed_metric_claim_states_the_gap_of_its_own_window() -> None:
    """Reversed in a dear afternoon (everything at 40, the window at 62; a day's level 28):
    the new claim says "62 vs 40", the gap its own window shows, not "62 vs 28", which a
    calm day (40 in the window, 24 elsewhere) could never confirm."""
    dear = [ep(gas_obs(hour(2) + i * 60_000, 62.0)) for i in range(6)]
    rest = [ep(gas_obs(hour(4) + i * 60_000, 40.0 + (-1) ** i)) for i in range(4)]
    earlier = [ep(gas_obs(hour(-10) + i * 60_000, 24.0)) for i in range(12)]
    window = EpisodeWindow.of(dear + rest)
    verdict = judge_claim(window, GAS_CLAIM, 3,
                          reference=EpisodeWindow.of(earlier + dear + rest))
    assert verdict is not None and verdict.rest == 40.0 and verdict.reference is not None
    assert verdict.reference == 28.0
    flipped = reversal(GAS_CLAIM, verdict, min_support=3, min_effect=0.25, min_rate_gap=0.2)
    assert flipped is not None and (flipped.effect, flipped.baseline) == (62.0, 40.0)
    calm = EpisodeWindow.of([ep(gas_obs(hour(2, day=1) + i * 60_000, 40.0)) for i in range(6)]
                            + [ep(gas_obs(hour(4, day=1) + i * 60_000, 24.0))
                               for i in range(4)])
    again = judge_claim(calm, flipped, 3)
    assert again is not None and again.right is True


def test_a_rate_rule_is_judged_on_the_gap_it_asserts_not_the_rate_it_was_learned_at() -> None:
    """"WBTC swaps lose in bear: 81% vs 40%" was learned at the top of many hypotheses, and
    ordinary windows of an 80% rule fall below its 81/40 midpoint now and then (6 of 11
    lost: P = 0.05 under 81%). Weighed, as its learner tests it, against the gap it
    asserts (at least ``min_rate_gap`` or half its own: 60.5%), such a window is
    undecided and pooled; one that shows the rule is right, one at the base rate is
    wrong."""
    claim = dataclasses.replace(SWAP_CLAIM, effect=0.81, baseline=0.40, support=15)
    assert rate_alternative(claim, 0.2) == pytest.approx(0.605)
    assert rate_alternative(claim, 0.0) == 0.81  # off: the claim's own effect
    assert rate_alternative(dataclasses.replace(claim, effect=0.55), 0.2) == 0.55
    assert rate_alternative(dataclasses.replace(claim, direction="lower", effect=0.05),
                            0.2) == pytest.approx(0.20)

    def window(lost: int, n: int = 11) -> EpisodeWindow:
        return EpisodeWindow.of([ep(swap(hour(1) + i * 60_000,
                                         "negative" if i < lost else "positive"))
                                 for i in range(n)])

    # against the 81% it was learned at, that window is only 4.6 times likelier at 40%
    # (less than 1 / level): pooled, not wrong; a window at the base rate is wrong
    learned_at = judge_claim(window(6), claim, 3, 10, level=0.05)
    assert learned_at is not None and learned_at.right is None
    at_base = judge_claim(window(4, 20), claim, 3, 10, level=0.05)
    assert at_base is not None and at_base.right is False
    asserted = judge_claim(window(6), claim, 3, 10, level=0.05, least_gap=0.2)
    assert asserted is not None and asserted.right is None and asserted.predictions == 0
    shows = judge_claim(window(9), claim, 3, 10, level=0.05, least_gap=0.2)
    assert shows is not None and shows.right is True
    base = judge_claim(window(4, 20), claim, 3, 10, level=0.05, least_gap=0.2)
    assert base is not None and base.right is False
    assert base.to_dict()["holds_at"] == pytest.approx(0.605)


def test_a_borne_out_rule_is_wrong_only_when_no_effect_is_likelier_by_the_level() -> None:
    """"WETH/DAI swaps win: 94% (vs 70%)", borne out, asserts at least 90% (its gap of
    ``min_rate_gap``), and its swaps do win 90% of the time. Judged every cycle by the tail
    at 90% alone, one window in forty or so (17 of 23 wins: P = 0.023) called it wrong and
    it left PLAYBOOK.md until the world changed; that window is only 10 times likelier at
    70% than at 90%. Wrong now needs 1 / level (20) times: a window at the base rate is
    that, the rule's own rate hardly ever."""
    from curator.claims import causal_verdict, rate_likelihood_ratio

    assert causal_verdict(17, 23, 0.9, 0.7, 0.05) is False  # the tail: P(<= 17 | 23, 0.9)
    assert causal_verdict(17, 23, 0.9, 0.7, 0.05, wrong_by_ratio=True) is None
    assert rate_likelihood_ratio(17, 23, 0.7, 0.9) == pytest.approx(2.32, abs=0.01)
    assert causal_verdict(14, 23, 0.9, 0.7, 0.05, wrong_by_ratio=True) is False  # x580
    assert causal_verdict(22, 23, 0.9, 0.7, 0.05, wrong_by_ratio=True) is True  # unchanged
    assert causal_verdict(5, 23, 0.9, 0.7, 0.05, wrong_by_ratio=True) is False  # reversed
    # past the baseline, the rate the episodes show is the alternative: a small window of a
    # reversed world is decided as the tail decided it (2 of 5: 43x likelier at 40%, 16x
    # at 70%), one just short of it is not (3 of 5: 4.7x at 60%)
    assert causal_verdict(2, 5, 0.9, 0.7, 0.05) is False
    assert causal_verdict(2, 5, 0.9, 0.7, 0.05, wrong_by_ratio=True) is False
    assert causal_verdict(3, 5, 0.9, 0.7, 0.05, wrong_by_ratio=True) is None
    # a rate that cannot give the episodes: one loss refutes "always wins" either way
    assert causal_verdict(7, 10, 1.0, 0.7, 0.05, wrong_by_ratio=True) is False
    claim = Claim({"action": "swap", "token_pair": "WETH/DAI"}, "outcome:positive_rate",
                  "higher", 0.94, 0.70, 44, strategy="eth-dca")
    window = EpisodeWindow.of([ep(swap(hour(1) + i * 60_000,
                                       "positive" if i < 17 else "negative",
                                       pair="WETH/DAI")) for i in range(23)])
    assert judge_claim(window, claim, 3, 10, level=0.05).right is False  # type: ignore[union-attr]
    borne_out = judge_claim(window, claim, 3, 10, level=0.05, least_gap=0.2)
    assert borne_out is not None and borne_out.right is None and borne_out.predictions == 0


@pytest.mark.parametrize(("holds", "baseline"), [(0.9, 0.7), (0.6, 0.4), (0.2, 0.5),
                                                 (0.95, 0.35)])
def test_a_rule_at_its_asserted_rate_is_called_wrong_in_at_most_level_of_its_windows(
        holds: float, baseline: float) -> None:
    """Under the rate a rule is judged at, the windows the likelihood ratio calls wrong
    carry at most ``level`` of the binomial mass, whatever the window's size (Wald's bound
    for the windows between the two rates; those past the baseline are rarer still)."""
    import math

    from curator.claims import causal_verdict

    for n in (3, 10, 23, 60, 200):
        mass = sum(math.comb(n, k) * holds ** k * (1 - holds) ** (n - k) for k in range(n + 1)
                   if causal_verdict(k, n, holds, baseline, 0.05, wrong_by_ratio=True) is False)
        assert mass <= 0.05
