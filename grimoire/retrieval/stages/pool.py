"""The pool as Candidates, their backend ranks, and the event's causal ancestors.

Candidates carry no ranks here: ``backend_ranks`` reads them off the pool's
lists and the pipeline fuses them (RRF). That lets a candidate be cached and
reused across queries: an episode's for as long as it is cached (episodes
never change), an entry's per (version, minute) — decay is evaluated at the
start of the minute, which moves a confidence with a day-plus half-life by
under 0.1 %.

Causal ancestors (TCMF): backward BFS from the event over explicit, auto,
discovered and KG edges (outcome edges are not causes of events). Ancestors
recorded after ``at`` are dropped, and under ``at`` the walk itself ignores
edges created later. Ancestors that pass the filters join the candidates
(with no backend rank), so a root cause that reads nothing like the query
can still be lifted by the boost.

Must not score, fuse or select.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grimoire.context import Context
from grimoire.gate.decay import effective_confidence, half_life_ms
from grimoire.records import Episode, EpisodeType, GrimoireEntry
from grimoire.retrieval.candidates import Candidate, Vector, from_entry, from_episode
from grimoire.retrieval.causal_additive import witness_ids
from grimoire.retrieval.causal_boost import Ancestor, AncestorVector, backward_bfs
from grimoire.retrieval.stages.params import RetrieveRequest
from grimoire.retrieval.stages.records import (
    BOOST_KINDS,
    MAX_CACHED,
    Node,
    episode_by_id,
    node,
)
from grimoire.retrieval.stages.sources import Pool, entry_filter, entry_ok, episode_ok
from grimoire.retrieval.stages.support import entry_vectors, pad_of_tag
from grimoire.stores.semantic.mentions import Version, version_of
from grimoire.stores.semantic.types import EdgeKind

__all__ = ["ancestors", "backend_ranks", "candidates"]

_EPISODE_CANDIDATES = "retrieval.episode_candidates"
_ENTRY_CANDIDATES = "retrieval.entry_candidates"
_MAX_ANCESTORS = 64
_MINUTE = 60_000


def backend_ranks(pool: Pool) -> dict[str, dict[str, int]]:
    """Per item, its 1-based rank in each backend (vector, bm25, graph) that found it."""
    ranks: dict[str, dict[str, int]] = {}
    for backend, ids in pool.lists.items():
        if backend.startswith("_"):  # pooled without a backend rank (causal ancestors)
            continue
        name = backend.split(".", 1)[0]
        for position, item_id in enumerate(ids, start=1):
            ranks.setdefault(item_id, {}).setdefault(name, position)
    return ranks


def _episode_candidates(ctx: Context, episodes: Mapping[str, Episode]) -> dict[str, Candidate]:
    # Cached per id: an episode never changes, and building a Candidate (vector checks
    # included) cost ~10 µs of the ~70 a retrieval spends per pooled item. Only the
    # episodes not cached yet have their vectors looked up (an id lookup and a
    # dequantised row each). Ranks are not part of it: the pipeline fuses them from the
    # pool's lists (``backend_ranks``).
    cache: dict[str, Candidate] | None = ctx.extras.get(_EPISODE_CANDIDATES)
    if cache is None or len(cache) > MAX_CACHED:
        cache = ctx.extras[_EPISODE_CANDIDATES] = {}
    missing = [episode_id for episode_id in episodes if episode_id not in cache]
    if missing:
        vectors = ctx.episodes.vectors_for(missing)
        for row, episode_id in enumerate(missing):
            episode = episodes[episode_id]
            cache[episode_id] = from_episode(episode, vectors[row], ctx.config,
                                             emotion=pad_of_tag(episode.emotional_tag))
    return {episode_id: cache[episode_id] for episode_id in episodes}


def candidates(ctx: Context, req: RetrieveRequest, pool: Pool, now: int,
               kinds: Sequence[str], *, min_confidence: bool = True) -> dict[str, Candidate]:
    """One Candidate per pooled item of the wanted kinds (without ranks: see backend_ranks).

    Entries are decayed to the start of ``now``'s minute. ``min_confidence=False`` keeps items under
    the request's ``min_confidence`` (an ancestor's vector boosts others even
    when it is not shown itself).
    """
    out: dict[str, Candidate] = {}
    cfg = ctx.config
    if "episode" in kinds and pool.episodes:
        out.update(_episode_candidates(ctx, pool.episodes))
    if "entry" in kinds and pool.entries:
        # Decay is evaluated at the start of ``now``'s minute, so an entry's candidate can be
        # reused within that minute (same entry version): half-lives are a day or more, so
        # the confidence moves by < 0.1 % in a minute, and rebuilding ~40 candidates per
        # query was a measurable share of a retrieval.
        at = now - now % _MINUTE
        cache: dict[tuple[str, Version, int], Candidate] | None = ctx.extras.get(
            _ENTRY_CANDIDATES)
        if cache is None or len(cache) > MAX_CACHED:
            cache = ctx.extras[_ENTRY_CANDIDATES] = {}
        keys = {e.id: (e.id, version_of(e), at) for e in pool.entries.values()}
        missing = [e for e in pool.entries.values() if keys[e.id] not in cache]
        vectors_of = entry_vectors(ctx, missing) if missing else {}
        for entry in missing:
            vector = vectors_of.get(entry.id)
            if vector is None:  # deleted between the search and now
                continue
            life = half_life_ms(entry, cfg.decay)
            cache[keys[entry.id]] = from_entry(
                entry, vector, effective_confidence(entry, at, cfg.decay),
                None if life is None else life * entry.strength)
        for entry_id in pool.entries:
            found = cache.get(keys[entry_id])
            if found is not None:
                out[entry_id] = found
    if min_confidence and req.min_confidence is not None:
        out = {i: c for i, c in out.items() if c.confidence >= req.min_confidence}
    return out


# An observation's auto-linked causes (every observation has some: seed 001's add_event
# searches them) are walked on the chains the caller asks for (an event_id, causal.chain,
# causal.consequences), not from the top episode retrieval picks by itself: there they
# reordered every answer by the turns before it (LoCoMo dev, one conversation, R@10
# 0.742 -> 0.520 with them; bench_recall.py --quick).
_IMPLICIT_OBSERVATION_KINDS = tuple(k for k in BOOST_KINDS if k is not EdgeKind.AUTO)


def _walk(ctx: Context, start: str, at: int | None,
          kinds: Sequence[EdgeKind] = BOOST_KINDS) -> list[Ancestor]:
    max_depth = ctx.config.retrieval.causal_max_depth
    if max_depth < 1:
        return []
    if at is None:  # one query per depth level
        hops = ctx.semantic.causal_bfs(start, direction="backward", max_depth=max_depth,
                                       kinds=kinds)
        return [Ancestor(h.node_id, h.depth, h.path_weight) for h in hops][:_MAX_ANCESTORS]

    def edges_to(item_id: str) -> list[tuple[str, float]]:
        return [(e.cause_id, e.weight) for e in ctx.semantic.edges_to(item_id, kinds)
                if e.created_at <= at]

    return backward_bfs([start], edges_to, max_depth, _MAX_ANCESTORS)


def ancestors(ctx: Context, req: RetrieveRequest, start: str, cands: dict[str, Candidate],
              now: int, kinds: Sequence[str]) -> list[AncestorVector]:
    """The event's causal ancestors with vectors; those that pass the filters join ``cands``.

    From an observation retrieval picked itself (no ``event_id``), its auto-linked causes
    are not followed (``_IMPLICIT_OBSERVATION_KINDS``)."""
    edges: Sequence[EdgeKind] = BOOST_KINDS  # edge kinds to walk; ``kinds``: item kinds
    if req.event_id is None:
        picked = episode_by_id(ctx, start)
        if picked is not None and picked.type is EpisodeType.OBSERVATION:
            edges = _IMPLICIT_OBSERVATION_KINDS
    found = _walk(ctx, start, req.at, edges)
    if not found:
        return []
    pool = Pool()
    nodes: dict[str, Node] = {}
    for ancestor in found:
        if ancestor.id in cands:
            continue
        looked = node(ctx, ancestor.id)
        if looked is None or (req.at is not None and looked.recorded > req.at):
            continue
        nodes[ancestor.id] = looked
        record: Episode | GrimoireEntry | None = looked.episode or looked.entry
        if record is not None:
            pool.add("_ancestor", [record])
    extra = candidates(ctx, req, pool, now, ("episode", "entry"), min_confidence=False)
    flt = entry_filter(req)
    budget = ctx.config.retrieval.candidates
    out: list[AncestorVector] = []
    for ancestor in found:
        candidate = cands.get(ancestor.id) or extra.get(ancestor.id)
        if candidate is None:
            continue
        out.append((ancestor.id, ancestor.depth, ancestor.weight, candidate.vector))
        looked_up = nodes.get(ancestor.id)
        if looked_up is None or budget <= 0 or candidate.kind not in kinds:
            continue
        if looked_up.entry is not None and not entry_ok(looked_up.entry, req, flt):
            continue
        if looked_up.episode is not None and not episode_ok(looked_up.episode, req):
            continue
        if req.min_confidence is not None and candidate.confidence < req.min_confidence:
            continue
        cands[ancestor.id] = candidate
        budget -= 1
    return out


def witnesses(ctx: Context, req: RetrieveRequest, found: Sequence[AncestorVector],
              start: Vector | None, cands: Mapping[str, Candidate], now: int,
              ) -> dict[str, Candidate]:
    """The episodes that witnessed the ancestors (``causal_additive.witness_ids``), as
    candidates that pass the request's filters; none already pooled."""
    ids, matrix = ctx.episodes.all_vectors()

    def time_of(item_id: str) -> int | None:
        episode = episode_by_id(ctx, item_id)
        return None if episode is None else episode.timestamp

    picked = witness_ids(ids, matrix, found, start, time_of, ctx.config.retrieval,
                         set(cands))
    pool = Pool()
    for episode_id in picked:
        episode = episode_by_id(ctx, episode_id)
        if episode is not None and episode_ok(episode, req):
            pool.add("_witness", [episode])
    return candidates(ctx, req, pool, now, ("episode",)) if pool.episodes else {}
