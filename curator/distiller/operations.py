"""The learning pipeline's output: ExpeL insight operations (SPEC §7).

Owns the ``Operation`` record that the distiller and causal discovery emit
(ADD · UPVOTE · DOWNVOTE · EDIT, seed 004 "ExpeL Distillation"), the
``ExistingClaim`` view of stored entries that they read, and the mapping from
a claim's target/direction to its entry category. Must not: touch a store or
decide confidences: the facade applies operations (ADD at 0.5, votes per
SPEC §4) and runs them through the admission gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from grimoire.records import Category, Claim, Regime

__all__ = [
    "NEGATIVE_RATE",
    "POSITIVE_RATE",
    "ExistingClaim",
    "OpKind",
    "Operation",
    "category_for_claim",
]

NEGATIVE_RATE = "outcome:negative_rate"
POSITIVE_RATE = "outcome:positive_rate"


class OpKind(StrEnum):
    ADD = "ADD"
    UPVOTE = "UPVOTE"
    DOWNVOTE = "DOWNVOTE"
    EDIT = "EDIT"


class ExistingClaim(NamedTuple):
    """A stored entry's structured claim, as the facade hands it to the learners."""

    entry_id: str
    claim: Claim
    confidence: float


@dataclass(frozen=True, slots=True)
class Operation:
    """One change to the semantic store proposed by a learner.

    ``claim`` holds the numbers observed now (for a DOWNVOTE: the evidence
    against, keyed like the contradicted claim). ``content`` is the rendered,
    owner-readable sentence. ``target_entry_id`` names the entry that an
    UPVOTE, DOWNVOTE or EDIT acts on. ``evidence`` carries the test behind the
    operation (support, p_value, effect, baseline, and per learner: lag_ms,
    pairs of (cause_id, effect_id) for causal edges, ...).
    """

    op: OpKind
    category: Category
    claim: Claim
    content: str
    target_entry_id: str | None = None
    parent_episode_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    strategy: str | None = None
    regime: Regime | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A vote or edit that names no entry cannot be applied; fail where it is made.
        if self.op is OpKind.ADD and self.target_entry_id is not None:
            raise ValueError("an ADD operation has no target entry")
        if self.op is not OpKind.ADD and not self.target_entry_id:
            raise ValueError(f"a {self.op.value} operation needs target_entry_id")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (curator deltas, logs, the socket)."""
        return {
            "op": self.op.value,
            "category": self.category.value,
            "claim": self.claim.to_dict(),
            "content": self.content,
            "target_entry_id": self.target_entry_id,
            "parent_episode_ids": list(self.parent_episode_ids),
            "tags": list(self.tags),
            "strategy": self.strategy,
            "regime": self.regime.value if self.regime else None,
            "evidence": _json_safe(self.evidence),
        }


def category_for_claim(claim: Claim) -> Category:
    """Metric levels are insights, bad outcome rates warnings, good ones heuristics."""
    if claim.target.startswith("event:"):
        return Category.CAUSAL_LINK
    if claim.target == NEGATIVE_RATE:
        return Category.WARNING if claim.direction == "higher" else Category.HEURISTIC
    if claim.target == POSITIVE_RATE:
        return Category.HEURISTIC if claim.direction == "higher" else Category.WARNING
    return Category.INSIGHT


def _json_safe(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
