"""The shipped reranker: trees, the features they read, the floor, how they were made.

``reranker.json`` beside this module holds ``{"features": [...], "trees": {...},
"floor": p, "meta": {...}}``: the tree ensemble (``forest.Forest``), the feature names it
was trained on (they must equal ``features.FEATURES``, in order: a model trained on other
columns refuses to load), the "nothing relevant" floor calibrated on the training data
(the best candidate's probability under which a query is answered as having nothing
relevant), the floors used instead when the reranker is off (``gate_floor``: the pool's best
absolute term coverage and cosine margin, calibrated on the same data) and the training
record (command, data, date, seed, library, size).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.retrieval.learned.features import FEATURES
from grimoire.retrieval.learned.forest import Forest

__all__ = ["SHIPPED", "Reranker", "load_reranker"]

SHIPPED = Path(__file__).with_name("reranker.json")


@dataclass(frozen=True, eq=False)
class Reranker:
    forest: Forest
    floor: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    # Without the reranker: "nothing relevant" when the pool's best of each of these
    # features (absolute term coverage, cosine above the background) is under its value.
    gate_floor: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(FEATURES), "floor": self.floor,
                "gate_floor": dict(self.gate_floor), "meta": dict(self.meta),
                "trees": self.forest.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reranker:
        names = data.get("features")
        if names != list(FEATURES):
            raise ValidationError("the model was trained on other features than this "
                                  "version computes; retrain it (scripts/train_reranker.py)",
                                  field="reranker.features")
        floor = data.get("floor", 0.0)
        if not isinstance(floor, int | float) or not 0.0 <= floor <= 1.0:
            raise ValidationError(f"must be a probability, got {floor!r}",
                                  field="reranker.floor")
        gate_floor = data.get("gate_floor", {})
        if not isinstance(gate_floor, dict) or any(
                name not in FEATURES or not isinstance(v, int | float)
                for name, v in gate_floor.items()):
            raise ValidationError("must map feature names to numbers",
                                  field="reranker.gate_floor")
        return cls(Forest.from_dict(data.get("trees", {})), float(floor),
                   dict(data.get("meta", {})), {k: float(v) for k, v in gate_floor.items()})


@functools.lru_cache(maxsize=4)
def load_reranker(path: Path = SHIPPED) -> Reranker:
    """The reranker stored at ``path`` (default: the one shipped in the package), cached."""
    if not path.is_file():
        raise NotAvailableError(f"no reranker weights at {path} (train them with "
                                f"scripts/train_reranker.py)")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}", field="reranker") from exc
    return Reranker.from_dict(data)
