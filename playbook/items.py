"""``PlaybookItem``: one entry as the compiler sees it (the entry plus its decayed confidence).

The compiler is pure and knows nothing of decay or time: the caller (the
curator) computes each entry's effective confidence with the decay rules of
SPEC §4 at the cycle's ``now`` and hands it over here. A bare
``GrimoireEntry`` is accepted too and is shown at its stored confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grimoire.errors import ValidationError
from grimoire.records import GrimoireEntry

__all__ = ["PlaybookItem", "as_item"]


@dataclass(frozen=True, slots=True)
class PlaybookItem:
    """An entry and the confidence to show for it (already decayed, in [0, 1])."""

    entry: GrimoireEntry
    effective_confidence: float

    def __post_init__(self) -> None:
        value = self.effective_confidence
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError("must be a number", field="effective_confidence")
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValidationError(f"must be in [0, 1], got {value!r}",
                                  field="effective_confidence")

    @property
    def rank_score(self) -> float:
        """What the line cap ranks by: effective confidence × quality."""
        return self.effective_confidence * self.entry.quality_score


def as_item(value: PlaybookItem | GrimoireEntry) -> PlaybookItem:
    if isinstance(value, PlaybookItem):
        return value
    if isinstance(value, GrimoireEntry):
        return PlaybookItem(value, min(1.0, max(0.0, value.confidence)))
    raise ValidationError(
        f"expected a PlaybookItem or GrimoireEntry, got {type(value).__name__}", field="entries"
    )
