"""Value types of the semantic store's API: filters, causal edges, log records.

They live here rather than in ``grimoire.records`` because only the semantic
store produces them and only its callers (retrieval, curator, facade) read
them. Pure data and validation; no SQL, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from grimoire.errors import ValidationError
from grimoire.records import Category, EntryStatus, GrimoireEntry, Regime, parse_enum

__all__ = [
    "CAUSAL_KINDS",
    "DEFAULT_HIDDEN_STATUSES",
    "AdmissionRecord",
    "CausalEdge",
    "CausalHop",
    "CuratorDelta",
    "EdgeKind",
    "EntryFilter",
    "EpisodeState",
    "QuarantineRecord",
    "RetrievalRecord",
    "StoreCounts",
]

# Archived (cold storage) and quarantined entries stay readable by id but are not
# knowledge the agent should be served unless a caller asks for them by status.
DEFAULT_HIDDEN_STATUSES = frozenset({EntryStatus.ARCHIVED, EntryStatus.QUARANTINED})
_DEFAULT_STATUSES = tuple(s for s in EntryStatus if s not in DEFAULT_HIDDEN_STATUSES)


class EdgeKind(StrEnum):
    """Where a causal edge came from (seed 004 causal graph, seed 003 outcome edges)."""

    EXPLICIT = "explicit"  # causal.link from the agent, or an episode's causal_hint
    AUTO = "auto"  # TCMF auto-linking of a new event to recent similar ones
    DISCOVERED = "discovered"  # distiller: A followed by B more often than B's base rate
    KG = "kg"  # derived from the knowledge graph
    CAUSED_SUCCESS = "caused_success"  # entry followed in a decision that went well
    CAUSED_FAILURE = "caused_failure"  # entry followed in a decision that went badly
    IRRELEVANT = "irrelevant"  # entry retrieved but ignored in a failed decision


# Kinds a causal walk follows by default: "irrelevant" records a non-cause.
CAUSAL_KINDS = frozenset(EdgeKind) - {EdgeKind.IRRELEVANT}


def _tuple_of(value: Iterable[Any] | None, name: str) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError("must be a list (or None for any)", field=name)
    return tuple(value)


@dataclass(frozen=True, slots=True)
class EntryFilter:
    """Which entries a list / KNN / BM25 query may return.

    Every field ``None`` means "any". ``statuses=None`` means every status except
    archived and quarantined. In ``strategies`` and ``regimes`` a ``None`` member
    stands for global (strategy-less) and regime-agnostic entries, so
    ``strategies=("eth-dca", None)`` is "this strategy and global".
    An empty tuple matches nothing.
    """

    categories: tuple[Category, ...] | None = None
    statuses: tuple[EntryStatus, ...] | None = None
    strategies: tuple[str | None, ...] | None = None
    regimes: tuple[Regime | None, ...] | None = None

    def __post_init__(self) -> None:
        cats = _tuple_of(self.categories, "categories")
        stats = _tuple_of(self.statuses, "statuses")
        strats = _tuple_of(self.strategies, "strategies")
        regs = _tuple_of(self.regimes, "regimes")
        if cats is not None:
            cats = tuple(parse_enum(Category, c, "categories") for c in cats)
        if stats is not None:
            stats = tuple(parse_enum(EntryStatus, s, "statuses") for s in stats)
        if strats is not None and not all(s is None or isinstance(s, str) for s in strats):
            raise ValidationError("must be strategy names or None (global)", field="strategies")
        if regs is not None:
            regs = tuple(None if r is None else parse_enum(Regime, r, "regimes") for r in regs)
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "statuses", stats)
        object.__setattr__(self, "strategies", strats)
        object.__setattr__(self, "regimes", regs)

    @classmethod
    def for_strategy(
        cls, strategy: str | None, *, include_global: bool = True, **others: Any
    ) -> EntryFilter:
        """Entries of ``strategy`` (plus global ones unless ``include_global`` is False).

        ``strategy=None`` selects global entries only.
        """
        if strategy is None:
            return cls(strategies=(None,), **others)
        return cls(strategies=(strategy, None) if include_global else (strategy,), **others)

    @property
    def effective_statuses(self) -> tuple[EntryStatus, ...]:
        if self.statuses is not None:
            return self.statuses
        return _DEFAULT_STATUSES  # built once: iterating the enum costs µs per search

    def matches(self, entry: GrimoireEntry) -> bool:
        """True when ``entry`` passes this filter (used to re-check rows read later)."""
        return (
            (self.categories is None or entry.category in self.categories)
            and entry.status in self.effective_statuses
            and (self.strategies is None or entry.strategy in self.strategies)
            and (self.regimes is None or entry.market_regime in self.regimes)
        )


@dataclass(frozen=True, slots=True)
class CausalEdge:
    """A directed, weighted causal link between two episode or entry ids.

    ``weight`` is causal strength in [0, 1]; ``lag_ms`` the typical delay from
    cause to effect; ``evidence_count`` how many observations support it.
    (cause_id, effect_id, kind) is unique: an upsert replaces the edge's values
    and keeps its ``created_at``.
    """

    cause_id: str
    effect_id: str
    kind: EdgeKind = EdgeKind.EXPLICIT
    weight: float = 1.0
    relationship: str | None = None
    lag_ms: int | None = None
    evidence_count: int = 1
    created_at: int = 0
    updated_at: int = 0

    def validate(self) -> CausalEdge:
        """Return the edge with ``kind`` parsed, or raise ValidationError naming the field."""
        for name in ("cause_id", "effect_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or len(value) > 256:
                raise ValidationError("must be a non-empty id of <= 256 chars", field=name)
        if self.cause_id == self.effect_id:
            raise ValidationError("an event cannot cause itself", field="effect_id")
        kind = parse_enum(EdgeKind, self.kind, "kind")
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
            raise ValidationError("must be a finite number in [0, 1]", field="weight")
        if not 0.0 <= w <= 1.0:
            raise ValidationError(f"{w} is outside [0, 1]", field="weight")
        if self.relationship is not None and not isinstance(self.relationship, str):
            raise ValidationError("must be a string or None", field="relationship")
        for name, minimum in (("lag_ms", 0), ("evidence_count", 1)):
            value = getattr(self, name)
            if value is None and name == "lag_ms":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValidationError(f"must be an integer >= {minimum}", field=name)
        return CausalEdge(
            self.cause_id, self.effect_id, kind, float(w), self.relationship, self.lag_ms,
            self.evidence_count, self.created_at, self.updated_at,
        )


@dataclass(frozen=True, slots=True)
class CausalHop:
    """A node reached by a causal walk.

    ``depth`` is the number of edges from the start (1 = a direct cause/effect);
    ``path_weight`` the product of edge weights along the strongest shortest
    path; ``edge`` the last edge of that path (its ``relationship`` is the
    narrative glue of seed 001).
    """

    node_id: str
    depth: int
    path_weight: float
    edge: CausalEdge


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """An entry held back by the hallucination firewall, and what happened to it."""

    entry: GrimoireEntry
    reason: str
    conflicting_id: str | None
    quarantined_at: int
    resolution: str | None = None  # None (pending) | "released" | "rejected"
    resolved_at: int | None = None


@dataclass(frozen=True, slots=True)
class AdmissionRecord:
    """One admission-gate decision with its five factor values (SPEC §5)."""

    id: int
    decided_at: int
    decision: str
    factors: Mapping[str, float]
    composite: float
    candidate: str
    category: str | None
    entry_id: str | None
    off_topic: bool = False  # nearest stored neighbour below the off-topic line (SPEC §5)
    reasons: tuple[str, ...] = ()  # the gate's own words for its decision


@dataclass(frozen=True, slots=True)
class RetrievalRecord:
    """What a retrieval returned (ids with factor breakdowns) and, later, how it went."""

    retrieval_id: str
    query: str
    mode: str
    items: tuple[Mapping[str, Any], ...]
    created_at: int
    outcome: str | None = None
    outcome_detail: Mapping[str, Any] | None = None
    outcome_at: int | None = None


@dataclass(frozen=True, slots=True)
class CuratorDelta:
    """One change a curator cycle made to an entry, before and after (audit trail)."""

    id: int
    cycle: int
    op: str
    entry_id: str | None
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    created_at: int


@dataclass(frozen=True, slots=True)
class EpisodeState:
    """Mutable bookkeeping of an append-only episode, kept beside the entries."""

    episode_id: str
    consolidated: bool = False
    access_count: int = 0
    last_accessed_at: int | None = None
    replayed_at: int | None = None


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """Entry counts for ``status``: per category, per status, and per both."""

    total: int
    by_category: Mapping[str, int] = field(default_factory=dict)
    by_status: Mapping[str, int] = field(default_factory=dict)
    by_category_status: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    causal_edges: int = 0
    quarantine_pending: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_category": dict(self.by_category),
            "by_status": dict(self.by_status),
            "by_category_status": {k: dict(v) for k, v in self.by_category_status.items()},
            "causal_edges": self.causal_edges,
            "quarantine_pending": self.quarantine_pending,
        }
