"""Reflexion for one action episode: prediction vs outcome, invariants, safety incidents (SPEC §7).

Owns seed 004's deterministic steps: (1) outcome verification, the
deviations in basis points between what the episode's ``prediction``
promised (``expected_return_bps``, ``expected_gas_gwei``,
``expected_slippage_bps``, ``expected_revert``) and what its ``gain`` and
``metrics`` show; (2) invariant checks, each breach becoming the parameters
of a ``safety_incident`` episode (importance critical, ``causal_hint`` = the
action) that the caller writes at confidence 1.0. Steps 3–5 (outcome
comparison, counterfactual, insight extraction) need an LLM: they plug in
through the ``llm`` argument and do not run without one.

Pure: an episode in, a result out. Must not: write episodes or entries, call
the network itself (the LLM client is injected), or let an LLM failure lose
the deterministic result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Protocol

from grimoire.errors import ConfigError, LLMError, ValidationError
from grimoire.guard.instructions import is_marked
from grimoire.logs import get_logger
from grimoire.records import Episode, EpisodeType, Importance, Outcome

__all__ = [
    "LLM",
    "Invariants",
    "ReflexionResult",
    "SafetyIncident",
    "Verdict",
    "reflect",
]

log = get_logger(__name__)

INCIDENT_CONFIDENCE = 1.0
_BPS = 10_000.0


class LLM(Protocol):
    """What Reflexion needs from the optional LLM client: one prompt in, text out."""

    def complete(self, prompt: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Invariants:
    max_slippage_bps: float = 100.0
    max_gas_gwei: float = 300.0
    max_loss_bps: float = 500.0
    promise_tolerance_bps: float = 100.0  # shortfall allowed on a promised positive return

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> Invariants:
        """From ``distiller.reflexion_invariants``; unknown names are configuration errors."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ConfigError("unknown invariant(s) in distiller.reflexion_invariants: "
                              + ", ".join(sorted(unknown)))
        out: dict[str, float] = {}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"distiller.reflexion_invariants.{name}: expected a number "
                                  f">= 0, got {value!r}")
            out[name] = float(value)
        return cls(**out)


class Verdict(StrEnum):
    INVARIANT_BROKEN = "invariant_broken"
    WORSE_THAN_PREDICTED = "worse_than_predicted"
    BETTER_THAN_PREDICTED = "better_than_predicted"
    AS_PREDICTED = "as_predicted"
    UNVERIFIED = "unverified"  # no prediction, or nothing to compare it with


@dataclass(frozen=True, slots=True)
class SafetyIncident:
    invariant: str
    observed: float
    limit: float
    params: Mapping[str, Any]  # valid ``episode.write`` parameters
    confidence: float = INCIDENT_CONFIDENCE


@dataclass(frozen=True, slots=True)
class ReflexionResult:
    episode_id: str
    deviations: Mapping[str, float]
    incidents: tuple[SafetyIncident, ...]
    verdict: Verdict
    llm_notes: Mapping[str, str] = field(default_factory=dict)
    candidate_insights: tuple[str, ...] = ()  # LLM path only; start at 0.5, through the gate

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "deviations": dict(self.deviations),
            "incidents": [{"invariant": i.invariant, "observed": i.observed, "limit": i.limit,
                           "params": dict(i.params), "confidence": i.confidence}
                          for i in self.incidents],
            "verdict": self.verdict.value,
            "llm_notes": dict(self.llm_notes),
            "candidate_insights": list(self.candidate_insights),
        }


def actual_return_bps(episode: Episode) -> float | None:
    """The realised return: ``metrics.return_bps``, else ``gain`` over ``metrics.notional_usd``."""
    if "return_bps" in episode.metrics:
        return float(episode.metrics["return_bps"])
    notional = episode.metrics.get("notional_usd")
    if episode.gain is not None and notional:
        return episode.gain / notional * _BPS
    return None


def deviations(episode: Episode) -> dict[str, float]:
    """Step 1: predicted vs actual, in basis points (positive = higher than predicted)."""
    pred, metrics = episode.prediction, episode.metrics
    out: dict[str, float] = {}
    actual = actual_return_bps(episode)
    if "expected_return_bps" in pred and actual is not None:
        out["return_bps"] = actual - pred["expected_return_bps"]
    if "expected_gas_gwei" in pred and "gas_gwei" in metrics and pred["expected_gas_gwei"] > 0:
        # relative, as seed 004's gas_deviation_bps
        out["gas_bps"] = (metrics["gas_gwei"] - pred["expected_gas_gwei"]) / \
            pred["expected_gas_gwei"] * _BPS
    if "expected_slippage_bps" in pred and "slippage_bps" in metrics:
        out["slippage_bps"] = metrics["slippage_bps"] - pred["expected_slippage_bps"]
    if "expected_revert" in pred and "reverted" in metrics:
        out["revert_mismatch"] = float(bool(pred["expected_revert"]) != bool(metrics["reverted"]))
    return out


