"""The learned reranker's stage (``retrieval.reranker``): gather its inputs, score the pool.

``retrieval.reranker``: ``"off"`` (the pipeline ranks as it did before the reranker),
``"on"`` (the weights shipped in ``grimoire/retrieval/learned/reranker.json``) or the path
of a weights file of the same form (``scripts/train_reranker.py --out``).

What it reads beside the pipeline's own numbers: the query's term weights and background
(``stages.relevance``, the same ones the relevance gate reads) and the query's resolved
time window. ``FEATURE_SINK``: when ``ctx.extras`` holds a list under this key, every
retrieval appends ``(query, ids, refs, features)`` to it, whatever ``retrieval.reranker``
says: how ``scripts/train_reranker.py`` and the benchmarks see the pool the reranker sees
(with a sink, as with the reranker on, the pool is the reranker's: each backend's
``retrieval.rerank_candidates`` best and the thread neighbours of ``stages.neighbours``).

Must not fuse, gate or select (the pipeline orders by the scores this returns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.retrieval.candidates import Breakdown, Candidate, Vector
from grimoire.retrieval.learned import FEATURES, QueryInfo, Reranker, load_reranker, matrix
from grimoire.retrieval.stages.relevance import background, query_terms
from grimoire.retrieval.temporal import Window

__all__ = ["FEATURE_SINK", "nothing_without_reranker", "reranker_of", "score"]

FEATURE_SINK = "retrieval.reranker_features"


def reranker_of(ctx: Context) -> Reranker | None:
    """The configured reranker, or None when ``retrieval.reranker`` is ``"off"``."""
    setting = ctx.config.retrieval.reranker
    if not isinstance(setting, str) or not setting:
        raise ValidationError(f"must be 'off', 'on' or a path, got {setting!r}",
                              field="retrieval.reranker")
    if setting == "off":
        return None
    if setting == "on":
        return load_reranker()
    return load_reranker(Path(setting).expanduser().resolve())


def score(ctx: Context, query: str, q: Vector, window: Window | None,
          pooled: Sequence[Candidate], ranks: Mapping[str, Mapping[str, int]],
          scores: Mapping[str, Mapping[str, float]], factors: Mapping[str, Breakdown],
          ) -> dict[str, float] | None:
    """Each pooled candidate's probability of being evidence for ``query`` (None: no
    reranker and no feature sink)."""
    model = reranker_of(ctx)
    sink = ctx.extras.get(FEATURE_SINK)
    if model is None and not isinstance(sink, list):
        return None
    info = QueryInfo(query, q, query_terms(ctx, query), background(ctx, q),
                     None if window is None else (window.start, window.end))
    x = matrix(info, pooled, ranks, scores, factors)
    if isinstance(sink, list):
        sink.append((query, [c.id for c in pooled], [c.ref for c in pooled], x))
    if model is None:
        return None
    p = model.forest.predict(x) if len(pooled) else np.zeros(0)
    return {c.id: float(v) for c, v in zip(pooled, p.tolist(), strict=True)}


def nothing_without_reranker(ctx: Context, query: str, q: Vector,
                             pooled: Sequence[Candidate]) -> bool:
    """"Nothing relevant" from the relevance evidence alone (the reranker off): no pooled
    item covers the shipped ``gate_floor``'s share of the query's IDF mass, and none is its
    cosine margin above the query's background. The floors ship with the weights
    (calibrated on the same data); a file without them never answers "nothing"."""
    floors = load_reranker().gate_floor
    if not pooled:
        return True
    if not floors:
        return False
    info = QueryInfo(query, q, query_terms(ctx, query), background(ctx, q))
    x = matrix(info, pooled, {}, {}, {})
    return all(float(x[:, FEATURES.index(name)].max()) < value
               for name, value in floors.items())
