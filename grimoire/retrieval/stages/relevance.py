"""What the relevance gate (``retrieval.relevance``) reads from the stores, and its step.

- the query's content terms with their IDF, from the episode term sample
  (``stages.terms``; the entry sample when there are no episodes yet);
- the query's *background*: its mean cosine to a fixed, evenly spaced sample of the
  stored episode vectors (at most ``_BACKGROUND_ROWS``), what an unrelated memory
  scores with this embedder for this query. None without episodes (the pool's own
  mean stands in).

``gate`` turns the boosted scores into the scores that rank: evidence per pooled item,
its tier, ``tier + s / (1 + s)``, and a ``relevance`` line in each breakdown (lexical,
semantic, tier and the boosted score ``s``) so the owner sees why an item sits where
it does. Must not fuse, boost or select.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from grimoire.context import Context
from grimoire.retrieval.candidates import Breakdown, Candidate, Vector
from grimoire.retrieval.relevance import evidence, gated, idf, tiers
from grimoire.retrieval.stages.sources import keyword_query
from grimoire.retrieval.stages.terms import sample_of, terms_of

__all__ = ["background", "gate", "query_terms"]

_BACKGROUND_ROWS = 512
_BACKGROUND = "retrieval.background"  # ctx.extras: (store size, the sample's mean vector)


def query_terms(ctx: Context, query: str) -> dict[str, float]:
    """The query's content terms (stopwords out, ``terms_of``'s normalisation) → IDF."""
    terms = terms_of(keyword_query(query))
    if not terms:
        return {}
    sample = sample_of(ctx, "episode")
    if sample.size == 0:
        sample = sample_of(ctx, "entry")
    return {t: idf(sample.term_share(t), sample.size) for t in terms}


def background(ctx: Context, q: Vector) -> float | None:
    """The query's mean cosine to an evenly spaced sample of stored episodes (None: none).

    The mean of the sample's cosines is the query's dot with the sample's mean vector: that
    vector is kept per store size (``_BACKGROUND``), so a query costs one dot product of
    ``dim`` numbers instead of dequantising and multiplying 512 rows (~0.3 ms each time)."""
    held = ctx.extras.get(_BACKGROUND)
    n = ctx.episodes.count()
    if held is None or held[0] != n:
        ids, matrix = ctx.episodes.all_vectors()
        n = len(matrix)
        if n == 0:
            return None
        rows = np.unique(np.linspace(0, n - 1, min(n, _BACKGROUND_ROWS)).astype(np.intp))
        # By id (``vectors_for`` reads the file): through the mapping, 512 rows spread over
        # 1M mapped the page cache's large folios around each, 220 MiB of RSS.
        sample = ctx.episodes.vectors_for([ids[int(i)] for i in rows])
        held = ctx.extras[_BACKGROUND] = (n, np.mean(sample, axis=0, dtype=np.float64))
    if held[0] == 0:
        return None
    return float(held[1] @ np.asarray(q, dtype=np.float64))


def gate(ctx: Context, query: str, q: Vector, pooled: Sequence[Candidate],
         scores: Mapping[str, float], factors: Mapping[str, Breakdown], *,
         chain: Collection[str] = (), why: bool = False,
         ) -> tuple[dict[str, float], dict[str, int], dict[str, Breakdown]]:
    """(ranking scores, tiers, breakdowns with the ``relevance`` line) for ``pooled``."""
    floor = ctx.config.retrieval.relevance_floor
    present = [c for c in pooled if c.id in scores]
    found = evidence(query, q, query_terms(ctx, query), present, background(ctx, q),
                     terms_of, floor)
    tier = tiers(found, floor, chain=chain, why=why)
    ranked = gated({c.id: scores[c.id] for c in present}, tier)
    out: dict[str, Breakdown] = dict(factors)
    for c in present:
        ev = found[c.id]
        out[c.id] = {**out.get(c.id, {}), "relevance": {
            "value": ev.relevance, "lexical": ev.lexical, "semantic": ev.semantic,
            "tier": float(tier[c.id]), "boosted": scores[c.id]}}
    return ranked, tier, out