def _breaches(episode: Episode, inv: Invariants) -> list[tuple[str, float, float, str]]:
    """Step 2: (invariant, observed, limit, sentence) for every invariant the episode breaks."""
    out: list[tuple[str, float, float, str]] = []
    metrics = episode.metrics
    slip = metrics.get("slippage_bps")
    if slip is not None and slip > inv.max_slippage_bps:
        out.append(("max_slippage_bps", slip, inv.max_slippage_bps,
                    f"slippage {slip:.0f} bps above the {inv.max_slippage_bps:.0f} bps limit"))
    gas = metrics.get("gas_gwei")
    if gas is not None and gas > inv.max_gas_gwei:
        out.append(("max_gas_gwei", gas, inv.max_gas_gwei,
                    f"gas {gas:.1f} gwei above the {inv.max_gas_gwei:.0f} gwei ceiling"))
    actual = actual_return_bps(episode)
    if actual is not None and -actual > inv.max_loss_bps:
        out.append(("max_loss_bps", -actual, inv.max_loss_bps,
                    f"a loss of {-actual:.0f} bps, beyond the {inv.max_loss_bps:.0f} bps limit"))
    promised = episode.prediction.get("expected_return_bps")
    lost = (actual is not None and actual < 0) or (actual is None and (episode.gain or 0) < 0)
    if promised is not None and promised > inv.promise_tolerance_bps and lost:
        shortfall = promised - (actual if actual is not None else 0.0)
        if shortfall > inv.promise_tolerance_bps:
            result = f"{actual:.0f} bps" if actual is not None else f"a gain of {episode.gain}"
            out.append(("promise_tolerance_bps", shortfall, inv.promise_tolerance_bps,
                        f"predicted +{promised:.0f} bps but realised {result}"))
    return out


def _incident(episode: Episode, name: str, observed: float, limit: float,
              sentence: str) -> SafetyIncident:
    what = " ".join(filter(None, [", ".join(episode.actions) or episode.tool,
                                  f"on {episode.token_pair}" if episode.token_pair else None]))
    text = f"Safety incident: invariant {name} broken by action {episode.id}"
    text += f" ({what}): {sentence}." if what else f": {sentence}."
    params: dict[str, Any] = {
        "type": EpisodeType.SAFETY_INCIDENT.value,
        "importance": Importance.CRITICAL.value,
        "outcome": Outcome.NEGATIVE.value,
        "text": text,
        "causal_hint": episode.id,
        "timestamp": episode.timestamp,
        "metrics": {"observed": observed, "limit": limit},
    }
    for name_ in ("tool", "chain", "token_pair", "strategy", "tick_id"):
        value = getattr(episode, name_)
        if value is not None:
            params[name_] = value
    if episode.regime is not None:
        params["regime"] = episode.regime.value
    if episode.actions:
        params["actions"] = list(episode.actions)
    return SafetyIncident(name, observed, limit, params)


def _verdict(devs: Mapping[str, float], incidents: tuple[SafetyIncident, ...],
             inv: Invariants) -> Verdict:
    if incidents:
        return Verdict.INVARIANT_BROKEN
    if "return_bps" not in devs:
        return Verdict.UNVERIFIED
    if devs["return_bps"] < -inv.promise_tolerance_bps:
        return Verdict.WORSE_THAN_PREDICTED
    if devs["return_bps"] > inv.promise_tolerance_bps:
        return Verdict.BETTER_THAN_PREDICTED
    return Verdict.AS_PREDICTED


def reflect(episode: Episode, invariants: Invariants, *, llm: LLM | None = None) -> ReflexionResult:
    """Run Reflexion on one action episode.

    Deterministic steps always run. With ``llm`` None (the default) nothing
    else does; with an LLM the outcome comparison, counterfactual and insight
    extraction prompts run on the verification record.
    """
    if episode.type is not EpisodeType.ACTION:
        raise ValidationError(f"Reflexion runs on action episodes, not {episode.type.value}",
                              field="type")
    devs = deviations(episode)
    incidents = tuple(_incident(episode, *b) for b in _breaches(episode, invariants))
    verdict = _verdict(devs, incidents, invariants)
    for incident in incidents:
        log.warning("reflexion.invariant.broken", episode_id=episode.id,
                    invariant=incident.invariant, observed=incident.observed,
                    limit=incident.limit)
    result = ReflexionResult(episode.id, devs, incidents, verdict)
    if llm is None or is_marked(episode.marks):  # marked text never reaches the model
        return result
    return _llm_steps(episode, result, llm)


# ------------------------------------------------------------------ LLM steps
# Seed 004 steps 3-5. The LLM interprets the deviations; it never decides
# whether there was one (that is the deterministic record above).

_RECORD_INTRO = "You are reviewing one on-chain action of an autonomous agent.\n"


def _record(episode: Episode, result: ReflexionResult) -> str:
    return json.dumps({
        "action": episode.to_dict(), "deviations_bps": dict(result.deviations),
        "verdict": result.verdict.value,
        "incidents": [i.invariant for i in result.incidents],
    }, sort_keys=True)


def _llm_steps(episode: Episode, result: ReflexionResult, llm: LLM) -> ReflexionResult:
    record = _record(episode, result)
    prompts = {
        "outcome_comparison": (
            f"{_RECORD_INTRO}Verification record: {record}\nExplain in two sentences what "
            "the deviation between prediction and outcome says about the agent's calibration."),
        "counterfactual": (
            f"{_RECORD_INTRO}Verification record: {record}\nUsing only these numbers, what would "
            "most likely have happened with the opposite action? Two sentences."),
        "insight_extraction": (
            f"{_RECORD_INTRO}Verification record: {record}\nIf this reveals a reusable pattern, "
            "write it on a line starting with 'INSIGHT: ' as 'When <condition>, do <action> "
            "because <reason>'. Otherwise answer 'NONE'."),
    }
    notes: dict[str, str] = {}
    try:
        for step, prompt in prompts.items():
            notes[step] = llm.complete(prompt).strip()
    except LLMError as exc:
        # The deterministic record stands; the LLM view is advisory and retried next time.
        log.warning("reflexion.llm.failed", episode_id=episode.id, error=str(exc))
        notes["error"] = str(exc)
    insights = tuple(
        line.removeprefix("INSIGHT:").strip()
        for line in notes.get("insight_extraction", "").splitlines()
        if line.startswith("INSIGHT:") and line.removeprefix("INSIGHT:").strip()
    )
    return ReflexionResult(result.episode_id, result.deviations, result.incidents,
                           result.verdict, notes, insights)
