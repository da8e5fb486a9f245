"""Candidates from the stores: vector, BM25 and graph backends, and causal ancestors.

Each backend returns its top ``retrieval.candidates`` (20) per kind:

- vector: episodes by cosine in the episodic store's in-memory index, entries
  by the semantic store's KNN;
- bm25: episode text (FTS5 in the episode journal), entry content (FTS5);
- graph: items that mention the query's entities or their knowledge-graph
  neighbourhood (``grimoire.mentions``).

A backend's list is ranked within its kind (episode lists and entry lists
are separate RRF voters: BM25 scores of two FTS indexes are not comparable,
and this keeps the two kinds on an equal footing).

Filters are applied inside the stores where they can be (entry category,
status and strategy; episode strategy and timestamp) and re-checked here
where they cannot: ``at`` keeps only items *recorded* by then (an episode's
UUIDv7 time, an entry's ``created_at``), so each backend over-fetches 2×
under ``at``. Entries are decayed to ``at`` (else now): an entry's current
confidence and votes are used as they stand, the store keeps no history of
them. ``min_confidence`` applies to every candidate's (effective) confidence;
episodes carry the configured episode confidence.

Causal ancestors (TCMF): backward BFS from the event over explicit, auto,
discovered and KG edges (outcome edges are not causes of events). Ancestors
recorded after ``at`` are dropped, and under ``at`` the walk itself ignores
edges created later. Ancestors that pass the filters join the pool (with no
backend rank), so a root cause that reads nothing like the query can still
be lifted by the boost.

Must not score, fuse or select.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grimoire.context import Context
from grimoire.decay import effective_confidence, half_life_ms
from grimoire.errors import NotFoundError
from grimoire.mentions import graph_items, query_keys
from grimoire.records import Episode, GrimoireEntry
from grimoire.retrieval.candidates import Candidate, Vector, from_entry, from_episode
from grimoire.retrieval.causal_boost import Ancestor, AncestorVector, backward_bfs
from grimoire.retrieval.pipeline_params import RetrieveRequest
from grimoire.retrieval.pipeline_support import entry_vectors, pad_of_tag, record_time
from grimoire.stores.episodes import EpisodeFilter
from grimoire.stores.semantic_types import EdgeKind, EntryFilter

__all__ = ["BOOST_KINDS", "Node", "Pool", "ancestors", "fetch_entries", "fetch_rest", "node"]

BOOST_KINDS = (EdgeKind.EXPLICIT, EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)
_MAX_ANCESTORS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
# Function words dropped from the BM25 query: the stores OR the words together, so an item
# matching only "when" or "is" would get a full BM25 rank (an RRF vote) for nothing.
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers him his how i if in into is it its itself just me more
most my no nor not now of off on once only or other our ours out over own same she should so
some such than that the their theirs them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you
your yours
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass
class Pool:
    """What the backends found, before scoring. ``lists``: backend → ids, best first."""

    episodes: dict[str, Episode] = field(default_factory=dict)
    entries: dict[str, GrimoireEntry] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    entry_similarity: list[tuple[GrimoireEntry, float]] = field(default_factory=list)
    graph: dict[str, Any] = field(default_factory=dict)
    injected: list[str] = field(default_factory=list)

    def add(self, backend: str, items: Sequence[Episode | GrimoireEntry]) -> None:
        ids = self.lists.setdefault(backend, [])
        for item in items:
            if isinstance(item, Episode):
                self.episodes.setdefault(item.id, item)
            else:
                self.entries.setdefault(item.id, item)
            ids.append(item.id)


def _entry_filter(req: RetrieveRequest) -> EntryFilter:
    if req.strategy is not None:
        return EntryFilter.for_strategy(req.strategy, categories=req.categories)
    return EntryFilter(categories=req.categories)


def _episode_filter(req: RetrieveRequest) -> EpisodeFilter | None:
    if req.strategy is None and req.at is None:
        return None
    return EpisodeFilter(strategy=req.strategy,
                         until_ms=None if req.at is None else req.at + 1)


def _entry_ok(entry: GrimoireEntry, req: RetrieveRequest, flt: EntryFilter) -> bool:
    return flt.matches(entry) and (req.at is None or entry.created_at <= req.at)


def _episode_ok(episode: Episode, req: RetrieveRequest) -> bool:
    if req.strategy is not None and episode.strategy != req.strategy:
        return False
    if req.at is None:
        return True
    return episode.timestamp <= req.at and record_time(episode.id, episode.timestamp) <= req.at


def keyword_query(text: str) -> str:
    """The query's content words for BM25 (stopwords out); "" when none are left."""
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in STOPWORDS)


def fetch_entries(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool) -> None:
    """Vector and BM25 candidates among entries."""
    n = ctx.config.retrieval.candidates
    fetch = 2 * n if req.at is not None else n
    flt = _entry_filter(req)
    hits = [(e, s) for e, s in ctx.semantic.knn(q, fetch, flt) if _entry_ok(e, req, flt)][:n]
    pool.entry_similarity = hits
    pool.add("vector.entry", [e for e, _ in hits])
    words = keyword_query(req.query)
    found = ctx.semantic.bm25(words, fetch, flt) if words else []
    pool.add("bm25.entry", [e for e, _ in found if _entry_ok(e, req, flt)][:n])


