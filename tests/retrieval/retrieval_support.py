"""Small factories for the retrieval tests: hand-made unit vectors and candidates."""

from __future__ import annotations

from typing import Any

import numpy as np

from grimoire.retrieval.candidates import Candidate, Vector

DIM = 16
NOW = 1_767_225_600_000  # 2026-01-01T00:00Z, FrozenClock's default
HOUR = 3_600_000
DAY = 24 * HOUR


def unit(*components: float | tuple[int, float], dim: int = DIM) -> Vector:
    """A unit vector from (axis, value) pairs, or from plain leading values."""
    vec = np.zeros(dim, dtype=np.float32)
    for index, part in enumerate(components):
        if isinstance(part, tuple):
            vec[part[0]] += part[1]
        else:
            vec[index] += part
    out: Vector = (vec / np.linalg.norm(vec)).astype(np.float32)
    return out


def axis(i: int, dim: int = DIM) -> Vector:
    return unit((i, 1.0), dim=dim)


def make_candidate(id: str = "c1", **overrides: Any) -> Candidate:
    """A fresh, neutral entry: confidence/quality 0.5, just accessed, no regime."""
    fields: dict[str, Any] = {
        "id": id,
        "kind": "entry",
        "content": f"content of {id}",
        "vector": axis(0),
        "timestamp": NOW,
        "half_life_ms": 14 * DAY,
        "confidence": 0.5,
        "quality": 0.5,
    }
    fields.update(overrides)
    return Candidate(**fields)
