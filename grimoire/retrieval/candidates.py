"""The ``Candidate`` every retrieval stage works on, and its two factories.

A candidate is one episode or one entry as the pipeline sees it: its vector,
its rank in each backend that returned it, and the already-computed numbers
the rerank needs (effective confidence, quality, the time its recency is
measured from and the half-life of that recency). Stages take candidates and
plain mappings and return new values; nothing here touches a store, a clock
or the embedder.

Episodes have no confidence of their own. They enter the rerank at
``retrieval.episode_confidence`` (0.5: the initial confidence of a
self-learned entry, so a raw observation and a fresh distilled entry start
level) and ``retrieval.safety_incident_confidence`` (1.0, SPEC §7) for
safety incidents; their quality is their importance level mapped through
``retrieval.episode_quality`` (routine 0.25 … emergency 1.0), which is where
seed 000's importance term lives in this formula.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from grimoire.config import Config
from grimoire.errors import ValidationError
from grimoire.guard.instructions import UNTRUSTED
from grimoire.records import PAD, Episode, EpisodeType, GrimoireEntry

__all__ = [
    "Breakdown",
    "Candidate",
    "Kind",
    "Vector",
    "from_entry",
    "from_episode",
    "unit_vector",
]

Vector = npt.NDArray[np.float32]
Kind = Literal["episode", "entry"]
# Per factor: {"value", "weight", "contribution"} for rerank terms,
# {"value", "multiplier", …} for the multiplicative boosts.
Breakdown = dict[str, dict[str, float]]

_MS_PER_HOUR = 3_600_000
_NORM_TOLERANCE = 1e-3


def unit_vector(vector: object, field: str = "vector") -> Vector:
    """``vector`` as a finite, L2-normalised 1-D float32 array, or ValidationError.

    A zero vector is refused: it has no direction, so every cosine with it is
    meaningless and would silently read as "unrelated".
    """
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.size == 0:
        raise ValidationError("must be a non-empty 1-D vector", field=field)
    if not np.all(np.isfinite(array)):
        raise ValidationError("must be finite", field=field)
    norm = float(np.linalg.norm(array))
    if norm == 0.0:
        raise ValidationError("must not be the zero vector", field=field)
    out: Vector = (array / norm).astype(np.float32)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class Candidate:
    """One episode or entry in a retrieval, with what every stage needs.

    ``ranks`` maps a backend name ("vector", "bm25", "graph", …) to the 1-based
    rank it gave this item; an item added by the caller (a causal ancestor)
    has none. ``timestamp`` is the unix-ms instant its recency is measured
    from (an episode's time; an entry's decay clock ``last_accessed_at``) and
    ``half_life_ms`` the half-life of that recency (None: timeless, recency
    1.0 — structural entries). ``confidence`` is effective, i.e. already
    decayed. Equality is identity (the vector is an array); compare ``id``.
    """

    id: str
    kind: Kind
    content: str
    vector: Vector
    timestamp: int
    ranks: Mapping[str, int] = field(default_factory=dict)
    confidence: float = 0.5
    quality: float = 0.5
    half_life_ms: float | None = 48 * _MS_PER_HOUR
    regime: str | None = None
    category: str | None = None
    strategy: str | None = None
    is_bloodstain: bool = False
    emotion: PAD | None = None
    gain: float | None = None
    ref: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    # ``untrusted:…`` marks (an episode's marks, an entry's tags): the context block says so.
    marks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValidationError("must be a non-empty string", field="id")
        if self.kind not in ("episode", "entry"):
            raise ValidationError(f"must be 'episode' or 'entry', got {self.kind!r}", field="kind")
        if not isinstance(self.content, str):
            raise ValidationError("must be a string", field="content")
        vector = np.asarray(self.vector, dtype=np.float32)
        norm = float(np.linalg.norm(vector)) if vector.ndim == 1 else math.nan
        # Every stage reads cosine as a plain dot product, so the norm is checked once here.
        if vector.size == 0 or not math.isfinite(norm) or abs(norm - 1.0) > _NORM_TOLERANCE:
            raise ValidationError("must be a finite L2-normalised 1-D vector", field="vector")
        object.__setattr__(self, "vector", vector)
        for name in ("confidence", "quality"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
                raise ValidationError(f"must be a number in [0, 1], got {value!r}", field=name)
        for backend, rank in self.ranks.items():
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
                raise ValidationError(f"must be a 1-based rank, got {rank!r}",
                                      field=f"ranks.{backend}")
        if self.half_life_ms is not None and not (
            math.isfinite(self.half_life_ms) and self.half_life_ms > 0
        ):
            raise ValidationError("must be > 0 or None", field="half_life_ms")


def from_episode(
    episode: Episode,
    vector: object,
    config: Config,
    ranks: Mapping[str, int] | None = None,
    emotion: PAD | None = None,
) -> Candidate:
    """A candidate for an episode: neutral confidence, importance as quality, 48 h recency.

    ``emotion`` is the episode's PAD if the caller can decode its
    ``emotional_tag``; the record stores only a tag string.
    """
    rcfg = config.retrieval
    confidence = (
        rcfg.safety_incident_confidence
        if episode.type == EpisodeType.SAFETY_INCIDENT
        else rcfg.episode_confidence
    )
    return Candidate(
        id=episode.id,
        kind="episode",
        content=episode.text,
        vector=unit_vector(vector),
        timestamp=episode.timestamp,
        ranks=dict(ranks or {}),
        confidence=confidence,
        quality=rcfg.episode_quality.get(episode.importance.value, 0.5),
        half_life_ms=config.decay.episode_half_life_hours * _MS_PER_HOUR,
        regime=episode.regime.value if episode.regime else None,
        category=None,
        strategy=episode.strategy,
        emotion=emotion,
        gain=episode.gain,
        ref=episode.ref,
        provenance={"source": "episode", "ref": episode.ref, "type": episode.type.value,
                    "tool": episode.tool, "parent_episode_ids": [],
                    **{k: v for k, v in (("thread", episode.thread), ("actor", episode.actor))
                       if v is not None}},
        marks=tuple(m for m in episode.marks if m.startswith(UNTRUSTED)),
    )


def from_entry(
    entry: GrimoireEntry,
    vector: object,
    effective_confidence: float,
    half_life_ms: float | None,
    ranks: Mapping[str, int] | None = None,
) -> Candidate:
    """A candidate for an entry, with its decayed confidence and its recency half-life.

    Both numbers come from the decay module (``effective_confidence(entry,
    now)``; ``half_life_ms(entry) × strength``, None for structural), so that
    an entry's recency runs on its own decay scale and the rules live in one
    place.
    """
    return Candidate(
        id=entry.id,
        kind="entry",
        content=entry.content,
        vector=unit_vector(vector),
        timestamp=max(entry.last_accessed_at, entry.created_at),
        ranks=dict(ranks or {}),
        confidence=effective_confidence,
        quality=entry.quality_score,
        half_life_ms=half_life_ms,
        regime=entry.market_regime.value if entry.market_regime else None,
        category=entry.category.value,
        strategy=entry.strategy,
        is_bloodstain=entry.is_bloodstain,
        emotion=entry.emotional_tag,
        gain=None,
        ref=None,
        provenance={
            "source": entry.provenance.value,
            "parent_episode_ids": list(entry.parent_episode_ids),
            "parent_entry_ids": list(entry.parent_entry_ids),
            "golem_id": entry.source.golem_id,
        },
        marks=tuple(t for t in entry.tags if t.startswith(UNTRUSTED)),
    )
