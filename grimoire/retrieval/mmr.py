"""Maximal Marginal Relevance selection (SPEC §9.5): relevant, not repetitive.

Greedy: the next item is the one maximising

    λ · relevance(i) − (1 − λ) · max cosine(i, already selected)

with relevance = score / best score (so both terms live in comparable
ranges) and λ = 0.7. The whole scored pool competes for the ``top`` slots,
so when near-duplicates are dropped the next-best distinct items fill in
instead of the answer coming back short.

Deduplication: an id is selected at most once; an item whose cosine to an
already selected one is ≥ ``duplicate`` (0.98) is dropped, never shown
lower down: a second copy of the same text carries no information.

Tiers (``relevance.tiers``): with ``tiers`` given, every pick is made from the highest
tier that still has a candidate, so diversity never trades a relevant item for one the
query does not match; within a tier the rule above applies unchanged.

Owns: ordering for diversity. Must not change scores or read a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from grimoire.errors import ValidationError
from grimoire.retrieval.candidates import Candidate

__all__ = ["select"]


def select(
    candidates: Sequence[Candidate],
    scores: Mapping[str, float],
    lambda_: float = 0.7,
    top: int = 10,
    duplicate: float = 0.98,
    tiers: Mapping[str, int] | None = None,
) -> list[str]:
    """Up to ``top`` ids in MMR order; candidates without a score are ignored.

    Ties (equal MMR value) go to the higher score, then the smaller id, so
    the order is deterministic. ``lambda_`` = 1 is a plain sort by score
    (still deduplicated).
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValidationError(f"must be in [0, 1], got {lambda_!r}", field="mmr_lambda")
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValidationError(f"must be an integer >= 0, got {top!r}", field="top")
    pool: list[Candidate] = []
    seen: set[str] = set()
    for candidate in candidates:
        if candidate.id in scores and candidate.id not in seen:
            seen.add(candidate.id)
            pool.append(candidate)
    if not pool or top == 0:
        return []
    tier_of = tiers or {}
    # Pre-sorted by (tier desc, score desc, id): argmax's first-index tie rule is then the
    # documented one, and the first pick (no penalty yet) is simply pool[0].
    pool.sort(key=lambda c: (-tier_of.get(c.id, 0), -scores[c.id], c.id))
    raw = np.array([scores[c.id] for c in pool], dtype=np.float64)
    best = float(raw.max())
    relevance = lambda_ * (raw / best if best > 0.0 else np.zeros_like(raw))
    if tiers:
        # An MMR value lies in [-1, 1]: 3 per tier keeps every pick inside the best tier left.
        relevance = relevance + 3.0 * np.array([tier_of.get(c.id, 0) for c in pool],
                                               dtype=np.float64)
    vectors = np.array([c.vector for c in pool])  # rows; ~3x faster than np.stack
    spread = 1.0 - lambda_
    # One mat-vec per pick (the cosines of every item to the one just taken), not every
    # pair's at once: ``top`` rows of n instead of n², and a BLAS matrix-vector product,
    # which a process whose OpenBLAS runs several threads (a library host, a benchmark; the
    # daemon pins one) does not hand to its worker threads; the 89 × 89 Gram matrix it
    # did hand them took 3-12 ms on two busy cores, against 0.2 ms for ten mat-vecs.
    # closest[i] = max cosine of i to anything selected; +inf marks "taken or duplicate",
    # which makes its MMR value −inf without a separate mask (fewer numpy calls per pick:
    # at 60 items their fixed cost, not arithmetic, is what the loop spends).
    closest = (vectors @ vectors[0]).astype(np.float64)
    closest[closest >= duplicate] = np.inf
    closest[0] = np.inf
    order = [pool[0].id]
    while len(order) < top:
        if spread > 0.0:
            value = relevance - spread * closest
        else:
            value = np.where(np.isinf(closest), -np.inf, relevance)
        pick = int(np.argmax(value))
        if value[pick] == -np.inf:
            break
        order.append(pool[pick].id)
        np.maximum(closest, vectors @ vectors[pick], out=closest)
        closest[closest >= duplicate] = np.inf
        closest[pick] = np.inf
    return order
