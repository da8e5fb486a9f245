"""A gradient-boosted tree ensemble evaluated in numpy (no training library at run time).

The trees are stored flat: every node of every tree in one set of arrays (``feature``,
``threshold``, ``left``, ``right``, ``value``), each tree starting at its ``roots`` entry.
A leaf has feature -1 and points to itself, so evaluation walks all trees for all rows at
once, one level per step (``depth`` steps): every node's test is computed for every row
in one comparison, then each level is one gather, however many trees there are. A row
goes left when ``x <= threshold`` (LightGBM's numerical split; the features never hold
NaN). The raw score is the sum of the leaves plus ``base``; ``predict``
maps it through the logistic function (the binary objective's probability).

``from_lightgbm`` converts LightGBM's ``dump_model()`` dictionary (used by the training
script only); ``to_dict`` / ``from_dict`` are the JSON form shipped in the package.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.errors import ValidationError

__all__ = ["Forest"]

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True, eq=False)
class Forest:
    feature: I32
    threshold: F64
    left: I32
    right: I32
    value: F64
    roots: I32
    depth: int
    base: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.feature)
        if not (len(self.threshold) == len(self.left) == len(self.right) == len(self.value)
                == n) or n == 0:
            raise ValidationError("node arrays must be non-empty and of one length",
                                  field="reranker.trees")
        for name in ("left", "right", "roots"):
            arr = getattr(self, name)
            if len(arr) and (int(arr.min()) < 0 or int(arr.max()) >= n):
                raise ValidationError("a node index is out of range",
                                      field=f"reranker.trees.{name}")

    @property
    def n_features(self) -> int:
        return int(self.feature.max()) + 1 if len(self.feature) else 0

    @property
    def n_trees(self) -> int:
        return len(self.roots)

    def raw(self, x: npt.NDArray[np.floating[Any]]) -> F64:
        """The summed leaf values plus ``base``, one per row of ``x`` (rows × features)."""
        rows = np.asarray(x, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] < self.n_features:
            raise ValidationError(f"expected rows × >= {self.n_features} features, got "
                                  f"{rows.shape}", field="features")
        n = rows.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        # Every node's test for every row at once (one comparison per row and node), then
        # one gather per level: child[2 · node + went_left].
        went_left = (rows[:, self._columns] <= self.threshold).ravel()
        offsets = (np.arange(n) * len(self.feature))[:, None]
        node = np.broadcast_to(self.roots, (n, self.n_trees))
        for _ in range(self.depth):
            node = self._child[2 * node + went_left[offsets + node]]
        out: F64 = self.value[node].sum(axis=1) + self.base
        return out

    @functools.cached_property
    def _columns(self) -> I32:
        out: I32 = np.maximum(self.feature, 0)
        return out

    @functools.cached_property
    def _child(self) -> I32:
        out: I32 = np.stack([self.right, self.left], axis=1).ravel()
        return out

    def predict(self, x: npt.NDArray[np.floating[Any]]) -> F64:
        """The logistic of :meth:`raw`: a probability per row."""
        out: F64 = 1.0 / (1.0 + np.exp(-self.raw(x)))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature.tolist(), "threshold": self.threshold.tolist(),
                "left": self.left.tolist(), "right": self.right.tolist(),
                "value": self.value.tolist(), "roots": self.roots.tolist(),
                "depth": self.depth, "base": self.base}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Forest:
        try:
            return cls(np.asarray(data["feature"], dtype=np.int32),
                       np.asarray(data["threshold"], dtype=np.float64),
                       np.asarray(data["left"], dtype=np.int32),
                       np.asarray(data["right"], dtype=np.int32),
                       np.asarray(data["value"], dtype=np.float64),
                       np.asarray(data["roots"], dtype=np.int32),
                       int(data["depth"]), float(data.get("base", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"not a tree ensemble: {exc}", field="reranker.trees") from exc

    @classmethod
    def from_lightgbm(cls, dump: Mapping[str, Any]) -> Forest:
        """From ``Booster.dump_model()`` (numerical ``<=`` splits only)."""
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        value: list[float] = []
        roots: list[int] = []
        depth = 0

        def add(node: Mapping[str, Any], level: int) -> int:
            nonlocal depth
            me = len(feature)
            feature.append(-1)
            threshold.append(0.0)
            left.append(me)
            right.append(me)
            value.append(0.0)
            if "leaf_value" in node:
                value[me] = float(node["leaf_value"])
                depth = max(depth, level)
                return me
            if node.get("decision_type", "<=") != "<=":
                raise ValidationError("only numerical '<=' splits are supported",
                                      field="reranker.trees")
            feature[me] = int(node["split_feature"])
            threshold[me] = float(node["threshold"])
            left[me] = add(node["left_child"], level + 1)
            right[me] = add(node["right_child"], level + 1)
            return me

        for tree in dump["tree_info"]:
            roots.append(add(tree["tree_structure"], 0))
        return cls(np.asarray(feature, dtype=np.int32), np.asarray(threshold),
                   np.asarray(left, dtype=np.int32), np.asarray(right, dtype=np.int32),
                   np.asarray(value), np.asarray(roots, dtype=np.int32), depth)
