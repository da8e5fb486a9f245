"""The market simulator: determinism, valid episodes, and the planted regularities.

The regularity tests measure the generated episodes the way a learner would
(from timestamps, regimes, outcomes and event order), never the simulator's
internals, and check the null scenario shows no such gap.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.feeds import Scenario, SimFeed, load_scenario, make_feed, shipped_scenarios
from grimoire.records import Episode, episode_from_params

START_MS = 1_767_225_600_000  # 2026-01-01T00:00Z
TICKS = 3000
MS_PER_HOUR = 3_600_000

Episodes = list[dict[str, Any]]


@cache
def scenario_named(name: str) -> Scenario:
    return load_scenario(name)


def run(scenario: str, seed: int = 7, ticks: int = TICKS) -> Episodes:
    feed = make_feed("sim", scenario=scenario, seed=seed)
    step = int((feed.tick_seconds_hint or 40) * 1000)
    out: Episodes = []
    for tick in range(ticks):
        out.extend(feed.poll(tick, START_MS + tick * step))
    feed.close()
    return out


@pytest.fixture(scope="module")
def default() -> Episodes:
    return run("default")


@pytest.fixture(scope="module")
def null() -> Episodes:
    return run("null")


@pytest.fixture(scope="module")
def reversal() -> Episodes:
    return run("reversal")


def hour(e: dict[str, Any]) -> int:
    return int(e["timestamp"] // MS_PER_HOUR % 24)


def gas_split(eps: Episodes, lo: int = 0, hi: int = 10**9) -> tuple[list[float], list[float]]:
    obs = [e for e in eps if e["type"] == "observation" and lo <= e["tick_id"] < hi]
    inside = [e["metrics"]["gas_gwei"] for e in obs if 2 <= hour(e) < 4]
    outside = [e["metrics"]["gas_gwei"] for e in obs if not 2 <= hour(e) < 4]
    return inside, outside


def welch_t(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    return float((np.mean(a) - np.mean(b)) / math.sqrt(va + vb))


def swap_losses(eps: Episodes, lo: int = 0, hi: int = 10**9) -> tuple[list[bool], list[bool]]:
    """Negative outcomes of WETH/USDC swaps in high_vol, and of all other actions (base)."""
    acts = [e for e in eps if e["type"] == "action" and lo <= e["tick_id"] < hi]

    def target(e: dict[str, Any]) -> bool:
        return bool(e["actions"] == ["swap"] and e["token_pair"] == "WETH/USDC"
                    and e["regime"] == "high_vol")

    hv = [e["outcome"] == "negative" for e in acts if target(e)]
    base = [e["outcome"] == "negative" for e in acts if not target(e)]
    return hv, base


def two_prop_z(a: Sequence[bool], b: Sequence[bool]) -> float:
    pa, pb = float(np.mean(a)), float(np.mean(b))
    p = (sum(a) + sum(b)) / (len(a) + len(b))
    return (pa - pb) / math.sqrt(p * (1 - p) * (1 / len(a) + 1 / len(b)))


def lead_follow(eps: Episodes, lag: int = 3) -> tuple[list[bool], list[bool], list[int]]:
    """For whale/oracle alerts: is a regime_shift to high_vol within `lag` ticks? Same for
    every tick not in high_vol (the base rate). Also the lags in ms of the followed alerts."""
    shifts = {e["tick_id"]: e["timestamp"] for e in eps
              if e["type"] == "regime_shift" and e["regime"] == "high_vol"}
    alerts = [e for e in eps if e["type"] == "clade_alert"
              and ("whale" in e["text"].lower() or "oracle" in e["text"].lower())]
    followed = [any(a["tick_id"] + k in shifts for k in range(1, lag + 1)) for a in alerts]
    lags = [shifts[a["tick_id"] + k] - a["timestamp"] for a in alerts
            for k in range(1, lag + 1) if a["tick_id"] + k in shifts]
    calm = [e["tick_id"] for e in eps if e["type"] == "observation" and e["regime"] != "high_vol"]
    base = [any(t + k in shifts for k in range(1, lag + 1)) for t in calm]
    return followed, base, lags


# ---------------------------------------------------------------- contract


def test_same_inputs_give_identical_outputs() -> None:
    """Same scenario, seed and (tick, now_ms) sequence: byte-identical episodes."""
    a, b = run("default", ticks=400), run("default", ticks=400)
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(run("default", seed=8, ticks=400)) != json.dumps(a)


def test_never_reads_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output depends on now_ms only: a poisoned clock changes nothing."""
    expected = run("default", ticks=200)

    def boom() -> float:
        raise AssertionError("the simulator read the wall clock")

    monkeypatch.setattr(time, "time", boom)
    monkeypatch.setattr(time, "time_ns", boom)
    assert run("default", ticks=200) == expected


