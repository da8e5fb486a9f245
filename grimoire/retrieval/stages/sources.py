"""The retrieval backends: vector, BM25 and graph candidates from the stores.

Each backend returns its top ``retrieval.candidates`` (20) per kind:

- vector: episodes by cosine in the episodic store's in-memory index, entries
  by the semantic store's KNN;
- bm25: episode text (FTS5 in the episode journal), entry content (FTS5);
- graph: items that mention the query's entities or their knowledge-graph
  neighbourhood (``grimoire.retrieval.stages.mentions``).

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

The keyword and graph backends need no query vector: ``start_keyword`` runs
them in a small shared read pool (at the lowest CPU priority, so they fill the
gaps the embedding leaves) while the caller embeds the query, and
``finish_keyword`` adds what they found in a fixed order, computing itself any
the pool has not finished. BM25 gets the
query's content words (stopwords out) and, of those, the distinctive ones
(``stages.terms``). Unfiltered, the episode vector search reads the
store's vector matrix directly and takes records from the episode cache
(``stages.records``), because building 20 records from Arrow rows cost
more than the dot product.

Must not score, fuse or select (``stages.pool`` turns the pool into candidates).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.records import Episode, GrimoireEntry
from grimoire.retrieval.candidates import Vector
from grimoire.retrieval.stages.mentions import graph_items, query_keys
from grimoire.retrieval.stages.params import RetrieveRequest
from grimoire.retrieval.stages.records import current_entries, episode_by_id
from grimoire.retrieval.stages.support import record_time
from grimoire.retrieval.stages.terms import selective_words
from grimoire.retrieval.temporal import Window
from grimoire.stores.episodes.store import EpisodeFilter
from grimoire.stores.semantic.types import EntryFilter

#: The tag of the curator's L1/L2 summaries (``curator.cycle.transitions.SUMMARY_TAG``; retrieval
#: does not import the curator).
SUMMARY_TAG = "summary"

__all__ = [
    "STOPWORDS", "SUMMARY_TAG", "Keyword", "Pool", "entry_filter", "entry_ok", "episode_filter",
    "episode_ok",
    "finish_keyword", "keyword_query", "settle_reads", "start_keyword", "temporal_episodes",
    "vector_entries", "vector_episodes",
]

_READ_WORKERS = 3
# The read pool's threads run at the lowest CPU priority (nice 19, Linux: per thread), so
# that the keyword backends fill the gaps the query embedding leaves on the two cores
# instead of preempting its onnxruntime threads. At equal priority they made the embedding
# slower by more than they took: over the socket after an idle pause, the embed stage was
# 5.3-5.5 ms with them at nice 0 and 4.1-4.9 ms at nice 19, the backends still done when
# needed (bench_speed.py --part retrieval, one run each, interleaved with the floor).
# Never waited for at that priority: what the pool has not finished when the caller needs
# it, the caller computes itself (``finish_keyword``), so a busy machine costs the retrieve
# the backends' own time, not the time a low-priority thread waits for a core.
_READ_NICE = 19
# How long the caller waits for a backend the pool is running once it has computed the
# rest (``_outcomes``): after the embedding the pool's thread has a core of its own and a
# backend takes 0.1-1.5 ms on a full-horizon store; past this the caller computes it too.
_RUNNING_WAIT_S = 0.003
_READS_LOCK = threading.Lock()
_READS: ThreadPoolExecutor | None = None
_IN_FLIGHT = "retrieval.reads.in_flight"  # ctx.extras key: this context's running pool jobs
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
    """The backends running in the read pool while the query is embedded: a future per
    backend, and what computes it (``finish_keyword`` runs it itself when the pool has not
    finished it)."""

    entries: Future[list[tuple[GrimoireEntry, float]]] | None = None
    episodes: Future[list[tuple[Episode, float]]] | None = None
    graph: Future[tuple[dict[str, list[Episode | GrimoireEntry]], dict[str, Any]]] | None = None
    work: dict[Future[Any], tuple[Any, tuple[Any, ...]]] = field(default_factory=dict)


@dataclass
class Pool:
    """What the backends found, before scoring. ``lists``: backend → ids, best first."""

    episodes: dict[str, Episode] = field(default_factory=dict)
    entries: dict[str, GrimoireEntry] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    entry_similarity: list[tuple[GrimoireEntry, float]] = field(default_factory=list)
    graph: dict[str, Any] = field(default_factory=dict)
    hop: dict[str, Any] = field(default_factory=dict)  # what stages.hop linked, for the trace
    injected: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # list → id → score

    def add(self, backend: str, items: Sequence[Episode | GrimoireEntry],
            scores: Sequence[float] | None = None) -> None:
        """Append ``items`` to ``backend``'s list, with the backend's own scores if it has
        them (higher is better; convex fusion normalises them per list)."""
        ids = self.lists.setdefault(backend, [])
        if scores is not None:
            own = self.scores.setdefault(backend, {})
            for item, value in zip(items, scores, strict=True):
                own.setdefault(item.id, float(value))
        for item in items:
            if isinstance(item, Episode):
                self.episodes.setdefault(item.id, item)
            else:
                self.entries.setdefault(item.id, item)
            ids.append(item.id)


def entry_filter(req: RetrieveRequest) -> EntryFilter:
    if req.strategy is not None:
        return EntryFilter.for_strategy(req.strategy, categories=req.categories)
    return EntryFilter(categories=req.categories)


def episode_filter(req: RetrieveRequest) -> EpisodeFilter | None:
    if req.strategy is None and req.at is None:
        return None
    return EpisodeFilter(strategy=req.strategy,
                         until_ms=None if req.at is None else req.at + 1)


def entry_ok(entry: GrimoireEntry, req: RetrieveRequest, flt: EntryFilter) -> bool:
    """``flt.matches(entry)`` plus ``at`` and ``summaries``; the filter's sets are built once
    per filter (``EntryFilter.effective_statuses`` rebuilds a tuple per call: ~0.7 ms a
    query)."""
    if req.at is not None and entry.created_at > req.at:
        return False
    if not req.summaries and SUMMARY_TAG in entry.tags:
        return False
    statuses, categories, strategies, regimes = _sets(flt)
    return (entry.status in statuses
            and (categories is None or entry.category in categories)
            and (strategies is None or entry.strategy in strategies)
            and (regimes is None or entry.market_regime in regimes))


_FilterSets = tuple[frozenset[Any], frozenset[Any] | None, frozenset[Any] | None,
                    frozenset[Any] | None]


@functools.lru_cache(maxsize=256)
def _sets(flt: EntryFilter) -> _FilterSets:
    def opt(values: tuple[Any, ...] | None) -> frozenset[Any] | None:
        return None if values is None else frozenset(values)

    return (frozenset(flt.effective_statuses), opt(flt.categories), opt(flt.strategies),
            opt(flt.regimes))


def episode_ok(episode: Episode, req: RetrieveRequest) -> bool:
    if req.strategy is not None and episode.strategy != req.strategy:
        return False
    if req.thread is not None and episode.thread != req.thread:
        return False
    if req.actor is not None and episode.actor != req.actor:
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
                                        thread_name_prefix="grimoire-retrieval-reads",
                                        initializer=_lower_priority)
        return _READS


def _lower_priority() -> None:
    """This thread at nice ``_READ_NICE`` (Linux sets nice per thread; elsewhere the call
    would renice the whole process, so it is skipped there, as it is when refused)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _READ_NICE)


