"""Inferred causal predecessors of a new event (seed 000's ``auto_link_predecessors``).

For every earlier event within ``window_ms`` of the new one:

    temporal = exp(−2.4 · age / window_ms)     (the seed's exp(−0.05·ticks)
                                                over its 48-tick window)
    semantic = max(0, cos(new, earlier))       (0 without vectors)
    weight   = 0.5 · temporal + 0.5 · semantic

and an edge earlier → new is proposed when weight ≥ ``threshold`` (0.3).

Gate: the seed declares a ``semantic_threshold`` but never applies it; in
its additive form any event in the first ~21 % of the window links on time
alone (0.5 · temporal ≥ 0.3), so an agent that writes an observation per
tick would get a causal edge from every recent observation. Here an edge
also needs ``semantic ≥ min_similarity`` (config
``retrieval.auto_link_min_similarity``, 0.3; 0 restores the seed).

Owns: proposing weighted edges from plain events. Must not write them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from grimoire.errors import ValidationError
from grimoire.retrieval.candidates import Vector

__all__ = ["Event", "predecessors", "predecessors_of"]

_TEMPORAL_RATE = 2.4  # 0.05 per tick × 48 ticks: the seed's decay at the window's edge


class Event(NamedTuple):
    id: str
    timestamp: int  # unix ms
    vector: Vector | None = None  # L2-normalised, or None


def predecessors(
    new_event: Event,
    recent_events: Iterable[Event],
    window_ms: int,
    threshold: float = 0.3,
    min_similarity: float = 0.3,
) -> list[tuple[str, float]]:
    """Proposed causes ``(cause_id, weight)``, strongest first (ties by id), weight to 3 places."""
    if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 1:
        raise ValidationError(f"must be an integer >= 1, got {window_ms!r}", field="window_ms")
    out: list[tuple[str, float]] = []
    for event in recent_events:
        age = new_event.timestamp - event.timestamp
        if age <= 0 or age > window_ms or event.id == new_event.id:
            continue
        temporal = math.exp(-_TEMPORAL_RATE * age / window_ms)
        semantic = 0.0
        if new_event.vector is not None and event.vector is not None:
            semantic = max(0.0, float(np.dot(new_event.vector, event.vector)))
        if semantic < min_similarity:
            continue
        weight = 0.5 * temporal + 0.5 * semantic
        if weight >= threshold:
            out.append((event.id, round(weight, 3)))
    return sorted(out, key=lambda pair: (-pair[1], pair[0]))


def predecessors_of(timestamp: int, vector: Vector, ids: list[str],
                    times: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32],
                    window_ms: int, threshold: float = 0.3, min_similarity: float = 0.3,
                    skip: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    """``predecessors`` over arrays (the write path's form: one matrix product, no
    per-event objects); the same weights, order and rounding."""
    if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 1:
        raise ValidationError(f"must be an integer >= 1, got {window_ms!r}", field="window_ms")
    if not ids:
        return []
    age = timestamp - times.astype(np.int64)
    semantic = np.maximum(0.0, vectors @ np.asarray(vector, dtype=np.float32))
    # Ages outside (0, window] are dropped below; clipped first, so that an episode far in
    # the future of this one does not overflow exp() (a RuntimeWarning on stderr).
    temporal = np.exp(-_TEMPORAL_RATE * np.clip(age, 0, window_ms) / window_ms)
    weight = 0.5 * temporal + 0.5 * semantic
    keep = (age > 0) & (age <= window_ms) & (semantic >= min_similarity) & (weight >= threshold)
    out = [(ids[i], round(float(weight[i]), 3)) for i in np.flatnonzero(keep)
           if ids[i] not in skip]
    return sorted(out, key=lambda pair: (-pair[1], pair[0]))