def test_every_episode_validates(default: Episodes, reversal: Episodes, null: Episodes) -> None:
    """Every generated dict is accepted by episode.write's validation, unchanged."""
    for eps in (default, reversal, null):
        for params in eps:
            ep = episode_from_params(params, id="x", now_ms=0)
            assert isinstance(ep, Episode)
            assert ep.timestamp == params["timestamp"]
    json.dumps(default, allow_nan=False)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), start=st.integers(0, 4_000_000_000_000),
       steps=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 10 * MS_PER_HOUR)),
                      min_size=1, max_size=40),
       scenario=st.sampled_from(["default", "null", "reversal"]))
def test_any_tick_sequence_is_valid_and_reproducible(
        seed: int, start: int, steps: list[tuple[int, int]], scenario: str) -> None:
    """Gapped ticks and arbitrary clocks: valid episodes stamped with the caller's tick and
    time, reproducible from the same inputs."""
    outputs = []
    for _ in range(2):
        feed = SimFeed(scenario_named(scenario), seed)
        tick, now, out = 0, start, []
        for gap, dt in steps:
            tick, now = tick + gap, now + dt
            eps = feed.poll(tick, now)
            assert [e["type"] for e in eps].count("observation") == 1
            for e in eps:
                episode_from_params(e, id="x", now_ms=0)
                assert (e["tick_id"], e["timestamp"]) == (tick, now)
            out.append(eps)
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_episode_shapes(default: Episodes) -> None:
    """Observations carry the market metrics, actions an outcome matching their P&L and a
    prediction; the rate stays near 1.7 episodes per tick."""
    obs = [e for e in default if e["type"] == "observation"]
    assert len(obs) == TICKS
    assert set(obs[0]["metrics"]) >= {"price", "volume", "gas_gwei", "slippage_bps",
                                      "pool_liquidity", "fees"}
    assert "gas" in obs[0]["text"] and "regime" in obs[0]["text"]
    acts = [e for e in default if e["type"] == "action"]
    assert {e["strategy"] for e in acts} == {"eth-dca", "weth-usdc-lp"}
    assert {a for e in acts for a in e["actions"]} >= {"swap", "rebalance", "add_liquidity"}
    for e in acts:
        assert (e["gain"] > 0) == (e["outcome"] == "positive")
        assert set(e["prediction"]) == {"expected_return_bps", "expected_gas_gwei",
                                        "expected_slippage_bps"}
        assert e["metrics"]["pnl"] == e["gain"]
    types = {e["type"] for e in default}
    assert {"regime_shift", "clade_alert", "replicant_report", "coordination_intent"} <= types
    assert 1.4 < len(default) / TICKS < 2.0


def test_poll_rejects_non_increasing_ticks_and_closed_feed() -> None:
    feed = make_feed("sim")
    feed.poll(5, START_MS)
    with pytest.raises(ValidationError) as info:
        feed.poll(5, START_MS)
    assert info.value.field == "tick"
    with pytest.raises(ValidationError):
        feed.poll(6, -1)
    feed.close()
    with pytest.raises(NotAvailableError):
        feed.poll(7, START_MS)


def test_shipped_scenarios_and_hint() -> None:
    assert {"default", "null", "reversal"} <= set(shipped_scenarios())
    assert make_feed("sim").tick_seconds_hint == 180


# ---------------------------------------------------------------- planted regularities


def test_gas_is_cheap_between_02_and_04_utc(default: Episodes) -> None:
    inside, outside = gas_split(default)
    assert len(inside) > 200
    assert np.mean(inside) < 9.0 < 20.0 < np.mean(outside)
    assert welch_t(inside, outside) < -20


def test_weth_usdc_swaps_mostly_lose_in_high_vol(default: Episodes) -> None:
    hv, base = swap_losses(default)
    assert len(hv) > 100
    assert np.mean(hv) > 0.7
    assert 0.28 < np.mean(base) < 0.42
    assert two_prop_z(hv, base) > 8


def test_whale_or_oracle_alert_precedes_high_vol(default: Episodes) -> None:
    followed, base, lags = lead_follow(default)
    assert len(followed) >= 15
    assert np.mean(followed) > 0.6
    assert np.mean(base) < 0.08
    # within the distiller's default 10-minute causal window
    assert lags and max(lags) <= 540_000