_THREAD_FETCH = 10


def _fetch(req: RetrieveRequest, n: int) -> int:
    # "at", "thread" and "actor" filter afterwards (the stores do not index them): over-fetch
    if req.thread is not None or req.actor is not None:
        return _THREAD_FETCH * n
    return 2 * n if req.at is not None else n


def _bm25_entries(ctx: Context, req: RetrieveRequest, words: list[str]
                  ) -> list[tuple[GrimoireEntry, float]]:
    n = ctx.config.retrieval.candidates
    flt = entry_filter(req)
    query = selective_words(ctx, "entry", words)
    if not query:
        return []
    return [(e, s) for e, s in ctx.semantic.bm25(query, _fetch(req, n), flt)
            if entry_ok(e, req, flt)][:n]


def _bm25_episodes(ctx: Context, req: RetrieveRequest, words: list[str]
                   ) -> list[tuple[Episode, float]]:
    n = ctx.config.retrieval.candidates
    query = selective_words(ctx, "episode", words)
    if not query:
        return []
    found = ctx.episodes.text_search(query, _fetch(req, n), episode_filter(req))
    return [(e, s) for e, s in found if episode_ok(e, req)][:n]


def _graph(ctx: Context, req: RetrieveRequest, keys: list[str], kinds: Sequence[str]
           ) -> tuple[dict[str, list[Episode | GrimoireEntry]], dict[str, Any]]:
    n = ctx.config.retrieval.candidates
    found, trace = graph_items(ctx, keys, until=req.at, limit=2 * n)
    flt = entry_filter(req)
    entries = ctx.semantic.get_entries(
        [i.id for i in found if i.kind == "entry"]) if "entry" in kinds else {}
    ranked: dict[str, list[Episode | GrimoireEntry]] = {"episode": [], "entry": []}
    for item in found:
        if item.kind not in kinds or len(ranked[item.kind]) >= n:
            continue
        if item.kind == "episode":
            episode = episode_by_id(ctx, item.id)
            if episode is not None and episode_ok(episode, req):
                ranked["episode"].append(episode)
        elif (entry := entries.get(item.id)) is not None and entry_ok(entry, req, flt):
            ranked["entry"].append(entry)
    return ranked, trace


