"""The Episode record (SPEC §2) and its validation from untrusted parameters.

An episode is one raw experience: an observation per tick, an action with its
outcome, a regime shift, a safety incident. Episodes are append-only. The
vector is not part of the record: the episodic store keeps it beside the row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grimoire.errors import ValidationError
from grimoire.records.enums import (
    EpisodeType,
    Importance,
    Outcome,
    Regime,
    parse_enum,
    parse_optional_enum,
)
from grimoire.records.text import require_unicode

__all__ = ["EPISODE_FIELDS", "Episode", "episode_from_params"]

MAX_TEXT_CHARS = 32_000
MAX_SHORT_CHARS = 512
MAX_METRICS = 64


@dataclass(frozen=True, slots=True)
class Episode:
    id: str
    text: str
    type: EpisodeType
    timestamp: int  # unix ms
    outcome: Outcome = Outcome.DESCRIPTIVE
    ref: str | None = None
    tool: str | None = None
    chain: str | None = None
    token_pair: str | None = None
    importance: Importance = Importance.ROUTINE
    tick_id: int | None = None
    regime: Regime | None = None
    strategy: str | None = None
    actions: tuple[str, ...] = ()
    emotional_tag: str | None = None
    gain: float | None = None
    valid_from: int | None = None
    valid_until: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    prediction: Mapping[str, float] = field(default_factory=dict)
    causal_hint: str | None = None  # id of an episode the writer believes caused this one
    thread: str | None = None  # the conversation, session or task it belongs to (API.md)
    actor: str | None = None  # who spoke or acted
    # Set by the write path, not the writer's claim: ``untrusted:instructions`` when the text
    # instructs a model (grimoire.guard.instructions). A caller's own marks are kept too.
    marks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, as returned over the socket."""
        return {
            "id": self.id,
            "text": self.text,
            "type": self.type.value,
            "timestamp": self.timestamp,
            "outcome": self.outcome.value,
            "ref": self.ref,
            "tool": self.tool,
            "chain": self.chain,
            "token_pair": self.token_pair,
            "importance": self.importance.value,
            "tick_id": self.tick_id,
            "regime": self.regime.value if self.regime else None,
            "strategy": self.strategy,
            "actions": list(self.actions),
            "emotional_tag": self.emotional_tag,
            "gain": self.gain,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
            "metrics": dict(self.metrics),
            "prediction": dict(self.prediction),
            "causal_hint": self.causal_hint,
            "thread": self.thread,
            "actor": self.actor,
            "marks": list(self.marks),
        }


EPISODE_FIELDS = frozenset(Episode.__dataclass_fields__) - {"id"}


def _opt_str(params: Mapping[str, Any], name: str, limit: int = MAX_SHORT_CHARS) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=name)
    if len(value) > limit:
        raise ValidationError(f"longer than {limit} characters", field=name)
    return require_unicode(value, name)


def _opt_int(params: Mapping[str, Any], name: str, *, minimum: int = 0) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be an integer, got {type(value).__name__}", field=name)
    if value < minimum:
        raise ValidationError(f"must be >= {minimum}", field=name)
    return value


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number, got {type(value).__name__}", field=name)
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError("must be finite", field=name)
    return number


def _number_map(params: Mapping[str, Any], name: str) -> dict[str, float]:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be an object of name: number", field=name)
    if len(value) > MAX_METRICS:
        raise ValidationError(f"more than {MAX_METRICS} keys", field=name)
    out: dict[str, float] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 64:
            raise ValidationError("keys must be non-empty strings of <= 64 chars", field=name)
        out[key] = _finite(item, f"{name}.{key}")
    return out


MAX_MARKS = 8


def _marks(params: Mapping[str, Any]) -> tuple[str, ...]:
    value = params.get("marks") or ()
    if not isinstance(value, list | tuple) or not all(
            isinstance(m, str) and 0 < len(m) <= 64 for m in value):
        raise ValidationError("must be a list of non-empty strings of <= 64 chars",
                              field="marks")
    if len(value) > MAX_MARKS:
        raise ValidationError(f"more than {MAX_MARKS} marks", field="marks")
    return tuple(dict.fromkeys(require_unicode(m, "marks") for m in value))


def episode_from_params(params: Mapping[str, Any], *, id: str, now_ms: int) -> Episode:
    """Validate the ``episode.write`` parameters and build an Episode.

    Raises ValidationError naming the first bad field; unknown fields are errors
    so that a typo (``metric`` for ``metrics``) is not silently dropped.
    """
    if not isinstance(params, Mapping):
        raise ValidationError("episode must be an object")
    unknown = set(params) - EPISODE_FIELDS
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(sorted(unknown))}", field="episode")
    text = params.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("is required and must be a non-empty string", field="text")
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(f"longer than {MAX_TEXT_CHARS} characters", field="text")
    require_unicode(text, "text")
    actions = params.get("actions") or ()
    if not isinstance(actions, list | tuple) or not all(isinstance(a, str) for a in actions):
        raise ValidationError("must be a list of strings", field="actions")
    gain = params.get("gain")
    timestamp = _opt_int(params, "timestamp")
    valid_from = _opt_int(params, "valid_from")
    valid_until = _opt_int(params, "valid_until")
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        raise ValidationError("is before valid_from", field="valid_until")
    return Episode(
        id=id,
        text=text,
        type=parse_enum(EpisodeType, params.get("type", "observation"), "type"),
        timestamp=now_ms if timestamp is None else timestamp,
        outcome=parse_enum(Outcome, params.get("outcome", "descriptive"), "outcome"),
        ref=_opt_str(params, "ref"),
        tool=_opt_str(params, "tool"),
        chain=_opt_str(params, "chain"),
        token_pair=_opt_str(params, "token_pair"),
        importance=parse_enum(Importance, params.get("importance", "routine"), "importance"),
        tick_id=_opt_int(params, "tick_id"),
        regime=parse_optional_enum(Regime, params.get("regime"), "regime"),
        strategy=_opt_str(params, "strategy"),
        actions=tuple(actions),
        emotional_tag=_opt_str(params, "emotional_tag"),
        gain=None if gain is None else _finite(gain, "gain"),
        valid_from=valid_from,
        valid_until=valid_until,
        metrics=_number_map(params, "metrics"),
        prediction=_number_map(params, "prediction"),
        causal_hint=_opt_str(params, "causal_hint"),
        thread=_opt_str(params, "thread"),
        actor=_opt_str(params, "actor"),
        marks=_marks(params),
    )
