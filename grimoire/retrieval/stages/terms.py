"""Which query words BM25 should look for: the distinctive ones.

The stores' full-text search ORs the words it is given and scores every
document that matches any of them, at a few µs per match (measured: 13–28 ms
for 2.7k–4.6k matching episodes on a loaded 2-core machine, most of a
retrieval's budget). A word that occurs in a large share of the corpus
("swap" in a trading agent's episodes) has a low BM25 weight anyway — it
barely changes the order — but it makes every document a match. So each
query word's document frequency is estimated from a sample of recent texts
(the newest ``SAMPLE`` episodes, the newest ``SAMPLE`` entries); words are
kept rarest first while their expected matches add up to at most
``retrieval.bm25_max_matches`` documents, and the rest are left to the
vector backend. When no word fits, BM25 is skipped for that kind. In a
smaller corpus every word fits; there the words in half the documents or
more are left out, as BM25's weighting zeroes them (``_weighted_words``).

Words are compared after a light normalisation (lower case, common English
suffixes off), close enough to the stores' porter stemmer for an estimate.
The episode sample is kept current by a post-write hook; the entry sample is
rebuilt when the entry table has grown by a fifth.

Owns: the samples and the word choice. Must not search.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import Any

from grimoire.context import Context

__all__ = ["SAMPLE", "TermSample", "observe_episode_terms", "sample_of", "selective_words",
           "terms_of"]

SAMPLE = 2_000
_WORD = re.compile(r"\w+", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "s")
_KEY = "retrieval.terms"
_LOCK = threading.Lock()


def _norm(word: str) -> str:
    word = word.lower()
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=8192)
def terms_of(text: str) -> frozenset[str]:
    """The text's distinct normalised words; cached, as retrieval reads the same entries'
    and episodes' texts call after call (immutable, so safe to share)."""
    return frozenset(_norm(w) for w in _WORD.findall(text))


class TermSample:
    """Document frequencies over a sliding sample of texts (thread-safe)."""

    def __init__(self, texts: Iterable[str] = (), size: int = SAMPLE) -> None:
        # Each text's distinct terms as a tuple of interned strings: a frozenset per text and
        # a copy of each word held 2,000 texts in ~2.6 MiB, the tuples in well under 1.
        self._docs: deque[tuple[str, ...]] = deque(maxlen=size)
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.mark = 0  # what the sample was built from (entries: the rowid watermark)
        self.add(texts)

    def add(self, texts: Iterable[str]) -> None:
        with self._lock:
            for text in texts:
                if len(self._docs) == self._docs.maxlen:
                    for term in self._docs[0]:  # no zero counts left behind
                        left = self._counts[term] - 1
                        if left:
                            self._counts[term] = left
                        else:
                            del self._counts[term]
                terms = tuple(sys.intern(t) for t in terms_of(text))
                self._docs.append(terms)
                self._counts.update(terms)

    @property
    def size(self) -> int:
        """How many texts the sample holds."""
        with self._lock:
            return len(self._docs)

    def share(self, word: str) -> float:
        """Estimated fraction of documents containing ``word`` (0 with an empty sample)."""
        return self.term_share(_norm(word))

    def term_share(self, term: str) -> float:
        """``share`` of a term already normalised (one of ``terms_of``'s)."""
        with self._lock:
            n = len(self._docs)
            return self._counts.get(term, 0) / n if n else 0.0


def _samples(ctx: Context) -> dict[str, TermSample]:
    with _LOCK:
        found: dict[str, TermSample] | None = ctx.extras.get(_KEY)
        if found is None:
            found = ctx.extras[_KEY] = {}
        return found


def _sample(ctx: Context, kind: str) -> TermSample:
    samples = _samples(ctx)
    sample = samples.get(kind)
    if kind == "episode":
        if sample is None:
            sample = TermSample(e.text for e in ctx.episodes.recent(SAMPLE))
            samples[kind] = sample
        return sample
    newest = ctx.semantic.max_entry_rid()
    if sample is None or newest > sample.mark * 1.2 + 10:
        entries = ctx.semantic.list_entries(order="created_at", limit=SAMPLE)
        sample = TermSample(e.content for e in entries)
        sample.mark = newest
        samples[kind] = sample
    return sample


def sample_of(ctx: Context, kind: str) -> TermSample:
    """The document-frequency sample of ``kind`` ("episode" | "entry"), built on first use."""
    return _sample(ctx, kind)


def selective_words(ctx: Context, kind: str, words: Sequence[str]) -> str:
    """The words worth a BM25 look-up among ``kind`` ("episode" | "entry"), space-joined."""
    if not words:
        return ""
    total = ctx.episodes.count() if kind == "episode" else ctx.semantic.max_entry_rid()
    cap = ctx.config.retrieval.bm25_max_matches
    if total <= cap:
        return _weighted_words(_sample(ctx, kind), words)
    sample = _sample(ctx, kind)
    expected = sorted((sample.share(w) * total, i) for i, w in enumerate(words))
    kept: set[int] = set()
    budget = float(cap)
    for matches, index in expected:  # rarest first, while the expected matches fit
        if matches > budget:
            break
        budget -= matches
        kept.add(index)
    return " ".join(w for i, w in enumerate(words) if i in kept)


def _weighted_words(sample: TermSample, words: Sequence[str]) -> str:
    """The words BM25 gives a weight, space-joined (all of them when none has one).

    FTS5's BM25 takes a word's IDF as ``log((N - n + 0.5) / (n + 0.5))`` and clamps it to
    1e-6 when that is not positive: a word in half the documents or more cannot change the
    order of the documents that match a rarer word, it only makes every other document a
    match (a 13-word situation over 152 entries: 1.45 ms with its five such words, 0.84 ms
    without). When every word is that common the query keeps them all: FTS5 still orders
    those matches (by term frequency and length), and that order is all BM25 has to give."""
    kept = [w for w in words if sample.share(w) < 0.5]
    return " ".join(kept if kept else words)


def observe_episode_terms(ctx: Context, episodes: Sequence[Any], _: Any) -> None:
    """Post-write hook: keep the episode sample current (only once it exists)."""
    sample = _samples(ctx).get("episode")
    if sample is not None:
        sample.add(e.text for e in episodes)
