"""The region MDP's read side (SPEC §11): a vector's region and how actions went from there.

Pure and store-free. ``RegionView`` holds the regions (centroids: running
means of unit episode embeddings) and the outcome counts per (region, action
type), and answers ``assign`` (nearest centroid by cosine), ``best_action``
(actions by mean reward), ``p_success`` (P(success | region, action), Beta(1,
1) prior, so 0.5 before any data) and ``region_quality`` / ``decay_factor``
for context-aware decay.

``curator.hierarchy.regions.RegionModel`` extends it with the learning (k-means
regions, transitions, incremental updates) and persists ``to_dict()`` in the
semantic store's meta under ``regions``. Readers that must not import the
curator (retrieval) rebuild the read side with ``RegionView.from_dict``,
which reads only the centroids and the outcome counts of that format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.errors import NotAvailableError, ValidationError

__all__ = [
    "FORMAT",
    "REGIONS_META",
    "ActionStats",
    "RegionView",
    "action_name",
    "check_format",
    "unit_rows",
]

Matrix = npt.NDArray[np.float64]
FORMAT = 1
REGIONS_META = "regions"  # the semantic meta key the curator persists the model under


@dataclass(slots=True)
class ActionStats:
    """Outcomes of one action type from one region."""

    n: int = 0
    reward_sum: float = 0.0
    successes: int = 0


def action_name(action_type: object) -> str:
    """An action type as the model keys it (stripped, lower case); ValidationError if empty."""
    if not isinstance(action_type, str) or not action_type.strip():
        raise ValidationError("must be a non-empty string", field="action_type")
    return action_type.strip().lower()


def unit_rows(matrix: Matrix) -> Matrix:
    """Rows scaled to length 1 (an all-zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1)
    out: Matrix = matrix / np.where(norms == 0, 1.0, norms)[:, None]
    return out


def check_format(data: Mapping[str, Any]) -> None:
    """ValidationError unless ``data`` is in this module's ``FORMAT``."""
    if data["format"] != FORMAT:
        raise ValidationError(f"unknown format {data['format']!r}", field="regions.format")


class RegionView:
    """Regions of embedding space and the action outcomes observed from each (read only)."""

    def __init__(self) -> None:
        self._centroids: Matrix = np.zeros((0, 0))
        self._counts: list[int] = []
        self._stats: dict[tuple[int, str], ActionStats] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegionView:
        """The read side of a persisted ``RegionModel.to_dict()``; malformed: ValidationError."""
        view = cls()
        try:
            check_format(data)
            view._load(data)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(f"malformed region model: {exc!r}", field="regions") from exc
        return view

    def _load(self, data: Mapping[str, Any]) -> None:
        """Centroids, counts and outcome counts from ``to_dict()`` data (raw errors escape)."""
        counts = [int(c) for c in data["counts"]]
        centroids = np.asarray(data["centroids"], dtype=np.float64)
        if counts:
            if centroids.shape[0] != len(counts) or centroids.ndim != 2 or not np.all(
                    np.isfinite(centroids)):
                raise ValidationError("do not match counts", field="regions.centroids")
            self._centroids, self._counts = centroids, counts
        for r, a, n, total, successes in data["stats"]:
            self._check_region(int(r), "regions.stats")
            self._stats[(int(r), str(a))] = ActionStats(int(n), float(total), int(successes))

    # ------------------------------------------------------------ regions

    @property
    def fitted(self) -> bool:
        return len(self._counts) > 0

    @property
    def n_regions(self) -> int:
        return len(self._counts)

    def assign(self, vector: npt.ArrayLike) -> int:
        """The region of one embedding (nearest centroid by cosine)."""
        row = np.asarray(vector, dtype=np.float64)
        if row.ndim != 1:
            raise ValidationError("must be one vector", field="vector")
        return int(self._labels(self._rows(row[None, :], "vector"))[0][0])

    # ------------------------------------------------------------ queries

    def best_action(self, region: int) -> list[tuple[str, float, int]]:
        """Actions tried from ``region`` as (action, mean reward, n), best mean first."""
        self._check_query(region)
        ranked = [(a, s.reward_sum / s.n, s.n) for (r, a), s in self._stats.items()
                  if r == region and s.n]
        return sorted(ranked, key=lambda x: (-x[1], -x[2], x[0]))

    def p_success(self, region: int, action_type: str) -> float:
        """P(success | region, action) with a Beta(1, 1) prior: 0.5 with no data."""
        self._check_query(region)
        stats = self._stats.get((region, action_name(action_type)), ActionStats())
        return (stats.successes + 1) / (stats.n + 2)

    def region_quality(self, region: int) -> float:
        """P(an action taken from this region succeeds), pooled over actions, Beta(1, 1) prior."""
        self._check_query(region)
        n = successes = 0
        for (r, _), stats in self._stats.items():
            if r == region:
                n += stats.n
                successes += stats.successes
        return (successes + 1) / (n + 2)

    def decay_factor(self, region: int) -> float:
        """Context-aware decay multiplier 0.7 + 0.25 · region_quality (RFC-013 Part E)."""
        return 0.7 + 0.25 * self.region_quality(region)

    # ------------------------------------------------------------ internals

    def _rows(self, vectors: npt.ArrayLike, field: str) -> Matrix:
        rows = np.asarray(vectors, dtype=np.float64)
        if rows.ndim != 2:
            raise ValidationError(f"must be a matrix, got shape {rows.shape}", field=field)
        if self.fitted and len(rows) and rows.shape[1] != self._centroids.shape[1]:
            raise ValidationError(f"has dimension {rows.shape[1]}, the regions "
                                  f"{self._centroids.shape[1]}", field=field)
        if not np.all(np.isfinite(rows)):
            raise ValidationError("must be finite", field=field)
        norms = np.linalg.norm(rows, axis=1)
        if np.any(norms == 0):
            raise ValidationError("has an all-zero row", field=field)
        unit: Matrix = rows / norms[:, None]
        return unit

    def _labels(self, rows: Matrix) -> tuple[npt.NDArray[np.int64], Matrix]:
        if not self.fitted:
            raise NotAvailableError("the region model has no regions yet: fit it on episodes")
        sims = rows @ unit_rows(self._centroids).T
        labels = np.argmax(sims, axis=1)
        best: Matrix = sims[np.arange(len(rows)), labels]
        return labels, best

    def _check_region(self, region: int, field: str) -> None:
        if isinstance(region, bool) or not isinstance(region, int | np.integer) or not (
                0 <= region < self.n_regions):
            raise ValidationError(f"no region {region!r} (the model has {self.n_regions})",
                                  field=field)

    @staticmethod
    def _check_query(region: int) -> None:
        if isinstance(region, bool) or not isinstance(region, int | np.integer) or region < 0:
            raise ValidationError(f"must be a region id (int >= 0), got {region!r}",
                                  field="region")