def _run_all(work: list[tuple[Future[Any], Any, tuple[Any, ...]]]) -> None:
    for future, fn, args in work:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # re-raised by the caller's Future.result()
                future.set_exception(exc)


def start_keyword(ctx: Context, req: RetrieveRequest, kinds: Sequence[str]) -> Keyword:
    """Start the BM25 and graph backends in the read pool (they need no query vector).

    They run one after the other in one pool thread: the query embedding has both cores
    (two ONNX threads), and three more runnable threads beside it made the embedding
    itself slower by more than the backends took (measured, bench_speed.py --part
    retrieval). The one thread runs at the lowest priority for the same reason (``_READ_NICE``)."""
    out = Keyword()
    work: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []
    words = keyword_query(req.query).split()
    if words and "entry" in kinds:
        out.entries = Future()
        work.append((out.entries, _bm25_entries, (ctx, req, words)))
    if words and "episode" in kinds:
        out.episodes = Future()
        work.append((out.episodes, _bm25_episodes, (ctx, req, words)))
    keys = query_keys(req.query, req.entities)
    if keys:
        out.graph = Future()
        work.append((out.graph, _graph, (ctx, req, keys, kinds)))
    if work:
        out.work = {future: (fn, args) for future, fn, args in work}
        _track(ctx, _reads().submit(_run_all, work))
    return out


def _track(ctx: Context, job: Future[None]) -> None:
    """Keep ``job`` in the context's in-flight reads until it ends: a backend the caller
    computed itself may still be running in the pool after the retrieve has answered,
    and the stores must not close under it (``settle_reads``)."""
    with ctx.state_lock:
        in_flight: set[Future[None]] = ctx.extras.setdefault(_IN_FLIGHT, set())
        in_flight.add(job)

    def done(finished: Future[None]) -> None:
        with ctx.state_lock:
            in_flight.discard(finished)

    job.add_done_callback(done)


def settle_reads(ctx: Context, timeout_s: float = 10.0) -> bool:
    """Wait until no read-pool job of this context is running (before its stores close);
    False if some were still running after ``timeout_s``."""
    with ctx.state_lock:
        jobs = list(ctx.extras.get(_IN_FLIGHT, ()))
    return not wait_futures(jobs, timeout=timeout_s).not_done if jobs else True


