"""One feature row per pooled candidate: what the pipeline knows, plus query–text interactions.

The pipeline's own numbers (nothing recomputed that it already has):

- each backend's rank (as 1 / rank, 0 when absent) and own score (vector, BM25, graph,
  temporal, entity, hop, and the thread neighbours of the pool's best:
  ``stages.neighbours``), and the fused relevance (the rerank's ``rrf`` factor);
- the relevance gate's lexical and semantic evidence and tier, recency, the causal boost;
- the candidate's cosine to the query in absolute terms (raw, and above the query's
  background: its mean cosine to stored episodes), so a score can say "nothing matches"
  rather than only "this matches best";
- the cosine of its neighbours: the best cosine among pooled turns of the same thread
  within ``_NEIGHBOUR_MS`` of it, and how many of the pool share its thread; the best term
  coverage and fused relevance among those turns (an answer beside the turn that matches);
- its rank by the fused relevance, and its cosine to the centroid of the fused best three
  (pseudo-relevance feedback: the second half of a multi-hop answer resembles the first);
- temporal match (inside the query's resolved time window), actor match (its actor named
  in the query), entity overlap (the query's capitalised words in its text).

Cheap query–text interactions: IDF-weighted term coverage (absolute, and the best single
matched term's IDF), bigram overlap, the question's type (its interrogative word), number
matches and date matches (a month or year the query names, in the text or the timestamp),
whether the text carries a number or a time expression, its length.

Every feature is a plain float; ``FEATURES`` names the columns in order, and the model
records the names it was trained on (a mismatch refuses to load). Pure: no store.
"""

from __future__ import annotations

import calendar
import functools
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from grimoire.retrieval.candidates import Breakdown, Candidate, Vector

__all__ = ["BACKENDS", "FEATURES", "QueryInfo", "matrix"]

BACKENDS: tuple[str, ...] = ("vector", "bm25", "graph", "temporal", "entity", "hop",
                             "neighbour")
_QUESTION_WORDS: tuple[str, ...] = (
    "what", "when", "where", "who", "whom", "whose", "why", "how", "which", "did", "does",
    "do", "is", "are", "was", "were", "would", "could", "can", "will", "has", "have")
_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITAL = re.compile(r"\b[A-Z][\w'-]+")
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_TIME_WORDS = frozenset({"yesterday", "today", "tomorrow", "ago", "last", "next", "week",
                         "weekend", "month", "year", "morning", "evening", "night", "since",
                         *_MONTHS})
_NEIGHBOUR_MS = 5 * 60_000
_TEXTS_CACHED = 20_000
_FEEDBACK = 3
_SUFFIXES = ("ing", "ed", "es", "s")

FEATURES: tuple[str, ...] = (
    *(f"rank_{b}" for b in BACKENDS), *(f"score_{b}" for b in BACKENDS),
    "fused", "lexical", "semantic", "tier", "recency", "causal",
    "cosine", "cosine_margin", "cosine_rank", "neighbour_cosine", "thread_share",
    "fused_rank", "feedback_cosine",
    "in_window", "has_window", "actor_named", "entity_overlap",
    "idf_coverage", "idf_best", "bigram_overlap", "question_type", "query_terms",
    "number_match", "query_numbers", "date_match", "text_has_number", "text_has_time",
    "text_length", "text_is_question", "is_entry", "pool_size",
    "neighbour_coverage", "neighbour_fused",
)


