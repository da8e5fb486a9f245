"""The Grimoire entry record (SPEC §3, seed 004 "GrimoireEntry Schema").

An entry is distilled knowledge: an insight, heuristic, warning, causal link,
strategy fragment or dream journal. Entries carry their own lifecycle
(status, votes, decay bookkeeping) and provenance back to episodes. A
``Claim`` is the structured form of a distiller finding, so that later
evidence can confirm or contradict the same claim exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grimoire.errors import ValidationError
from grimoire.records.enums import (
    Category,
    DecayClass,
    EntryStatus,
    Provenance,
    Regime,
)

__all__ = ["PAD", "Claim", "EntrySource", "GrimoireEntry"]


@dataclass(frozen=True, slots=True)
class PAD:
    """Pleasure-arousal-dominance vector, each in [-1, 1]."""

    pleasure: float
    arousal: float
    dominance: float

    @classmethod
    def from_dict(cls, value: object, field: str = "mood") -> PAD:
        if not isinstance(value, Mapping):
            raise ValidationError("must be {pleasure, arousal, dominance}", field=field)
        parts = []
        for name in ("pleasure", "arousal", "dominance"):
            item = value.get(name)
            if isinstance(item, bool) or not isinstance(item, int | float):
                raise ValidationError("must be a number in [-1, 1]", field=f"{field}.{name}")
            if not math.isfinite(item) or not -1.0 <= item <= 1.0:
                raise ValidationError("must be a number in [-1, 1]", field=f"{field}.{name}")
            parts.append(float(item))
        return cls(*parts)

    def to_dict(self) -> dict[str, float]:
        return {"pleasure": self.pleasure, "arousal": self.arousal, "dominance": self.dominance}


@dataclass(frozen=True, slots=True)
class EntrySource:
    golem_id: str = "local"
    generation_number: int | None = None
    owner_address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "golem_id": self.golem_id,
            "generation_number": self.generation_number,
            "owner_address": self.owner_address,
        }


@dataclass(frozen=True, slots=True)
class Claim:
    """A structured finding: under ``condition``, ``target`` is ``direction`` than baseline.

    ``condition`` is a JSON-safe mapping such as ``{"hour_window": [2, 4]}`` or
    ``{"regime": "high_vol", "action": "swap", "token_pair": "WETH/USDC"}``;
    ``target`` names what was measured (``metric:gas_gwei``,
    ``outcome:negative_rate``). ``effect`` is the value under the condition,
    ``baseline`` the value overall, ``support`` the episodes behind it.
    Two claims with the same ``key`` are the same claim, whatever their numbers.

    ``band_cut`` is the cut point of a ``metric_band`` condition (``{"metric_band":
    [metric, "upper" | "lower"]}``: the metric at or above / at or below it), the number
    the claim's sentence states ("when gas is above 31 gwei"), so that new episodes can be
    judged in the band and outside it. Like the numbers, it is not part of ``key``: the
    same band found again at a slightly moved cut is the same claim. None for every other
    condition, and for band claims stored before it was kept (their sentence holds it).
    """

    condition: Mapping[str, Any]
    target: str
    direction: str  # "higher" | "lower"
    effect: float
    baseline: float
    support: int
    p_value: float = 1.0
    strategy: str | None = None
    band_cut: float | None = None

    @property
    def key(self) -> str:
        cond = json.dumps(self.condition, sort_keys=True, separators=(",", ":"))
        return f"{self.strategy or '*'}|{cond}|{self.target}|{self.direction}"

    def states_its_direction(self) -> bool:
        """Whether its numbers show what it says: effect above baseline for "higher", below
        for "lower" (a reversed or vanished difference does not); True for another
        direction, which no number contradicts."""
        if self.direction == "higher":
            return self.effect > self.baseline
        if self.direction == "lower":
            return self.effect < self.baseline
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": dict(self.condition),
            "target": self.target,
            "direction": self.direction,
            "effect": self.effect,
            "baseline": self.baseline,
            "support": self.support,
            "p_value": self.p_value,
            "strategy": self.strategy,
            # only on band claims: every other claim keeps the bytes it always had
            **({} if self.band_cut is None else {"band_cut": self.band_cut}),
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Claim:
        cut = value.get("band_cut")
        return cls(
            condition=dict(value["condition"]),
            target=str(value["target"]),
            direction=str(value["direction"]),
            effect=float(value["effect"]),
            baseline=float(value["baseline"]),
            support=int(value["support"]),
            p_value=float(value.get("p_value", 1.0)),
            strategy=value.get("strategy"),
            band_cut=None if cut is None else float(cut),
        )


@dataclass(frozen=True, slots=True)
class GrimoireEntry:
    id: str
    category: Category
    content: str
    confidence: float
    quality_score: float
    decay_class: DecayClass
    provenance: Provenance
    created_at: int  # unix ms
    last_accessed_at: int  # unix ms; the decay clock
    validated_count: int = 0
    contradicted_count: int = 0
    market_regime: Regime | None = None
    valid_from: int | None = None
    valid_until: int | None = None
    parent_episode_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: EntrySource = field(default_factory=EntrySource)
    emotional_tag: PAD | None = None
    strength: float = 1.0
    status: EntryStatus = EntryStatus.CANDIDATE
    consecutive_low_confidence: int = 0
    access_count: int = 0
    strategy: str | None = None
    is_bloodstain: bool = False
    dream_validated: bool = False
    claim: Claim | None = None
    parent_entry_ids: tuple[str, ...] = ()  # e.g. the insight a heuristic was derived from
    updated_at: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, as returned over the socket and by ``entry.get``."""
        return {
            "id": self.id,
            "category": self.category.value,
            "content": self.content,
            "confidence": self.confidence,
            "quality_score": self.quality_score,
            "decay_class": self.decay_class.value,
            "provenance": self.provenance.value,
            "created_at": self.created_at,
            "last_accessed_at": self.last_accessed_at,
            "validated_count": self.validated_count,
            "contradicted_count": self.contradicted_count,
            "market_regime": self.market_regime.value if self.market_regime else None,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
            "parent_episode_ids": list(self.parent_episode_ids),
            "tags": list(self.tags),
            "source": self.source.to_dict(),
            "emotional_tag": self.emotional_tag.to_dict() if self.emotional_tag else None,
            "strength": self.strength,
            "status": self.status.value,
            "consecutive_low_confidence": self.consecutive_low_confidence,
            "access_count": self.access_count,
            "strategy": self.strategy,
            "is_bloodstain": self.is_bloodstain,
            "dream_validated": self.dream_validated,
            "claim": self.claim.to_dict() if self.claim else None,
            "parent_entry_ids": list(self.parent_entry_ids),
            "updated_at": self.updated_at,
        }
