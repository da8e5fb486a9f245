"""Confidence and decay math for Grimoire entries (SPEC §4, §11 context-aware penalty).

Owns: half-lives per decay class and their multipliers, retention and
effective confidence, initial confidence by provenance, the default decay
class of a category, votes and their clamps, strength bookkeeping
(reinforcement, dream validation), the context-aware failure penalty and the
episode recency factor.

Must not: touch a store, read the clock, log, or keep state. Every function
takes ``now`` and the config explicitly and returns a number or a new record
(``dataclasses.replace``); the caller persists it.

The SPEC decision is followed literally: retention is base 2,
``2 ** (-Δ / (half_life × multipliers × strength))``, so a "14-day half-life"
halves confidence in 14 days. Strength is kept out of :func:`half_life_ms`
(which is the class half-life times the entry's multipliers) and applied in
:func:`retention`, as the SPEC formula writes it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from grimoire.clock import MS_PER_DAY, MS_PER_HOUR
from grimoire.config import DecayConfig
from grimoire.errors import ConfigError, ValidationError
from grimoire.records import (
    Category,
    DecayClass,
    GrimoireEntry,
    Provenance,
    parse_enum,
)

__all__ = [
    "apply_vote",
    "context_aware_penalty",
    "default_decay_class",
    "dream_validate",
    "effective_confidence",
    "episode_recency",
    "evidence_confidence",
    "half_life_ms",
    "initial_confidence",
    "net_votes",
    "penalise_failure",
    "prediction_vote",
    "reinforce",
    "retention",
]

Vote = Literal["up", "down"]

# SPEC §4 table, "default for" column. Causal links start regime-conditional;
# only a link the knowledge graph confirms becomes structural (kg_confirmed).
# Observations are not a Category, but the admission gate and the distiller
# may promote one to an entry: SPEC puts them in the ephemeral class.
# Dream journals are hypotheses from offline replay, not validated knowledge:
# they get the short tactical class until dream/live validation strengthens them.
_DEFAULT_CLASS: dict[str, DecayClass] = {
    Category.INSIGHT.value: DecayClass.TACTICAL,
    Category.HEURISTIC.value: DecayClass.REGIME_CONDITIONAL,
    Category.WARNING.value: DecayClass.REGIME_CONDITIONAL,
    Category.CAUSAL_LINK.value: DecayClass.REGIME_CONDITIONAL,
    Category.STRATEGY_FRAGMENT.value: DecayClass.REGIME_CONDITIONAL,
    Category.DREAM_JOURNAL.value: DecayClass.TACTICAL,
    "observation": DecayClass.EPHEMERAL,
}


def _finite(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number, got {type(value).__name__}", field=field)
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError("must be finite", field=field)
    return number


def _unit(value: float, field: str) -> float:
    number = _finite(value, field)
    if not 0.0 <= number <= 1.0:
        raise ValidationError(f"must be in [0, 1], got {number}", field=field)
    return number


def _clamp(confidence: float, cfg: DecayConfig) -> float:
    return min(cfg.max_confidence, max(cfg.min_confidence, confidence))


def half_life_ms(entry: GrimoireEntry, cfg: DecayConfig) -> float | None:
    """The entry's half-life in ms: class half-life × compounding multipliers.

    ``None`` means structural: the entry never decays. Multipliers: warning ×2,
    bloodstain ×3, dream-validated ×2, quality_score below the threshold ×0.5.
    Strength is not included here; :func:`retention` applies it.
    """
    decay_class = parse_enum(DecayClass, entry.decay_class, "decay_class")
    if decay_class.value not in cfg.half_life_days:
        raise ConfigError(f"decay.half_life_days has no entry for {decay_class.value!r}")
    days = cfg.half_life_days[decay_class.value]
    if days is None:
        return None
    if not math.isfinite(days) or days <= 0:
        raise ConfigError(f"decay.half_life_days.{decay_class.value} must be > 0, got {days}")
    multiplier = 1.0
    if entry.category == Category.WARNING:
        multiplier *= cfg.warning_multiplier
    if entry.is_bloodstain:
        multiplier *= cfg.bloodstain_multiplier
    if entry.dream_validated:
        multiplier *= cfg.dream_multiplier
    if _finite(entry.quality_score, "quality_score") < cfg.low_quality_threshold:
        multiplier *= cfg.low_quality_multiplier
    return days * MS_PER_DAY * multiplier


def retention(entry: GrimoireEntry, now: int, cfg: DecayConfig) -> float:
    """``2 ** (-(now - last_accessed_at) / (half_life × multipliers × strength))``, in (0, 1].

    Structural entries retain 1.0. A ``now`` before ``last_accessed_at`` (a clock
    step back, a replayed report) counts as no time elapsed, never as growth.
    """
    strength = _finite(entry.strength, "strength")
    if strength < 1.0:
        raise ValidationError(f"must be >= 1, got {strength}", field="strength")
    half_life = half_life_ms(entry, cfg)
    if half_life is None:
        return 1.0
    elapsed = max(0, int(now) - int(entry.last_accessed_at))
    return float(2.0 ** (-elapsed / (half_life * strength)))


def effective_confidence(entry: GrimoireEntry, now: int, cfg: DecayConfig) -> float:
    """``max(floor, confidence × retention)``: knowledge fades but is never fully forgotten."""
    confidence = _finite(entry.confidence, "confidence")
    return max(cfg.floor, confidence * retention(entry, now, cfg))


def initial_confidence(provenance: Provenance | str, cfg: DecayConfig) -> float:
    """``base_confidence × provenance weight`` (0.5 for self-learned, 0.4 for clade, ...)."""
    member = parse_enum(Provenance, provenance, "provenance")
    try:
        weight = cfg.provenance_weight[member.value]
    except KeyError:
        raise ConfigError(f"decay.provenance_weight has no entry for {member.value!r}") from None
    return _clamp(cfg.base_confidence * weight, cfg)


def evidence_confidence(provenance: Provenance | str, confirmed: int, contradicted: int,
                        cfg: DecayConfig) -> float:
    """Confidence from evidence (SPEC §13 "confidence follows evidence"): the mean of the
    claim's chance of holding after ✓ ``confirmed`` and ✗ ``contradicted`` episodes, from
    a prior worth ``prior_strength`` (k) episodes at the provenance's initial confidence
    p0 (Beta-Bernoulli): ``(✓ + k·p0) / (✓ + ✗ + k)``, clamped to [0.05, 0.99].

    So equal evidence gives equal confidence whatever order it came in; one more ✓ never
    lowers it and one more ✗ never raises it; no evidence gives the initial confidence;
    and 0.99 needs about ``100·k·(0.99 − p0)`` confirming episodes with none against
    (490 for self-learned knowledge at the defaults). Age enters through
    :func:`effective_confidence` (the decay class's half-life since the last confirmation)."""
    prior = initial_confidence(provenance, cfg)
    k = _finite(cfg.prior_strength, "prior_strength")
    if k <= 0:
        raise ConfigError(f"decay.prior_strength must be > 0, got {k}")
    up, down = _count(confirmed, "confirmed"), _count(contradicted, "contradicted")
    return _clamp((up + k * prior) / (up + down + k), cfg)


def default_decay_class(category: Category | str, *, kg_confirmed: bool = False) -> DecayClass:
    """SPEC §4's default class for a category (or ``"observation"``).

    ``kg_confirmed`` marks a causal link the knowledge graph confirms: structural.
    """
    key = category.value if isinstance(category, Category) else category
    if key not in _DEFAULT_CLASS:
        allowed = ", ".join(_DEFAULT_CLASS)
        raise ValidationError(f"{category!r} is not one of: {allowed}", field="category")
    if kg_confirmed and key == Category.CAUSAL_LINK.value:
        return DecayClass.STRUCTURAL
    return _DEFAULT_CLASS[key]


def apply_vote(confidence: float, vote: Vote, cfg: DecayConfig) -> float:
    """One UPVOTE (+0.10) or DOWNVOTE (−0.15), clamped to [0.05, 0.99]."""
    value = _finite(confidence, "confidence")
    if vote == "up":
        return _clamp(value + cfg.upvote, cfg)
    if vote == "down":
        return _clamp(value - cfg.downvote, cfg)
    raise ValidationError(f"must be 'up' or 'down', got {vote!r}", field="vote")


def prediction_vote(confidence: float, right: bool, cfg: DecayConfig) -> float:
    """The curator's prediction validation: +0.05 if right, −0.10 if wrong, clamped."""
    value = _finite(confidence, "confidence")
    if not isinstance(right, bool):
        raise ValidationError(f"must be a bool, got {type(right).__name__}", field="right")
    delta = cfg.prediction_right if right else -cfg.prediction_wrong
    return _clamp(value + delta, cfg)


def _count(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"must be a non-negative integer, got {value!r}", field=field)
    return value


def net_votes(
    confidence: float,
    ups: int,
    downs: int,
    cfg: DecayConfig,
    *,
    right: int = 0,
    wrong: int = 0,
) -> float:
    """Apply a cycle's batched votes as one net change, clamped once.

    Netting (rather than applying votes one by one with a clamp after each)
    makes the result independent of the order the votes arrived in: 9 ups
    then 1 down from 0.9 would otherwise end at 0.84, 1 down then 9 ups at 0.99.
    ``right``/``wrong`` add the cycle's validated predictions.
    """
    value = _finite(confidence, "confidence")
    delta = (
        _count(ups, "ups") * cfg.upvote
        - _count(downs, "downs") * cfg.downvote
        + _count(right, "right") * cfg.prediction_right
        - _count(wrong, "wrong") * cfg.prediction_wrong
    )
    return _clamp(value + delta, cfg)


def reinforce(entry: GrimoireEntry, now: int) -> GrimoireEntry:
    """Retrieval + positive outcome: strength + 1 and the decay clock restarts at ``now``.

    The clock never moves backwards: a late report cannot age an entry.
    """
    return replace(
        entry,
        strength=_finite(entry.strength, "strength") + 1.0,
        last_accessed_at=max(int(entry.last_accessed_at), int(now)),
    )


def dream_validate(entry: GrimoireEntry, cfg: DecayConfig | None = None) -> GrimoireEntry:
    """A dream-validated pattern: strength + 0.5 (weaker than live) and the ×2 multiplier."""
    step = (cfg or DecayConfig()).dream_strength
    return replace(
        entry, strength=_finite(entry.strength, "strength") + step, dream_validated=True
    )


def context_aware_penalty(region_quality: float) -> float:
    """The factor a followed failure multiplies confidence by: ``0.7 + 0.25 × region_quality``.

    0.7 in a bad region (the entry probably misled), 0.95 in a good one (bad luck).
    """
    return 0.7 + 0.25 * _unit(region_quality, "region_quality")


def penalise_failure(
    confidence: float,
    region_quality: float,
    *,
    same_task_type: bool,
    followed: bool,
    cfg: DecayConfig,
) -> float:
    """SPEC §11: penalise a failure only if the task type matched and the entry was followed."""
    value = _finite(confidence, "confidence")
    factor = context_aware_penalty(region_quality)
    if not (same_task_type and followed):
        return value
    return _clamp(value * factor, cfg)


def episode_recency(timestamp: int, now: int, cfg: DecayConfig) -> float:
    """An episode's recency factor in retrieval: 48-hour half-life, 1.0 for future timestamps."""
    half_life = cfg.episode_half_life_hours * MS_PER_HOUR
    if not math.isfinite(half_life) or half_life <= 0:
        raise ConfigError(f"decay.episode_half_life_hours must be > 0, got {half_life}")
    elapsed = max(0, int(now) - int(timestamp))
    return float(2.0 ** (-elapsed / half_life))