def test_other_clade_alerts_predict_nothing(default: Episodes) -> None:
    shifts = {e["tick_id"] for e in default if e["type"] == "regime_shift"
              and e["regime"] == "high_vol"}
    others = [e for e in default if e["type"] == "clade_alert"
              and "whale" not in e["text"].lower() and "oracle" not in e["text"].lower()]
    assert len(others) >= 10
    assert np.mean([any(e["tick_id"] + k in shifts for k in (1, 2, 3)) for e in others]) < 0.2


# ---------------------------------------------------------------- null and reversal


def test_null_scenario_has_no_gas_window(null: Episodes) -> None:
    inside, outside = gas_split(null)
    assert abs(np.mean(inside) / np.mean(outside) - 1) < 0.08
    assert abs(welch_t(inside, outside)) < 3.5


def test_null_scenario_has_no_losing_swaps(null: Episodes) -> None:
    hv, base = swap_losses(null)
    assert len(hv) >= 30
    assert abs(two_prop_z(hv, base)) < 3.5
    assert abs(np.mean(hv) - np.mean(base)) < 0.2


def test_null_scenario_alerts_precede_nothing(null: Episodes) -> None:
    followed, base, _ = lead_follow(null)
    assert len(followed) >= 15
    rate, p0 = float(np.mean(followed)), max(float(np.mean(base)), 1e-3)
    # no more follow-ups than the base rate allows (binomial, 3.5 sd)
    assert rate <= p0 + 3.5 * math.sqrt(p0 * (1 - p0) / len(followed)) + 1e-9


def test_null_regimes_carry_no_market_signal(null: Episodes) -> None:
    """Regime labels are pure noise in null: gas and slippage means equal across regimes."""
    obs = [e for e in null if e["type"] == "observation"]
    for metric in ("gas_gwei", "slippage_bps"):
        overall = np.mean([e["metrics"][metric] for e in obs])
        for regime in {e["regime"] for e in obs}:
            values = [e["metrics"][metric] for e in obs if e["regime"] == regime]
            if len(values) >= 50:
                assert abs(np.mean(values) / overall - 1) < 0.1, (metric, regime)


def test_reversal_matches_default_before_the_tick(default: Episodes,
                                                  reversal: Episodes) -> None:
    """Same draws until tick 1500: only the scenario name in refs differs."""
    def strip(eps: Episodes) -> Episodes:
        return [{k: v for k, v in e.items() if k != "ref"} for e in eps if e["tick_id"] < 1500]

    assert strip(default) == strip(reversal)


def test_reversal_flips_gas_window_after_the_tick(reversal: Episodes) -> None:
    before_in, before_out = gas_split(reversal, hi=1500)
    after_in, after_out = gas_split(reversal, lo=1500)
    assert np.mean(before_in) < 9 and welch_t(before_in, before_out) < -10
    assert np.mean(after_in) > 35 and welch_t(after_in, after_out) > 8


def test_reversal_flips_swap_outcomes_after_the_tick(reversal: Episodes) -> None:
    hv_before, base_before = swap_losses(reversal, hi=1500)
    hv_after, base_after = swap_losses(reversal, lo=1500)
    assert np.mean(hv_before) > 0.7 and two_prop_z(hv_before, base_before) > 4
    assert np.mean(hv_after) < 0.15 and two_prop_z(hv_after, base_after) < -3


def test_reversal_keeps_the_lead_lag(reversal: Episodes) -> None:
    followed, base, _ = lead_follow([e for e in reversal if e["tick_id"] >= 1500])
    assert np.mean(followed) > 0.5 > 0.1 > np.mean(base)


def test_label_noise_writes_an_estimated_regime() -> None:
    """Issue 11: with label_noise p the observation's regime is the true one with
    probability 1 − p; the market itself is the same with or without the noise."""
    noisy = load_scenario("default")
    assert noisy.label_noise == 0.15
    clean = dataclasses.replace(noisy, label_noise=0.0)
    a, b = SimFeed(noisy, 5), SimFeed(clean, 5)
    wrong = total = 0
    for tick in range(1, 3001):
        now = 1_767_225_600_000 + tick * 180_000
        got, ref = a.poll(tick, now), b.poll(tick, now)
        assert a.regime is b.regime
        obs = next(e for e in got if e["type"] == "observation")
        ref_obs = next(e for e in ref if e["type"] == "observation")
        assert obs["metrics"] == ref_obs["metrics"]
        assert ref_obs["regime"] == a.regime.value
        total += 1
        wrong += obs["regime"] != a.regime.value
    assert 0.11 < wrong / total < 0.19
