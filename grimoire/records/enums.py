"""Enumerations shared by episodes and entries (SPEC §2–3).

Every enum is a ``StrEnum`` so its value is what is stored and sent over the
socket. ``parse_enum`` turns untrusted input into a member or raises a
``ValidationError`` that names the field and the allowed values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from grimoire.errors import ValidationError

__all__ = [
    "Category",
    "DecayClass",
    "EntryStatus",
    "EpisodeType",
    "Importance",
    "Outcome",
    "Provenance",
    "Regime",
    "parse_enum",
    "parse_optional_enum",
]


class EpisodeType(StrEnum):
    OBSERVATION = "observation"
    ACTION = "action"
    REGIME_SHIFT = "regime_shift"
    CLADE_ALERT = "clade_alert"
    REPLICANT_REPORT = "replicant_report"
    COORDINATION_INTENT = "coordination_intent"
    SAFETY_INCIDENT = "safety_incident"


class Outcome(StrEnum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"
    DESCRIPTIVE = "descriptive"


class Importance(StrEnum):
    ROUTINE = "routine"
    NOTABLE = "notable"
    CRITICAL = "critical"
    EMERGENCY = "emergency"


class Regime(StrEnum):
    BULL = "bull"
    BEAR = "bear"
    SIDEWAYS = "sideways"
    HIGH_VOL = "high_vol"
    LOW_VOL = "low_vol"
    CRISIS = "crisis"


class Category(StrEnum):
    INSIGHT = "insight"
    HEURISTIC = "heuristic"
    WARNING = "warning"
    CAUSAL_LINK = "causal_link"
    STRATEGY_FRAGMENT = "strategy_fragment"
    DREAM_JOURNAL = "dream_journal"


class DecayClass(StrEnum):
    STRUCTURAL = "structural"
    REGIME_CONDITIONAL = "regime_conditional"
    TACTICAL = "tactical"
    EPHEMERAL = "ephemeral"


class EntryStatus(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    DEMOTED = "demoted"
    ARCHIVED = "archived"
    QUARANTINED = "quarantined"


class Provenance(StrEnum):
    SELF_LEARNED = "self_learned"
    CLADE = "clade"
    PREDECESSOR = "predecessor"
    STYX_QUERY = "styx_query"
    LETHE = "lethe"
    MARKETPLACE = "marketplace"
    REPLICANT = "replicant"
    DEATH_REFLECTION = "death_reflection"
    DREAM = "dream"
    AGENT = "agent"  # told through entry.add by the agent (not learned from outcomes)
    OWNER = "owner"  # told through entry.add by the owner (not learned from outcomes)


#: Knowledge that was told, not learned: PLAYBOOK.md lists it apart until outcomes confirm it.
TOLD_PROVENANCE = frozenset({Provenance.AGENT, Provenance.OWNER})


E = TypeVar("E", bound=StrEnum)


def parse_enum(enum: type[E], value: object, field: str) -> E:
    """Return the member of ``enum`` whose value is ``value`` or raise ValidationError."""
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    allowed = ", ".join(m.value for m in enum)
    raise ValidationError(f"{value!r} is not one of: {allowed}", field=field)


def parse_optional_enum(enum: type[E], value: object, field: str) -> E | None:
    return None if value is None else parse_enum(enum, value, field)
