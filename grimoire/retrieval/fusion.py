"""Reciprocal rank fusion (SPEC §9.2) and the normalisation the rerank reads.

Owns: turning per-backend ranked id lists into one fused score per id, and
the deterministic ordering every stage uses for ties (score descending, then
id ascending). Must not look at vectors, confidence or anything else: RRF
knows ranks only; :func:`convex` reads each backend's own scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from grimoire.errors import ValidationError
from grimoire.retrieval.candidates import Candidate

__all__ = ["convex", "normalise", "normalise_anchored", "ranked", "rrf", "rrf_from_candidates",
           "rrf_from_ranks"]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError(f"must be an integer >= 0, got {k!r}", field="rrf_k")


def rrf(ranked_lists: Mapping[str, Sequence[str]], k: int = 60) -> dict[str, float]:
    """``Σ over backends 1 / (k + rank)`` per id, rank 1-based by list position.

    An id listed twice by one backend counts once, at its best (first) rank: a
    backend that repeats itself must not double its vote. The result is a
    plain dict; order it with :func:`ranked`.
    """
    _check_k(k)
    scores: dict[str, float] = {}
    for ids in ranked_lists.values():
        seen: set[str] = set()
        for position, item in enumerate(ids, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + position)
    return scores


def rrf_from_ranks(ranks: Mapping[str, Mapping[str, int]], k: int = 60) -> dict[str, float]:
    """RRF from each id's ``{backend: 1-based rank}`` (the same sum as :func:`rrf`); the
    retrieval pipeline fuses this way, from the ranks it reads off the pool's lists."""
    _check_k(k)
    return {item: sum(1.0 / (k + rank) for rank in by_backend.values())
            for item, by_backend in ranks.items()}


def rrf_from_candidates(candidates: Iterable[Candidate], k: int = 60) -> dict[str, float]:
    """RRF straight from each candidate's ``ranks`` (the same sum as :func:`rrf`).

    A candidate without ranks (added by the caller, e.g. a causal ancestor)
    scores 0. A repeated id keeps its first candidate's ranks.
    """
    first: dict[str, Mapping[str, int]] = {}
    for candidate in candidates:
        first.setdefault(candidate.id, candidate.ranks)
    return rrf_from_ranks(first, k)


def normalise(scores: Mapping[str, float]) -> dict[str, float]:
    """Min-max over the ids that have a fused score > 0; ids at 0 stay 0.

    Why min-max and not ``score / max``: with k = 60 fused scores are flat
    (rank 1 vs rank 20 in one list is 1/61 vs 1/80, a ratio of 0.76), so
    dividing by the max would squeeze relevance into [0.76, 1] and let
    confidence and quality decide the order alone. Min-max spreads the pool
    over [0, 1]. Ids with no rank at all (score 0) are kept out of the min so
    that a caller-added ancestor does not shift everyone else's scale. When
    every ranked id has the same score they all get 1.0.
    """
    ranked_values = [value for value in scores.values() if value > 0.0]
    if not ranked_values:
        return dict.fromkeys(scores, 0.0)
    low, high = min(ranked_values), max(ranked_values)
    span = high - low
    out: dict[str, float] = {}
    for item, value in scores.items():
        if value <= 0.0:
            out[item] = 0.0
        elif span == 0.0:
            out[item] = 1.0
        else:
            out[item] = (value - low) / span
    return out


def normalise_anchored(scores: Mapping[str, float], ids: Iterable[str], k: int, depth: int,
                       ) -> dict[str, float]:
    """Fused scores of ``ids`` in [0, 1]: min-max with the minimum anchored at one
    backend's last place, ``1 / (k + depth)``; the retrieval pipeline's normalisation.

    :func:`normalise` takes the pool's own minimum, which for a small pool turns a
    one-rank difference between equally similar items into 1 vs 0 (30 % of the rerank
    score). The anchor keeps the spread of a full pool (whose minimum is that anyway)
    and leaves near-ties near-tied in a small one. Ids without a score get 0; when
    every ranked id is at (or past) last place they are all equally relevant (1.0).
    """
    _check_k(k)
    floor = 1.0 / (k + depth)
    values = {item: scores.get(item, 0.0) for item in ids}
    top = max(values.values(), default=0.0) - floor
    if top <= 0.0:
        return {item: 1.0 if value > 0.0 else 0.0 for item, value in values.items()}
    return {item: max(0.0, value - floor) / top for item, value in values.items()}


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Ids by score descending, ties broken by id ascending (deterministic)."""
    return sorted(scores, key=lambda item: (-scores[item], item))


def convex(lists: Mapping[str, Sequence[str]], scores: Mapping[str, Mapping[str, float]],
           weights: Mapping[str, float], depth: int = 0) -> dict[str, float]:
    """Score-aware fusion: ``Σ over lists w_backend · norm(score)``, in [0, Σ w].

    Why not RRF: equal-weight RRF gives the weaker backend the same vote as the
    stronger one and throws away how far apart its scores are (a BM25 match on a rare
    name and one on a common word both become "rank 1"). Here each list's scores are
    min-max normalised within the list (its best 1, its last 0; an id absent from a list
    gets 0 from it, the same as that list's last place), and the backend's weight says
    how much it is trusted. A list shorter than ``depth`` (the backend found fewer than
    it was asked for: a small store, few matching words) has no last place that stands
    for "unrelated", so its floor is the score's natural zero instead: a two-item list of
    near-equal scores stays near-tied rather than becoming 1 vs 0. A list is named
    ``backend.kind`` (``vector.episode``); its
    weight is ``weights[backend]`` (missing: 0). A list without scores (the graph
    backend ranks only) is scored by rank: ``1 - (rank - 1) / len``. An id listed twice
    by one list counts once, at its best score.
    """
    fused: dict[str, float] = {}
    for name, ids in lists.items():
        weight = float(weights.get(name.split(".", 1)[0], 0.0))
        if weight < 0.0:
            raise ValidationError(f"must be >= 0, got {weight}", field="fusion_weights")
        if weight == 0.0 or not ids:
            for item in ids:
                fused.setdefault(item, 0.0)
            continue
        own = scores.get(name)
        if own and all(item in own for item in ids):
            values = [own[item] for item in ids]
            high = max(values)
            low = min(values) if len(ids) >= depth else min(0.0, high)
            span = high - low
            norm = {item: 1.0 if span <= 0.0 else max(0.0, own[item] - low) / span
                    for item in ids}
        else:
            n = len(ids)
            norm = {}
            for position, item in enumerate(ids):
                norm.setdefault(item, 1.0 - position / n)
        for item, value in norm.items():
            fused[item] = fused.get(item, 0.0) + weight * value
    return fused
