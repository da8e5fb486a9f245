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
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.decay import effective_confidence, half_life_ms
from grimoire.errors import NotFoundError
from grimoire.mentions import graph_items, query_keys
from grimoire.records import Episode, GrimoireEntry
from grimoire.retrieval.candidates import Candidate, Vector, from_entry, from_episode
from grimoire.retrieval.causal_boost import Ancestor, AncestorVector, backward_bfs
from grimoire.retrieval.pipeline_params import RetrieveRequest
from grimoire.retrieval.pipeline_support import entry_vectors, pad_of_tag, record_time
from grimoire.retrieval.pipeline_terms import selective_words
from grimoire.stores.episodes import EpisodeFilter
from grimoire.stores.semantic_mentions import Version, version_of
from grimoire.stores.semantic_types import EdgeKind, EntryFilter

__all__ = [
    "BOOST_KINDS", "Keyword", "Node", "Pool", "ancestors", "backend_ranks", "candidates",
    "episode_by_id",
    "finish_keyword", "keyword_query", "node", "require_event", "start_keyword",
    "vector_entries", "vector_episodes",
]

BOOST_KINDS = (EdgeKind.EXPLICIT, EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)
_MAX_ANCESTORS = 64
_READ_WORKERS = 3
_READS_LOCK = threading.Lock()
_READS: ThreadPoolExecutor | None = None
_EPISODES = "retrieval.episodes"
_EPISODE_CANDIDATES = "retrieval.episode_candidates"
_ENTRY_CANDIDATES = "retrieval.entry_candidates"
_ENTRIES = "retrieval.entries"
_MAX_CACHED_ENTRIES = 50_000
_MINUTE = 60_000
_MAX_CACHED_EPISODES = 20_000  # records (~1 kB) and candidates (+1.5 kB vector) each
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
class Keyword:
    """The backends running in the read pool while the query is embedded."""

    entries: Future[list[GrimoireEntry]] | None = None
    episodes: Future[list[Episode]] | None = None
    graph: Future[tuple[dict[str, list[Episode | GrimoireEntry]], dict[str, Any]]] | None = None


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


def _reads() -> ThreadPoolExecutor:
    # Created on first use, shared by every Context: the keyword and graph backends run here
    # while the caller's thread embeds the query (SQLite, LMDB and ONNX release the GIL).
    global _READS
    with _READS_LOCK:
        if _READS is None:
            _READS = ThreadPoolExecutor(max_workers=_READ_WORKERS,
                                        thread_name_prefix="grimoire-retrieval-reads")
        return _READS


def current_entries(ctx: Context, wanted: Sequence[tuple[str, Version]]
                    ) -> dict[str, GrimoireEntry]:
    """Entries at these versions: cached records when current, the rest in one statement."""
    cache: dict[str, GrimoireEntry] | None = ctx.extras.get(_ENTRIES)
    if cache is None or len(cache) > _MAX_CACHED_ENTRIES:
        cache = ctx.extras[_ENTRIES] = {}
    out: dict[str, GrimoireEntry] = {}
    missing = []
    for entry_id, version in wanted:
        found = cache.get(entry_id)
        if found is not None and version_of(found) == version:
            out[entry_id] = found
        else:
            missing.append(entry_id)
    if missing:
        for entry_id, entry in ctx.semantic.get_entries(missing).items():
            cache[entry_id] = out[entry_id] = entry
    return out


def episode_by_id(ctx: Context, episode_id: str) -> Episode | None:
    """An episode by id through a per-context cache (episodes never change once written)."""
    cache: dict[str, Episode] | None = ctx.extras.get(_EPISODES)
    if cache is None or len(cache) > _MAX_CACHED_EPISODES:
        cache = ctx.extras[_EPISODES] = {}
    found = cache.get(episode_id)
    if found is None:
        found = ctx.episodes.get(episode_id)
        if found is not None:
            cache[episode_id] = found
    return found


def _fetch(req: RetrieveRequest, n: int) -> int:
    return 2 * n if req.at is not None else n  # "at" filters afterwards: over-fetch


def _bm25_entries(ctx: Context, req: RetrieveRequest, words: list[str]
                  ) -> list[GrimoireEntry]:
    n = ctx.config.retrieval.candidates
    flt = _entry_filter(req)
    query = selective_words(ctx, "entry", words)
    if not query:
        return []
    return [e for e, _ in ctx.semantic.bm25(query, _fetch(req, n), flt)
            if _entry_ok(e, req, flt)][:n]


def _bm25_episodes(ctx: Context, req: RetrieveRequest, words: list[str]) -> list[Episode]:
    n = ctx.config.retrieval.candidates
    query = selective_words(ctx, "episode", words)
    if not query:
        return []
    found = ctx.episodes.text_search(query, _fetch(req, n), _episode_filter(req))
    return [e for e, _ in found if _episode_ok(e, req)][:n]


def _graph(ctx: Context, req: RetrieveRequest, keys: list[str], kinds: Sequence[str]
           ) -> tuple[dict[str, list[Episode | GrimoireEntry]], dict[str, Any]]:
    n = ctx.config.retrieval.candidates
    found, trace = graph_items(ctx, keys, until=req.at, limit=2 * n)
    flt = _entry_filter(req)
    entries = ctx.semantic.get_entries(
        [i.id for i in found if i.kind == "entry"]) if "entry" in kinds else {}
    ranked: dict[str, list[Episode | GrimoireEntry]] = {"episode": [], "entry": []}
    for item in found:
        if item.kind not in kinds or len(ranked[item.kind]) >= n:
            continue
        if item.kind == "episode":
            episode = episode_by_id(ctx, item.id)
            if episode is not None and _episode_ok(episode, req):
                ranked["episode"].append(episode)
        elif (entry := entries.get(item.id)) is not None and _entry_ok(entry, req, flt):
            ranked["entry"].append(entry)
    return ranked, trace