def fetch_rest(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool,
               kinds: Sequence[str]) -> None:
    """Vector and BM25 candidates among episodes (if asked), then the graph backend."""
    n = ctx.config.retrieval.candidates
    fetch = 2 * n if req.at is not None else n
    if "episode" in kinds:
        flt = _episode_filter(req)
        hits = [e for e, _ in ctx.episodes.search(q, fetch, flt) if _episode_ok(e, req)][:n]
        pool.add("vector.episode", hits)
        words = keyword_query(req.query)
        text = ctx.episodes.text_search(words, fetch, flt) if words else []
        pool.add("bm25.episode", [e for e, _ in text if _episode_ok(e, req)][:n])
    keys = query_keys(req.query, req.entities)
    if not keys:
        return
    found, trace = graph_items(ctx, keys, until=req.at, limit=2 * n)
    pool.graph = trace
    flt_entries = _entry_filter(req)
    ranked: dict[str, list[Episode | GrimoireEntry]] = {"episode": [], "entry": []}
    for item in found:
        if item.kind not in kinds or len(ranked[item.kind]) >= n:
            continue
        if item.kind == "episode":
            episode = pool.episodes.get(item.id) or ctx.episodes.get(item.id)
            if episode is not None and _episode_ok(episode, req):
                ranked["episode"].append(episode)
        else:
            entry = pool.entries.get(item.id) or ctx.semantic.get_entry(item.id)
            if entry is not None and _entry_ok(entry, req, flt_entries):
                ranked["entry"].append(entry)
    for kind, items in ranked.items():
        if items:
            pool.add(f"graph.{kind}", items)


def candidates(ctx: Context, req: RetrieveRequest, pool: Pool, now: int,
               kinds: Sequence[str], *, min_confidence: bool = True) -> dict[str, Candidate]:
    """One Candidate per pooled item of the wanted kinds, ranks per backend.

    ``min_confidence=False`` keeps items under the request's ``min_confidence``
    (an ancestor's vector boosts others even when it is not shown itself).
    """
    ranks: dict[str, dict[str, int]] = {}
    for backend, ids in pool.lists.items():
        if backend.startswith("_"):  # pooled without a backend rank (causal ancestors)
            continue
        name = backend.split(".", 1)[0]
        for position, item_id in enumerate(ids, start=1):
            ranks.setdefault(item_id, {}).setdefault(name, position)
    out: dict[str, Candidate] = {}
    cfg = ctx.config
    if "episode" in kinds and pool.episodes:
        ids = list(pool.episodes)
        vectors = ctx.episodes.vectors_for(ids)
        for row, episode_id in enumerate(ids):
            episode = pool.episodes[episode_id]
            out[episode_id] = from_episode(episode, vectors[row], cfg, ranks.get(episode_id),
                                           pad_of_tag(episode.emotional_tag))
    if "entry" in kinds and pool.entries:
        vectors_of = entry_vectors(ctx, pool.entries.values())
        for entry_id, entry in pool.entries.items():
            vector = vectors_of.get(entry_id)
            if vector is None:  # deleted between the search and now
                continue
            life = half_life_ms(entry, cfg.decay)
            out[entry_id] = from_entry(
                entry, vector, effective_confidence(entry, now, cfg.decay),
                None if life is None else life * entry.strength, ranks.get(entry_id))
    if min_confidence and req.min_confidence is not None:
        out = {i: c for i, c in out.items() if c.confidence >= req.min_confidence}
    return out


@dataclass(frozen=True, slots=True)
class Node:
    """An episode or entry looked up by id (the event, an ancestor, a chain link)."""

    id: str
    kind: str
    text: str
    time: int  # episode timestamp / entry created_at
    recorded: int
    episode: Episode | None = None
    entry: GrimoireEntry | None = None


def node(ctx: Context, item_id: str) -> Node | None:
    episode = ctx.episodes.get(item_id)
    if episode is not None:
        return Node(item_id, "episode", episode.text, episode.timestamp,
                    record_time(item_id, episode.timestamp), episode=episode)
    entry = ctx.semantic.get_entry(item_id)
    if entry is not None:
        return Node(item_id, "entry", entry.content, entry.created_at, entry.created_at,
                    entry=entry)
    return None


def require_event(ctx: Context, event_id: str, at: int | None) -> Node:
    found = node(ctx, event_id)
    if found is None or (at is not None and found.recorded > at):
        raise NotFoundError(f"event_id: no episode or entry {event_id!r}"
                            + ("" if found is None else " recorded by 'at'"))
    return found


def _walk(ctx: Context, start: str, at: int | None) -> list[Ancestor]:
    max_depth = ctx.config.retrieval.causal_max_depth
    if max_depth < 1:
        return []
    if at is None:  # one query per depth level
        hops = ctx.semantic.causal_bfs(start, direction="backward", max_depth=max_depth,
                                       kinds=BOOST_KINDS)
        return [Ancestor(h.node_id, h.depth, h.path_weight) for h in hops][:_MAX_ANCESTORS]

    def edges_to(item_id: str) -> list[tuple[str, float]]:
        return [(e.cause_id, e.weight) for e in ctx.semantic.edges_to(item_id, BOOST_KINDS)
                if e.created_at <= at]

    return backward_bfs([start], edges_to, max_depth, _MAX_ANCESTORS)


def ancestors(ctx: Context, req: RetrieveRequest, start: str, cands: dict[str, Candidate],
              now: int, kinds: Sequence[str]) -> list[AncestorVector]:
    """The event's causal ancestors with vectors; those that pass the filters join ``cands``."""
    found = _walk(ctx, start, req.at)
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
    flt = _entry_filter(req)
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
        if looked_up.entry is not None and not _entry_ok(looked_up.entry, req, flt):
            continue
        if looked_up.episode is not None and not _episode_ok(looked_up.episode, req):
            continue
        if req.min_confidence is not None and candidate.confidence < req.min_confidence:
            continue
        cands[ancestor.id] = candidate
        budget -= 1
    return out
