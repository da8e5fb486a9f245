"""Reflexion's deterministic steps, and where the optional LLM steps plug in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator.learn.reflexion import Invariants, Verdict, deviations, reflect
from grimoire.config import DistillerConfig
from grimoire.errors import ConfigError, LLMError, ValidationError
from grimoire.records import Episode, EpisodeType, Importance, Outcome, episode_from_params

INV = Invariants()


def action(**kw: Any) -> Episode:
    base: dict[str, Any] = {
        "id": "act-1", "text": "swap 2 ETH", "type": EpisodeType.ACTION,
        "timestamp": 1_767_225_600_000, "outcome": Outcome.POSITIVE, "tool": "uniswap",
        "chain": "ethereum", "token_pair": "WETH/USDC", "actions": ("swap",),
        "strategy": "lp",
    }
    base.update(kw)
    return Episode(**base)


def test_deviations_in_bps() -> None:
    ep = action(prediction={"expected_return_bps": 50.0, "expected_gas_gwei": 20.0,
                            "expected_slippage_bps": 10.0},
                metrics={"return_bps": 20.0, "gas_gwei": 25.0, "slippage_bps": 18.0})
    result = reflect(ep, INV)
    assert result.deviations == {"return_bps": -30.0, "gas_bps": 2500.0, "slippage_bps": 8.0}
    assert result.incidents == () and result.verdict is Verdict.AS_PREDICTED


def test_return_from_gain_and_notional() -> None:
    ep = action(gain=-30.0, metrics={"notional_usd": 10_000.0},
                prediction={"expected_return_bps": 10.0})
    assert deviations(ep) == {"return_bps": pytest.approx(-40.0)}
    assert reflect(ep, INV).verdict is Verdict.AS_PREDICTED  # within the 100 bps tolerance


def test_revert_mismatch_is_a_deviation() -> None:
    ep = action(prediction={"expected_revert": 0.0}, metrics={"reverted": 1.0})
    assert deviations(ep) == {"revert_mismatch": 1.0}


@pytest.mark.parametrize(
    ("metrics", "prediction", "gain", "invariant"),
    [
        ({"slippage_bps": 240.0}, {}, None, "max_slippage_bps"),
        ({"gas_gwei": 450.0}, {}, None, "max_gas_gwei"),
        ({"return_bps": -800.0}, {}, None, "max_loss_bps"),
        ({"return_bps": -50.0}, {"expected_return_bps": 120.0}, None, "promise_tolerance_bps"),
        ({}, {"expected_return_bps": 300.0}, -12.0, "promise_tolerance_bps"),
    ],
)
def test_each_invariant_breach_writes_a_safety_incident(
    metrics: dict[str, float], prediction: dict[str, float], gain: float | None,
    invariant: str,
) -> None:
    ep = action(metrics=metrics, prediction=prediction, gain=gain, outcome=Outcome.NEGATIVE)
    result = reflect(ep, INV)
    assert result.verdict is Verdict.INVARIANT_BROKEN
    assert [i.invariant for i in result.incidents] == [invariant]
    incident = result.incidents[0]
    assert incident.confidence == 1.0
    assert incident.observed > incident.limit
    # the parameters are a valid episode.write request, written as-is by the facade
    written = episode_from_params(incident.params, id="inc-1", now_ms=0)
    assert written.type is EpisodeType.SAFETY_INCIDENT
    assert written.importance is Importance.CRITICAL
    assert written.causal_hint == "act-1" and written.strategy == "lp"
    assert invariant in written.text and "act-1" in written.text
    assert written.metrics == {"observed": incident.observed, "limit": incident.limit}


def test_incident_text_names_the_numbers() -> None:
    result = reflect(action(metrics={"slippage_bps": 240.0}), INV)
    assert result.incidents[0].params["text"] == (
        "Safety incident: invariant max_slippage_bps broken by action act-1 "
        "(swap on WETH/USDC): slippage 240 bps above the 100 bps limit.")


def test_several_breaches_give_several_incidents() -> None:
    ep = action(metrics={"slippage_bps": 500.0, "gas_gwei": 900.0, "return_bps": -900.0})
    names = {i.invariant for i in reflect(ep, INV).incidents}
    assert names == {"max_slippage_bps", "max_gas_gwei", "max_loss_bps"}


def test_verdicts_without_breach() -> None:
    assert reflect(action(), INV).verdict is Verdict.UNVERIFIED
    worse = action(metrics={"return_bps": -150.0}, prediction={"expected_return_bps": 0.0})
    assert reflect(worse, INV).verdict is Verdict.WORSE_THAN_PREDICTED
    better = action(metrics={"return_bps": 400.0}, prediction={"expected_return_bps": 50.0})
    assert reflect(better, INV).verdict is Verdict.BETTER_THAN_PREDICTED


@given(slip=st.floats(0.0, 100.0), gas=st.floats(0.0, 300.0), ret=st.floats(-500.0, 1e4))
def test_within_every_limit_no_incident(slip: float, gas: float, ret: float) -> None:
    ep = action(metrics={"slippage_bps": slip, "gas_gwei": gas, "return_bps": ret})
    assert reflect(ep, INV).incidents == ()


def test_only_action_episodes() -> None:
    with pytest.raises(ValidationError, match="type"):
        reflect(action(type=EpisodeType.OBSERVATION), INV)


def test_invariants_from_config() -> None:
    inv = Invariants.from_mapping(DistillerConfig().reflexion_invariants)
    assert inv == Invariants()
    assert Invariants.from_mapping({"max_gas_gwei": 50}).max_gas_gwei == 50.0
    with pytest.raises(ConfigError, match="max_gass_gwei"):
        Invariants.from_mapping({"max_gass_gwei": 50.0})
    with pytest.raises(ConfigError, match="max_gas_gwei"):
        Invariants.from_mapping({"max_gas_gwei": -1.0})


# --------------------------------------------------------------------- LLM path


class ScriptedLLM:
    """A test double that answers by step and records the prompts it saw."""

    def __init__(self, fail: bool = False) -> None:
        self.prompts: list[str] = []
        self.fail = fail

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.fail:
            raise LLMError("endpoint timed out")
        if "INSIGHT:" in prompt:
            return "INSIGHT: When gas is above 100 gwei, do delay swaps because slippage rises\n"
        return "The realised return fell short of the prediction."


def test_without_llm_nothing_else_runs() -> None:
    result = reflect(action(metrics={"return_bps": 5.0}), INV)
    assert result.llm_notes == {} and result.candidate_insights == ()


def test_llm_steps_see_the_verification_record() -> None:
    llm = ScriptedLLM()
    ep = action(metrics={"return_bps": -50.0, "slippage_bps": 240.0},
                prediction={"expected_return_bps": 30.0})
    result = reflect(ep, INV, llm=llm)
    assert len(llm.prompts) == 3
    assert all('"return_bps": -80.0' in p for p in llm.prompts)
    assert set(result.llm_notes) == {"outcome_comparison", "counterfactual",
                                     "insight_extraction"}
    assert result.candidate_insights == (
        "When gas is above 100 gwei, do delay swaps because slippage rises",)
    assert result.verdict is Verdict.INVARIANT_BROKEN  # the LLM never changes the record


def test_llm_failure_keeps_the_deterministic_result() -> None:
    ep = action(metrics={"slippage_bps": 240.0})
    result = reflect(ep, INV, llm=ScriptedLLM(fail=True))
    assert result.incidents and result.verdict is Verdict.INVARIANT_BROKEN
    assert result.llm_notes == {"error": "endpoint timed out"}
    assert result.to_dict()["incidents"][0]["confidence"] == 1.0