def start_keyword(ctx: Context, req: RetrieveRequest, kinds: Sequence[str]) -> Keyword:
    """Start the BM25 and graph backends in the read pool (they need no query vector)."""
    pool = _reads()
    out = Keyword()
    words = keyword_query(req.query).split()
    if words and "entry" in kinds:
        out.entries = pool.submit(_bm25_entries, ctx, req, words)
    if words and "episode" in kinds:
        out.episodes = pool.submit(_bm25_episodes, ctx, req, words)
    keys = query_keys(req.query, req.entities)
    if keys:
        out.graph = pool.submit(_graph, ctx, req, keys, kinds)
    return out


def vector_entries(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool) -> None:
    """Entries by cosine; their similarities also feed mode=auto's decision."""
    n = ctx.config.retrieval.candidates
    flt = _entry_filter(req)
    found = ctx.semantic.knn_versions(q, _fetch(req, n), flt)
    current = current_entries(ctx, [(i, version) for i, version, _ in found])
    hits = [(current[i], sim) for i, _, sim in found
            if i in current and _entry_ok(current[i], req, flt)][:n]
    pool.entry_similarity = hits
    pool.add("vector.entry", [e for e, _ in hits])


def vector_episodes(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool) -> None:
    """Episodes by cosine. Unfiltered, the top ids come straight from the store's vector
    matrix and the records from the episode cache: building 20 records from Arrow rows
    per query cost more than the dot product itself (same order as the store's search:
    score, then append order)."""
    n = ctx.config.retrieval.candidates
    flt = _episode_filter(req)
    if flt is not None:
        hits = [e for e, _ in ctx.episodes.search(q, _fetch(req, n), flt)
                if _episode_ok(e, req)][:n]
    else:
        ids, matrix = ctx.episodes.all_vectors()
        if not ids:
            return
        scores = matrix @ q
        k = min(n, len(ids))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(ids) else np.arange(k)
        top = top[np.lexsort((top, -scores[top]))]
        hits = [e for p in top.tolist() if (e := episode_by_id(ctx, ids[p])) is not None]
    pool.add("vector.episode", hits)


def finish_keyword(keyword: Keyword, pool: Pool, kinds: Sequence[str]) -> None:
    """Add what the keyword and graph backends found (waiting for them), in a fixed order."""
    if keyword.entries is not None:
        found = keyword.entries.result()
        if "entry" in kinds:
            pool.add("bm25.entry", found)
    if keyword.episodes is not None:
        episodes = keyword.episodes.result()
        if "episode" in kinds:
            pool.add("bm25.episode", episodes)
    if keyword.graph is not None:
        ranked, trace = keyword.graph.result()
        pool.graph = trace
        for kind, items in ranked.items():
            if items and kind in kinds:
                pool.add(f"graph.{kind}", items)


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


def _episode_candidate(ctx: Context, episode: Episode, vector: Vector) -> Candidate:
    # Cached per id: an episode never changes, and building a Candidate (vector checks
    # included) cost ~10 µs of the ~70 a retrieval spends per pooled item. Ranks are not
    # part of it: the pipeline fuses them from the pool's lists (``backend_ranks``).
    cache: dict[str, Candidate] | None = ctx.extras.get(_EPISODE_CANDIDATES)
    if cache is None or len(cache) > _MAX_CACHED_EPISODES:
        cache = ctx.extras[_EPISODE_CANDIDATES] = {}
    found = cache.get(episode.id)
    if found is None:
        found = cache[episode.id] = from_episode(episode, vector, ctx.config,
                                                 emotion=pad_of_tag(episode.emotional_tag))
    return found


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
        ids = list(pool.episodes)
        vectors = ctx.episodes.vectors_for(ids)
        for row, episode_id in enumerate(ids):
            out[episode_id] = _episode_candidate(ctx, pool.episodes[episode_id], vectors[row])
    if "entry" in kinds and pool.entries:
        # Decay is evaluated at the start of ``now``'s minute, so an entry's candidate can be
        # reused within that minute (same entry version): half-lives are a day or more, so
        # the confidence moves by < 0.1 % in a minute, and rebuilding ~40 candidates per
        # query was a measurable share of a retrieval.
        at = now - now % _MINUTE
        cache: dict[tuple[str, int, int], Candidate] | None = ctx.extras.get(_ENTRY_CANDIDATES)
        if cache is None or len(cache) > _MAX_CACHED_ENTRIES:
            cache = ctx.extras[_ENTRY_CANDIDATES] = {}
        missing = [e for e in pool.entries.values() if (e.id, e.updated_at, at) not in cache]
        vectors_of = entry_vectors(ctx, missing) if missing else {}
        for entry in missing:
            vector = vectors_of.get(entry.id)
            if vector is None:  # deleted between the search and now
                continue
            life = half_life_ms(entry, cfg.decay)
            cache[(entry.id, entry.updated_at, at)] = from_entry(
                entry, vector, effective_confidence(entry, at, cfg.decay),
                None if life is None else life * entry.strength)
        for entry_id, entry in pool.entries.items():
            found = cache.get((entry_id, entry.updated_at, at))
            if found is not None:
                out[entry_id] = found
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
    episode = episode_by_id(ctx, item_id)
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