def _norm(word: str) -> str:
    word = word.lower()
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class QueryInfo:
    """What the features read about the query, computed once per retrieval.

    ``terms``: the query's content terms (``stages.terms`` normalisation) → IDF;
    ``background``: its mean cosine to stored episodes (None: the pool's mean stands in);
    ``window``: the resolved time window ``(start, end)`` or None.
    """

    text: str
    vector: Vector
    terms: Mapping[str, float]
    background: float | None = None
    window: tuple[int, int] | None = None
    words: frozenset[str] = field(init=False)
    bigrams: frozenset[tuple[str, str]] = field(init=False)
    numbers: frozenset[str] = field(init=False)
    capitals: frozenset[str] = field(init=False)
    months: frozenset[int] = field(init=False)
    years: frozenset[int] = field(init=False)
    question_type: float = field(init=False)

    def __post_init__(self) -> None:
        tokens = [w.lower() for w in _WORD.findall(self.text)]
        normed = [_norm(w) for w in tokens]
        content = [w for w in normed if w in self.terms]
        set_ = object.__setattr__
        set_(self, "words", frozenset(tokens))
        set_(self, "bigrams", frozenset(itertools.pairwise(content)))
        set_(self, "numbers", frozenset(_NUMBER.findall(self.text)))
        # Capitalised words after the first: names, places, titles (the first is the
        # sentence's own capital).
        caps = _CAPITAL.findall(self.text)
        first = _CAPITAL.match(self.text.lstrip())
        if first is not None and caps and caps[0] == first.group(0):
            caps = caps[1:]
        set_(self, "capitals", frozenset(c.lower().removesuffix("'s") for c in caps))
        set_(self, "months", frozenset(_MONTHS[w] for w in tokens if w in _MONTHS))
        set_(self, "years", frozenset(int(y) for y in _YEAR.findall(self.text)))
        kind = next((i + 1 for w in tokens[:3] for i, q in enumerate(_QUESTION_WORDS)
                     if w == q), 0)
        set_(self, "question_type", float(kind))


@dataclass(frozen=True, slots=True)
class _Text:
    tokens: frozenset[str]
    terms: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    numbers: frozenset[str]
    months: frozenset[int]
    has_time: bool
    length: float
    is_question: bool


@functools.lru_cache(maxsize=_TEXTS_CACHED)
def _text(text: str) -> _Text:
    """What the features read of an item's text (cached: a text's analysis never changes,
    and the same episodes are pooled again and again)."""
    tokens = [w.lower() for w in _WORD.findall(text)]
    normed = [_norm(w) for w in tokens]
    return _Text(frozenset(tokens), frozenset(normed), frozenset(itertools.pairwise(normed)),
                 frozenset(_NUMBER.findall(text)),
                 frozenset(_MONTHS[w] for w in tokens if w in _MONTHS),
                 any(w in _TIME_WORDS for w in tokens) or bool(_YEAR.search(text)),
                 math.log1p(len(tokens)), text.rstrip().endswith("?"))


def _neighbours(cands: Sequence[Candidate], cosines: npt.NDArray[np.float32]
                ) -> tuple[list[float], list[float], list[list[int]]]:
    """Per candidate: the best cosine of a pooled same-thread turn near it in time, the
    share of the pool in its thread, and the rows of those near turns."""
    by_thread: dict[str, list[int]] = {}
    for row, c in enumerate(cands):
        thread = c.provenance.get("thread")
        if isinstance(thread, str):
            by_thread.setdefault(thread, []).append(row)
    best = [0.0] * len(cands)
    share = [0.0] * len(cands)
    rows_near: list[list[int]] = [[] for _ in cands]
    n = max(1, len(cands))
    for rows in by_thread.values():
        for row in rows:
            share[row] = len(rows) / n
            t = cands[row].timestamp
            near = rows_near[row] = [o for o in rows
                                     if o != row and abs(cands[o].timestamp - t) <= _NEIGHBOUR_MS]
            best[row] = max((float(cosines[o]) for o in near), default=0.0)
    return best, share, rows_near


@functools.lru_cache(maxsize=4096)
def _actor_parts(actor: str) -> tuple[str, ...]:
    """An actor's name as lower-case words of two letters or more (cached per name)."""
    return tuple(p for p in _WORD.findall(actor.lower()) if len(p) > 1)


def _date_match(q: QueryInfo, text: _Text, timestamp: int) -> float:
    if not q.months and not q.years:
        return 0.0
    when = datetime.fromtimestamp(timestamp / 1000, tz=UTC)
    hits = 0.0
    if q.months and (when.month in q.months or not q.months.isdisjoint(text.months)):
        hits += 0.5
    if q.years and (when.year in q.years or any(str(y) in text.tokens for y in q.years)):
        hits += 0.5
    return hits


