"""Entity-centred expansion: the query's actors, and a second hop from the first hop's entities.

A question whose answer is spread over several memories ("where did she move from?":
one turn says "I moved from my home country", another, weeks later, "my grandma in my
home country, Sweden") is half answered by the backends: the first memory matches the
query, the second matches the *first memory*. Two lists join the pool, each fused like
a backend's (``retrieval.fusion_weights`` ``entity`` and ``hop``; weight 0 turns it off
and skips its work):

- ``entity.episode``: pooled episodes whose ``actor`` the query names ("what does
  Melanie …"), all with the same score: who spoke is an entity of the memory that its
  text need not repeat.
- ``hop.episode``: the second hop. The first hop is the pool's best
  ``retrieval.hop_first`` episodes by a preliminary convex fusion of the backends'
  lists. Its entities are (a) the distinctive terms of its texts that the query does not
  contain: a term in at least 2 documents (so it links to something) and in at most
  ``retrieval.hop_max_share`` of them (so the link means something), the
  ``retrieval.hop_terms`` rarest, document frequencies estimated from the BM25 word
  sample (``stages.terms``); and (b) the mention keys it names (``stages.mentions``:
  tokens, pools, addresses) that the query does not. A pooled episode outside the first
  hop scores the summed IDF of the first hop's terms it contains; an episode that
  mentions one of the first hop's keys is found in the mentions index (cached), pooled
  if it was not, and scores that key's IDF (its mention count standing in for the
  document frequency; a key with ``retrieval.candidates`` mentions or more is a hub and
  links nothing). A first-hop episode scores what the *other* first-hop episodes
  link it by (their mutual support), never what it names alone.

Cost: no model call and no full-text query; one regex over each pooled text, the first
hop's terms cached per episode, the mention look-ups through the graph backend's cache,
and a record read only for a new episode that makes the list.
Owns: these two lists. Must not fuse them into the ranking (``pipeline._fuse`` does).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from grimoire.context import Context
from grimoire.records import Episode
from grimoire.retrieval.fusion import convex
from grimoire.retrieval.stages.mentions import episode_keys, mentions_cached, query_keys
from grimoire.retrieval.stages.params import RetrieveRequest
from grimoire.retrieval.stages.records import MAX_CACHED, episode_by_id
from grimoire.retrieval.stages.sources import STOPWORDS, Pool, episode_ok
from grimoire.retrieval.stages.terms import sample_of, terms_of

__all__ = ["expand", "first_hop", "hop_terms"]

_TERMS = "retrieval.hop_terms"
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP_TERMS = frozenset(t for w in STOPWORDS for t in terms_of(w))
_MIN_DF = 2  # a term only the first hop has links nothing


def _entities(ctx: Context, episode: Episode) -> tuple[frozenset[str], tuple[str, ...]]:
    """An episode's normalised terms and mention keys, cached per id (episodes never
    change; both cost ~20 µs a text to recompute)."""
    cache: dict[str, tuple[frozenset[str], tuple[str, ...]]] | None = ctx.extras.get(_TERMS)
    if cache is None or len(cache) > MAX_CACHED:
        cache = ctx.extras[_TERMS] = {}
    found = cache.get(episode.id)
    if found is None:
        found = cache[episode.id] = (terms_of(episode.text), tuple(episode_keys(episode)))
    return found


def _actors(req: RetrieveRequest, pool: Pool) -> None:
    words = {w.lower() for w in _WORD.findall(req.query)}
    words |= {w[:-1] for w in words if w.endswith("s")}  # "Melanie's" splits to melanie, s
    named = []
    for episode in pool.episodes.values():
        if episode.actor is None:
            continue
        parts = [p for p in _WORD.findall(episode.actor.lower())
                 if len(p) > 1 and p not in STOPWORDS]
        if parts and any(p in words for p in parts):
            named.append(episode)
    if named:
        pool.add("entity.episode", named, [1.0] * len(named))
        pool.hop["actors"] = sorted({e.actor for e in named if e.actor is not None})


def first_hop(pool: Pool, weights: Mapping[str, float], depth: int, m: int) -> list[str]:
    """The pool's best ``m`` episodes by a convex fusion of the backends' lists so far."""
    lists = {name: ids for name, ids in pool.lists.items() if name.endswith(".episode")}
    fused = convex(lists, pool.scores, weights, depth)
    ranked = sorted((i for i in fused if i in pool.episodes), key=lambda i: (-fused[i], i))
    return ranked[:m]


def hop_terms(first: list[frozenset[str]], query: frozenset[str], df: Mapping[str, float],
              total: int, max_share: float, n: int) -> dict[str, float]:
    """The first hop's distinctive terms with their IDF: not in the query, in ``_MIN_DF`` to
    ``max_share · total`` documents (``df``: estimated counts), the ``n`` rarest."""
    seen = set().union(*first) - query - _STOP_TERMS if first else set()
    kept = sorted((df.get(t, 0.0), t) for t in seen
                  if _MIN_DF <= df.get(t, 0.0) <= max_share * total)
    return {t: math.log(total / count) for count, t in kept[:n]}


def _second_hop(ctx: Context, req: RetrieveRequest, pool: Pool,
                weights: Mapping[str, float]) -> None:
    cfg = ctx.config.retrieval
    first = first_hop(pool, weights, cfg.candidates, cfg.hop_first)
    if not first:
        return
    total = ctx.episodes.count()
    if total <= 0:
        return
    sample = sample_of(ctx, "episode")
    first_terms = [_entities(ctx, pool.episodes[i])[0] for i in first]
    query = terms_of(req.query)
    candidates = set().union(*first_terms) - query - _STOP_TERMS
    df = {t: sample.term_share(t) * total for t in candidates}
    idf = hop_terms(first_terms, query, df, total, cfg.hop_max_share, cfg.hop_terms)
    scores: dict[str, float] = {}
    if idf:
        # One regex over each pooled text (C speed) instead of tokenising and normalising
        # every pooled text in Python (measured: 0.5 ms a query at 10k episodes): a word
        # matches a term when it is the term or the term plus a suffix terms_of strips.
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(idf, key=len,
                                                                      reverse=True)))
                             + r")(?:ing|ed|es|s)?\b")
        for episode_id, episode in pool.episodes.items():
            shared = set(pattern.findall(episode.text.lower()))
            if episode_id in first:  # linked by the others of the first hop, not by itself
                others = [ts for i, ts in zip(first, first_terms, strict=True)
                          if i != episode_id]
                shared = {t for t in shared if any(t in ts for ts in others)}
            if shared:
                scores[episode_id] = sum(idf[t] for t in shared)
    _mentioned(ctx, req, pool, first, total, scores)
    pool.hop.update({"first": first, "terms": sorted(idf, key=lambda t: (-idf[t], t))})
    ranked: list[Episode] = []
    for episode_id in sorted(scores, key=lambda i: (-scores[i], i)):
        # records only for what makes the list: one from the store costs ~0.1-0.4 ms
        record = pool.episodes.get(episode_id)
        if record is None:
            record = episode_by_id(ctx, episode_id)
            if record is None or not episode_ok(record, req):
                continue
        ranked.append(record)
        if len(ranked) >= cfg.candidates:
            break
    if ranked:
        pool.add("hop.episode", ranked, [scores[e.id] for e in ranked])


def _mentioned(ctx: Context, req: RetrieveRequest, pool: Pool, first: list[str], total: int,
               scores: dict[str, float]) -> None:
    """Add to ``scores`` the episodes naming a mention key of the first hop that the query
    does not name. A key with ``retrieval.candidates`` mentions or more is a hub (every
    swap names WETH): it narrows nothing down and is skipped, as a too common term is."""
    own = set(query_keys(req.query, req.entities))
    named: dict[str, set[str]] = {}  # key → the first hop's episodes naming it
    for i in first:
        for key in _entities(ctx, pool.episodes[i])[1]:
            if key not in own:
                named.setdefault(key, set()).add(i)
    limit = ctx.config.retrieval.candidates
    for key, sources in named.items():
        rows = mentions_cached(ctx, key, req.at, limit)
        if not rows or len(rows) >= limit:
            continue
        weight = math.log(max(total, 2) / len(rows))
        for item_id, kind, _ in rows:
            if kind == "episode" and sources != {item_id}:  # not only itself naming it
                scores[item_id] = scores.get(item_id, 0.0) + weight


def expand(ctx: Context, req: RetrieveRequest, pool: Pool) -> None:
    """Add the ``entity.episode`` and ``hop.episode`` lists to ``pool`` (see module doc)."""
    cfg = ctx.config.retrieval
    weights = cfg.fusion_weights_entities if req.entities else cfg.fusion_weights
    if not pool.episodes:
        return
    if weights.get("entity", 0.0) > 0.0:
        _actors(req, pool)
    if weights.get("hop", 0.0) > 0.0 and cfg.hop_first > 0:
        _second_hop(ctx, req, pool, weights)