def _outcomes(keyword: Keyword) -> dict[Future[Any], Any]:
    """Every backend's result. The pool runs them in order (BM25 entries, BM25 episodes,
    graph); the caller takes them from the other end: one the pool has not started it
    cancels and computes itself, so the two threads work on both cores once the embedding
    is done (the pool's thread gets almost no CPU while onnxruntime holds them). One the
    pool is running when the caller has computed the rest is waited for, up to
    ``_RUNNING_WAIT_S`` (it has a core of its own by then), and computed here after that:
    a busy machine costs the retrieve at most that wait plus the backend's own time, never
    the time a low-priority thread waits for a core. Computing a backend twice is safe
    (reads); the pool's late copy is dropped."""
    results: dict[Future[Any], Any] = {}
    running: list[Future[Any]] = []
    for future in reversed(list(keyword.work)):
        if future.done() or future.cancel():
            if not future.cancelled():
                results[future] = future.result()
                continue
            fn, args = keyword.work[future]
            results[future] = fn(*args)
        else:
            running.append(future)
    for future in running:
        try:
            results[future] = future.result(timeout=_RUNNING_WAIT_S)
        except FutureTimeout:
            fn, args = keyword.work[future]
            results[future] = fn(*args)
    return results


def vector_entries(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool) -> None:
    """Entries by cosine; their similarities also feed mode=auto's decision."""
    n = ctx.config.retrieval.candidates
    flt = entry_filter(req)
    found = ctx.semantic.knn_versions(q, _fetch(req, n), flt)
    current = current_entries(ctx, [(i, version) for i, version, _ in found])
    hits = [(current[i], sim) for i, _, sim in found
            if i in current and entry_ok(current[i], req, flt)][:n]
    pool.entry_similarity = hits
    pool.add("vector.entry", [e for e, _ in hits], [s for _, s in hits])


def vector_episodes(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool) -> None:
    """Episodes by cosine. Unfiltered, the top ids come from the store's vector search
    (``search_ids``: exact, or LanceDB's vector index past ``episodes.ann_threshold``) and
    the records from the episode cache: building 20 records from Arrow rows per query cost
    more than the dot product itself (same order as the store's search: score, then append
    order)."""
    n = ctx.config.retrieval.candidates
    flt = episode_filter(req)
    if flt is not None:
        found = [(e, s) for e, s in ctx.episodes.search(q, _fetch(req, n), flt)
                 if episode_ok(e, req)][:n]
    elif req.thread is None and req.actor is None:
        found = []
        for id_, score in ctx.episodes.search_ids(q, n):
            e = episode_by_id(ctx, id_)
            if e is not None and episode_ok(e, req):
                found.append((e, score))
    else:
        # thread/actor are not indexed: walk the whole order by cosine until n match
        ids, matrix = ctx.episodes.all_vectors()
        scores = matrix @ q
        found = []
        for p in np.lexsort((np.arange(len(ids)), -scores)).tolist():
            e = episode_by_id(ctx, ids[p])
            if e is not None and episode_ok(e, req):
                found.append((e, float(scores[p])))
                if len(found) >= n:
                    break
    pool.add("vector.episode", [e for e, _ in found], [s for _, s in found])


def temporal_episodes(ctx: Context, req: RetrieveRequest, q: Vector, pool: Pool,
                      window: Window) -> None:
    """Episodes inside the query's time window (``retrieval.temporal``), by cosine: the
    ``temporal.episode`` list, fused like the other backends' lists."""
    n = ctx.config.retrieval.candidates
    until = window.end if req.at is None else min(window.end, req.at + 1)
    if until <= window.start:
        return
    flt = EpisodeFilter(strategy=req.strategy, since_ms=window.start, until_ms=until)
    found = [(e, s) for e, s in ctx.episodes.search(q, _fetch(req, n), flt)
             if episode_ok(e, req)][:n]
    pool.add("temporal.episode", [e for e, _ in found], [s for _, s in found])


def finish_keyword(keyword: Keyword, pool: Pool, kinds: Sequence[str]) -> None:
    """Add what the keyword and graph backends found, in a fixed order (computing here
    whatever the read pool has not started: ``_outcomes``)."""
    results = _outcomes(keyword)
    if keyword.entries is not None:
        found = results[keyword.entries]
        if "entry" in kinds:
            pool.add("bm25.entry", [e for e, _ in found], [s for _, s in found])
    if keyword.episodes is not None:
        episodes = results[keyword.episodes]
        if "episode" in kinds:
            pool.add("bm25.episode", [e for e, _ in episodes], [s for _, s in episodes])
    if keyword.graph is not None:
        ranked, trace = results[keyword.graph]
        pool.graph = trace
        for kind, items in ranked.items():
            if items and kind in kinds:
                pool.add(f"graph.{kind}", items)