def matrix(q: QueryInfo, cands: Sequence[Candidate], ranks: Mapping[str, Mapping[str, int]],
           scores: Mapping[str, Mapping[str, float]], factors: Mapping[str, Breakdown],
           ) -> npt.NDArray[np.float32]:
    """The feature matrix (``len(cands)`` × ``len(FEATURES)``), rows in ``cands``' order.

    ``ranks``: id → backend → 1-based rank; ``scores``: list name (``vector.episode``…)
    → id → the backend's own score; ``factors``: the breakdowns after the relevance gate.
    """
    out = np.zeros((len(cands), len(FEATURES)), dtype=np.float32)
    if not cands:
        return out
    vectors = np.array([c.vector for c in cands], dtype=np.float32)
    cosines = vectors @ q.vector
    background = float(np.mean(cosines)) if q.background is None else q.background
    order = np.argsort(-cosines, kind="stable")
    cos_rank = np.empty(len(cands), dtype=np.float32)
    cos_rank[order] = 1.0 / (1.0 + np.arange(len(cands), dtype=np.float32))
    neighbour, thread_share, near = _neighbours(cands, cosines)
    fused = np.array([factors.get(c.id, {}).get("rrf", {}).get("value", 0.0) for c in cands])
    by_fused = np.argsort(-fused, kind="stable")
    fused_rank = np.empty(len(cands), dtype=np.float32)
    fused_rank[by_fused] = 1.0 / (1.0 + np.arange(len(cands), dtype=np.float32))
    # Pseudo-relevance feedback: closeness to the centroid of the pipeline's best three (a
    # second piece of evidence of a multi-hop answer reads like the first, not the query).
    centroid = vectors[by_fused[:_FEEDBACK]].mean(axis=0)
    feedback = vectors @ (
        centroid / max(float(np.linalg.norm(centroid)), 1e-9)).astype(np.float32)
    own: dict[str, dict[str, float]] = {}
    for name, values in scores.items():
        backend = name.split(".", 1)[0]
        top = max((abs(v) for v in values.values()), default=0.0)
        if backend in BACKENDS and top > 0.0:
            merged = own.setdefault(backend, {})
            for item, value in values.items():
                merged.setdefault(item, value / top)
    total_idf = sum(w for w in q.terms.values() if w > 0.0)
    pool_size = float(len(cands))
    for row, c in enumerate(cands):
        r = ranks.get(c.id, {})
        f = factors.get(c.id, {})
        relevance = f.get("relevance", {})
        text = _text(c.content)
        matched = [w for t, w in q.terms.items() if w > 0.0 and t in text.terms]
        actor = c.provenance.get("actor")
        actor_parts = _actor_parts(actor) if isinstance(actor, str) else ()
        row_values = [
            *(1.0 / r[b] if b in r else 0.0 for b in BACKENDS),
            *(own.get(b, {}).get(c.id, 0.0) for b in BACKENDS),
            f.get("rrf", {}).get("value", 0.0),
            relevance.get("lexical", 0.0), relevance.get("semantic", 0.0),
            relevance.get("tier", 0.0),
            f.get("recency", {}).get("value", 0.0),
            f.get("causal", {}).get("value", 0.0),
            float(cosines[row]), float(cosines[row]) - background, float(cos_rank[row]),
            neighbour[row], thread_share[row], float(fused_rank[row]), float(feedback[row]),
            float(q.window is not None and q.window[0] <= c.timestamp < q.window[1]),
            float(q.window is not None),
            float(any(p in q.words for p in actor_parts)),
            (sum(1 for cap in q.capitals if cap in text.tokens) / len(q.capitals)
             if q.capitals else 0.0),
            sum(matched) / total_idf if total_idf > 0.0 else 0.0,
            max(matched, default=0.0),
            (sum(1 for b in q.bigrams if b in text.bigrams) / len(q.bigrams)
             if q.bigrams else 0.0),
            q.question_type, float(len(q.terms)),
            (sum(1 for n in q.numbers if n in text.numbers) / len(q.numbers)
             if q.numbers else 0.0),
            float(len(q.numbers)),
            _date_match(q, text, c.timestamp),
            float(bool(text.numbers)), float(text.has_time), text.length,
            float(text.is_question),
            float(c.kind == "entry"),
            pool_size,
            0.0, 0.0,  # neighbour_coverage, neighbour_fused: below, once every row is in
        ]
        out[row] = row_values
    # What the turns beside it say: a question matched in one turn is often answered in
    # the next, which need not repeat a word of it.
    for source, target in (("idf_coverage", "neighbour_coverage"),
                           ("fused", "neighbour_fused")):
        column, into = FEATURES.index(source), FEATURES.index(target)
        for row, others in enumerate(near):
            if others:
                out[row, into] = out[others, column].max()
    return out
