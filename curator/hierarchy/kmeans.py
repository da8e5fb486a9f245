"""Weighted spherical k-means with k-means++ seeding (numpy only, no scipy).

Owns the clustering behind the region MDP (``curator.hierarchy.regions``): cosine
geometry for L2-normalised embeddings, point weights (so that an old centroid
can stand for the points it summarises), and a canonical point order so the
same data and seed always give the same regions.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["kmeans", "unit"]

Matrix = npt.NDArray[np.float64]


def _one_hot(labels: npt.NDArray[np.int64], k: int) -> Matrix:
    out: Matrix = np.zeros((len(labels), k))
    out[np.arange(len(labels)), labels] = 1.0
    return out


def unit(matrix: Matrix) -> Matrix:
    """Rows scaled to length 1 (an all-zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1)
    out: Matrix = matrix / np.where(norms == 0, 1.0, norms)[:, None]
    return out


def kmeans(points: Matrix, weights: npt.NDArray[np.float64], k: int,
           rng: np.random.Generator, max_iter: int) -> tuple[Matrix, Matrix, float]:
    """Weighted spherical k-means (k-means++ seeding) → (means, weights per region, quality).

    Points are sorted first, so the result does not depend on their order.
    A point may be an old centroid (a mean of unit vectors, norm ≤ 1) standing
    for ``weight`` original points: Σ w·x and x·u are then exact for its group.
    """
    # Canonical order (by the rows' bytes, then weight) makes the seeding, and
    # so the regions, independent of input order; it is far cheaper than a
    # lexsort over hundreds of columns.
    order = sorted(range(len(points)), key=lambda i: (points[i].tobytes(), float(weights[i])))
    points, weights = points[order], weights[order]
    weighted = weights[:, None] * points
    unit_points = unit(points)
    centres = [int(rng.choice(len(points), p=weights / weights.sum()))]
    while len(centres) < min(k, len(points)):
        gap = np.clip(1.0 - np.max(unit_points @ unit_points[centres].T, axis=1), 0.0, None)
        score = weights * gap**2
        if score.sum() <= 0:  # every point coincides with a centre: fewer regions
            break
        centres.append(int(rng.choice(len(points), p=score / score.sum())))
    directions = unit_points[centres]
    labels = np.full(len(points), -1)
    for _ in range(max_iter):
        sims = unit_points @ directions.T
        new_labels = np.argmax(sims, axis=1)
        for c in np.setdiff1d(np.arange(len(directions)), new_labels):
            # Re-seed an empty region at the point its centroid serves worst.
            new_labels[int(np.argmin(sims[np.arange(len(points)), new_labels]))] = c
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
        totals = _one_hot(labels, len(directions)).T @ weighted
        directions = unit(totals)
    quality = float((weights * np.einsum("ij,ij->i", points, directions[labels])).sum()
                    / weights.sum())
    one_hot = _one_hot(labels, len(directions))
    counts = one_hot.T @ weights
    keep = counts > 0  # two empty regions re-seeded at one point leave one empty: drop it
    means: Matrix = (one_hot.T @ weighted)[keep] / counts[keep, None]
    return means, counts[keep], quality
