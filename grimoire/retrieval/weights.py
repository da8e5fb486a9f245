"""Rerank weights learned online from outcome reports (Hedge / exponential weights).

Each rerank factor is an "expert". When the agent reports the outcome of a
decision, the factors that were high on the items it used gain weight after
a positive outcome and lose weight after a negative one:

    gain_f  = mean over used items of value_f  (− baseline_f, if given)
    w_f    ← w_f · exp(η · outcome · gain_f),  then renormalise to sum 1

``baseline`` (e.g. each factor's mean over the whole candidate pool of that
retrieval) makes the credit "was this factor higher on what was used than
on what was offered", which is the sharper signal; without it the
renormalisation still moves weight toward the factors that were highest on
the used items. Every weight stays ≥ ``floor`` (``retrieval.weight_min``):
after each update the weights are projected back onto {w ≥ floor, Σw = 1}
(clip at the floor, rescale the rest). Because no weight reaches 0 a
factor that fell out of favour can always recover, which plain
multiplicative weights cannot do.

Owns: the weight state and its update rule, as an immutable value
(``update`` returns a new one). Must not persist anything itself: the
caller stores ``to_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError

__all__ = ["HedgeWeights"]


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"must be a finite number, got {value!r}", field=name)
    return float(value)


def _project(weights: Mapping[str, float], floor: float) -> dict[str, float]:
    """The nearest-in-ratio weights with every w ≥ floor and Σw = 1 (clip, rescale, repeat)."""
    pinned: set[str] = set()
    while True:
        free = [name for name in weights if name not in pinned]
        budget = 1.0 - floor * len(pinned)
        total = sum(weights[name] for name in free)
        scaled = {name: weights[name] * budget / total for name in free} if total > 0 else {
            name: budget / len(free) for name in free
        }
        low = {name for name, value in scaled.items() if value < floor}
        if not low:
            return {name: floor if name in pinned else scaled[name] for name in weights}
        pinned |= low


@dataclass(frozen=True, slots=True)
class HedgeWeights:
    """Learned rerank weights; ``weights`` always sums to 1 with every value ≥ ``floor``."""

    weights: Mapping[str, float]
    floor: float = 0.02
    eta: float = 0.1
    frozen: bool = False
    updates: int = 0

    def __post_init__(self) -> None:
        floor = _finite(self.floor, "floor")
        _finite(self.eta, "eta")
        if not self.weights:
            raise ValidationError("must name at least one factor", field="weights")
        if not 0.0 <= floor < 1.0 / len(self.weights):
            raise ValidationError(
                f"must be in [0, 1/{len(self.weights)}) for {len(self.weights)} factors",
                field="floor")
        values = {}
        for name, value in self.weights.items():
            values[str(name)] = _finite(value, f"weights.{name}")
            if values[str(name)] < 0.0:
                raise ValidationError("must be >= 0", field=f"weights.{name}")
        if sum(values.values()) <= 0.0:
            raise ValidationError("must not all be 0", field="weights")
        valid = abs(sum(values.values()) - 1.0) <= 1e-9 and min(values.values()) >= floor
        # Already valid (e.g. restored from to_dict): keep exactly, so a round trip is exact.
        object.__setattr__(self, "weights", values if valid else _project(values, floor))

    @classmethod
    def from_config(cls, cfg: RetrievalConfig) -> HedgeWeights:
        """Start from the configured weights; frozen when ``learn_weights`` is off."""
        return cls(weights=dict(cfg.weights), floor=cfg.weight_min, eta=cfg.hedge_eta,
                   frozen=not cfg.learn_weights)

    def update(
        self,
        used: Sequence[Mapping[str, float]],
        outcome: float,
        eta: float | None = None,
        baseline: Mapping[str, float] | None = None,
    ) -> HedgeWeights:
        """The weights after one outcome report on the items the agent used.

        ``used`` holds each used item's factor values (``rerank.factor_values``);
        factors not among the weights (e.g. "emotion") are ignored, a factor
        missing from an item counts as its baseline (no credit). ``outcome``
        is in [−1, 1]: +1 positive, −1 negative, 0 neutral (no change). A
        frozen instance, no used items or a zero outcome return ``self``.
        """
        outcome = _finite(outcome, "outcome")
        if not -1.0 <= outcome <= 1.0:
            raise ValidationError(f"must be in [-1, 1], got {outcome}", field="outcome")
        rate = self.eta if eta is None else _finite(eta, "eta")
        if self.frozen or not used or outcome == 0.0 or rate == 0.0:
            return self
        base = baseline or {}
        updated: dict[str, float] = {}
        for name, weight in self.weights.items():
            reference = _finite(base.get(name, 0.0), f"baseline.{name}")
            credit = sum(
                _finite(item.get(name, reference), f"used.{name}") - reference for item in used
            ) / len(used)
            updated[name] = weight * math.exp(rate * outcome * credit)
        return HedgeWeights(weights=updated, floor=self.floor, eta=self.eta,
                            frozen=self.frozen, updates=self.updates + 1)

    def freeze(self, frozen: bool = True) -> HedgeWeights:
        """A copy that ignores (or, with ``False``, again learns from) outcome reports."""
        return HedgeWeights(weights=dict(self.weights), floor=self.floor, eta=self.eta,
                            frozen=frozen, updates=self.updates)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state, what the caller persists."""
        return {"weights": dict(self.weights), "floor": self.floor, "eta": self.eta,
                "frozen": self.frozen, "updates": self.updates}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> HedgeWeights:
        """Rebuild from :meth:`to_dict`; ValidationError names the first bad field."""
        if not isinstance(value, Mapping):
            raise ValidationError("must be an object", field="hedge_weights")
        weights = value.get("weights")
        if not isinstance(weights, Mapping):
            raise ValidationError("must be an object of factor: weight", field="weights")
        frozen = value.get("frozen", False)
        if not isinstance(frozen, bool):
            raise ValidationError("must be true or false", field="frozen")
        updates = value.get("updates", 0)
        if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
            raise ValidationError("must be an integer >= 0", field="updates")
        return cls(weights=dict(weights), floor=_finite(value.get("floor", 0.02), "floor"),
                   eta=_finite(value.get("eta", 0.1), "eta"), frozen=frozen, updates=updates)
