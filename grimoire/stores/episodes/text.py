"""In-memory BM25 full-text index over episode texts (the store's ``text_search``).

Owns the inverted index: a vocabulary (term → id), an immutable CSR block of
postings (term → positions, term frequencies) for the first ``base_n`` rows, a
small delta (per term, arrays grown by doubling) for rows added since, and
each row's length. The delta is merged into a new CSR block every
``max(MIN_DELTA, base_n // 8)`` rows (a numpy concatenate and stable sort).

Why in memory (scripts/bench_stores.py --part episodes, one run, common-word queries): at
10k rows FTS5 bm25 took 8-16 ms p50 and LanceDB's FTS 6-9 ms, this 0.5-0.6 ms;
at 100k 82-269 ms, 9-13 ms and 2.4-3.6 ms. FTS5 and LanceDB score every
matching row through their query engines; here it is a few numpy gathers and
one bincount, prefilters apply exactly before the top-k, and buffered rows
are searchable at once. It is rebuilt from the stored texts on open (~0.15 s at
10k, ~1.2 s at 100k), so it needs no file of its own.

Tokens: lower-cased runs of letters, digits and ``_`` (Python regex word characters, one
tokenizer for rows and queries), then Harman's S-stemmer (swaps → swap).
Scores: Okapi BM25 (k1=1.2, b=0.75) with Lucene's non-negative idf.
Concurrency as in ``episodes_index``: one writer, readers take ``self.snap``.
It must not do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["TextIndex", "s_stem", "tokenize"]

K1 = 1.2
B = 0.75
MIN_DELTA = 1024
MAX_QUERY_TERMS = 64
LOAD_BATCH = 65_536  # texts tokenized at a time by ``load``
_WORD = re.compile(r"\w+")


def s_stem(word: str) -> str:
    """Harman's S-stemmer: conservative plural folding (policies → policy, swaps → swap)."""
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(texts: Sequence[str] | pa.Array | pa.ChunkedArray
             ) -> tuple[npt.NDArray[np.int64], list[str], npt.NDArray[np.int64]]:
    """(row of each token, distinct stemmed terms, term index of each token).

    One tokenizer for stored rows, new rows and queries (Python's ``re``; pyarrow's
    RE2 was 2x faster in bulk but recompiles its pattern per call, ~0.8 ms, and
    its Unicode classes and case folding differ from Python's at the edges).
    """
    if not isinstance(texts, list):
        texts = texts.to_pylist() if isinstance(texts, pa.Array | pa.ChunkedArray) else list(texts)
    token_lists = [_WORD.findall(t.lower()) for t in texts]
    lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists))
    rows = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    encoded = pa.array(list(chain.from_iterable(token_lists)), pa.string()).dictionary_encode()
    stems = [s_stem(w) for w in encoded.dictionary.to_pylist()]
    distinct = list(dict.fromkeys(stems))
    stem_id = {s: i for i, s in enumerate(distinct)}
    raw_to_term = np.array([stem_id[s] for s in stems] or [0], dtype=np.int64)
    indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return rows, distinct, raw_to_term[indices]


@dataclass(frozen=True, slots=True)
class _Tail:
    """A term's postings since the last merge: arrays grown by doubling, first ``count`` valid.

    The writer fills slots past ``count`` and then replaces the whole ``_Tail`` in the
    dict (one atomic assignment), so a reader's views are always complete.
    """

    docs: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]
    count: int

    def plus(self, doc: int, tf: int) -> _Tail:
        docs, tfs = self.docs, self.tfs
        if self.count == docs.shape[0]:
            docs = np.resize(docs, 2 * self.count)
            tfs = np.resize(tfs, 2 * self.count)
        docs[self.count] = doc
        tfs[self.count] = tf
        return _Tail(docs, tfs, self.count + 1)


_EMPTY_TAIL = _Tail(np.zeros(0, np.int32), np.zeros(0, np.float32), 0)


@dataclass(frozen=True, slots=True)
class TextSnapshot:
    base_n: int  # rows covered by the CSR block
    starts: npt.NDArray[np.int64]  # term id → slice of docs/tfs (terms known at the merge)
    docs: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]
    delta: dict[int, _Tail]  # term id → postings of rows >= base_n
    lengths: npt.NDArray[np.float32]  # tokens per row (capacity; rows < n are valid)


class TextIndex:
    """See the module docstring. Writer methods: ``load``, ``add``."""

    def __init__(self, min_delta: int = MIN_DELTA) -> None:
        self.vocab: dict[str, int] = {}
        self._min_delta = min_delta
        self._delta_rows = 0
        self.snap = TextSnapshot(0, np.zeros(1, np.int64), np.zeros(0, np.int32),
                                 np.zeros(0, np.float32), {}, np.zeros(1024, np.float32))

    def _term_ids(self, distinct: list[str]) -> npt.NDArray[np.int64]:
        vocab = self.vocab
        return np.array([vocab.setdefault(t, len(vocab)) for t in distinct] or [0],
                        dtype=np.int64)

    def _pairs(self, texts: Sequence[str] | pa.Array | pa.ChunkedArray, first: int
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                          npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(term, position, tf) per distinct (term, row), term-major, and row lengths."""
        rows, distinct, local = tokenize(texts)
        count = len(texts)
        lengths = np.bincount(rows, minlength=count).astype(np.float32)
        terms = self._term_ids(distinct)[local]
        key = terms * count + rows  # count ≥ 1 here: distinct (term, row) pairs
        uniq, tf = np.unique(key, return_counts=True)
        return uniq // count, uniq % count + first, tf.astype(np.int64), lengths

    def load(self, texts: pa.ChunkedArray | pa.Array) -> None:
        """Build from every stored text (rows in position order) into an empty index."""
        n = len(texts)
        if n == 0:
            return
        # A batch of texts at a time: tokenizing all at once held a Python string per token
        # (~10M at 1M rows, over a GiB) where the batches' numpy pairs hold 12 bytes each.
        store = np.zeros(max(1024, n + n // 4), np.float32)
        parts: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32],
                          npt.NDArray[np.float32]]] = []
        for first in range(0, n, LOAD_BATCH):
            batch = texts[first:first + LOAD_BATCH]
            terms, docs, tfs, lengths = self._pairs(batch, first)
            store[first:first + len(batch)] = lengths
            parts.append((terms.astype(np.int32), docs.astype(np.int32), tfs.astype(np.float32)))
        all_terms = np.concatenate([p[0] for p in parts])
        order = np.argsort(all_terms, kind="stable")  # batches ascend by row: docs stay ordered
        all_docs = np.concatenate([p[1] for p in parts])[order]
        all_tfs = np.concatenate([p[2] for p in parts])[order]
        starts = np.searchsorted(all_terms[order], np.arange(len(self.vocab) + 1)
                                 ).astype(np.int64)
        self.snap = TextSnapshot(n, starts, all_docs, all_tfs, {}, store)

    def add(self, first: int, texts: list[str]) -> None:
        """Index rows ``first .. first+len(texts)`` (call before they are published)."""
        if not texts:
            return
        snap = self.snap
        terms, docs, tfs, lengths = self._pairs(texts, first)
        store = snap.lengths
        end = first + len(texts)
        if end > store.shape[0]:
            grown = np.zeros(max(end, 2 * store.shape[0]), np.float32)
            grown[:first] = store[:first]
            store = grown
        store[first:end] = lengths
        delta = snap.delta
        for term, pos, tf in zip(terms.tolist(), docs.tolist(), tfs.tolist(), strict=True):
            tail = delta.get(term)
            if tail is None:
                tail = _Tail(np.zeros(4, np.int32), np.zeros(4, np.float32), 0)
            delta[term] = tail.plus(pos, tf)
        self._delta_rows += len(texts)
        if store is not snap.lengths:
            snap = TextSnapshot(snap.base_n, snap.starts, snap.docs, snap.tfs, delta, store)
        if self._delta_rows >= max(self._min_delta, snap.base_n // 8):
            snap = self._merged(snap, end)
        self.snap = snap

    def _merged(self, snap: TextSnapshot, n: int) -> TextSnapshot:
        """A new CSR block holding the old one plus the delta (rows < n)."""
        base_terms = np.repeat(np.arange(len(snap.starts) - 1, dtype=np.int64),
                               np.diff(snap.starts))
        add_terms, add_docs, add_tfs = [], [], []
        for term, tail in snap.delta.items():
            add_terms.append(np.full(tail.count, term, dtype=np.int64))
            add_docs.append(tail.docs[: tail.count].astype(np.int64))
            add_tfs.append(tail.tfs[: tail.count])
        terms = np.concatenate([base_terms, *add_terms])
        # Stable: within a term, base positions come first and delta lists are in order.
        order = np.argsort(terms, kind="stable")
        docs = np.concatenate([snap.docs.astype(np.int64), *add_docs])[order]
        tfs = np.concatenate([snap.tfs, *add_tfs])[order]
        starts = np.searchsorted(terms[order], np.arange(len(self.vocab) + 1)).astype(np.int64)
        self._delta_rows = 0
        return TextSnapshot(n, starts, docs.astype(np.int32), tfs, {}, snap.lengths)

    @property
    def nbytes(self) -> int:
        """Approximate memory of the postings and row lengths (not the vocabulary dict)."""
        snap = self.snap
        tails = sum(t.docs.nbytes + t.tfs.nbytes for t in list(snap.delta.values()))
        return int(snap.docs.nbytes + snap.tfs.nbytes + snap.starts.nbytes
                   + snap.lengths.nbytes + tails)

    # ------------------------------------------------------------ reader side

    def search(self, n: int, query: str, k: int, mask: npt.NDArray[np.bool_] | None,
               ) -> list[tuple[int, float]]:
        """Top-k (position, BM25) over rows < n passing ``mask``, best first."""
        if n == 0 or k <= 0:
            return []
        scores = self._scores(n, query)
        if scores is None:
            return []
        if mask is not None:
            scores[~mask] = 0.0
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        hits = hits[np.lexsort((hits, -scores[hits]))]
        return [(int(p), float(scores[p])) for p in hits]

    def score(self, n: int, query: str, positions: Sequence[int]) -> list[float]:
        """The BM25 of ``query`` at each of ``positions`` (rows < n; 0.0 where no word
        matches): how ``search`` would score those rows, whether or not it returns them."""
        scores = self._scores(n, query) if n else None
        if scores is None:
            return [0.0] * len(positions)
        return [float(scores[p]) if 0 <= p < n else 0.0 for p in positions]

    def _scores(self, n: int, query: str) -> npt.NDArray[np.float64] | None:
        """BM25 of ``query`` for every row < n; None when no query word is indexed."""
        snap = self.snap
        _rows, distinct, _local = tokenize([query])
        wanted = [self.vocab.get(t) for t in distinct[:MAX_QUERY_TERMS]]
        lengths = snap.lengths[:n]
        norm = K1 * (1.0 - B + B * lengths / max(float(lengths.mean()), 1e-9))
        all_docs, all_weights = [], []
        for term in wanted:
            if term is None:
                continue
            docs, tfs = self._postings(snap, term, n)
            if docs.size == 0:
                continue
            idf = np.log1p((n - docs.size + 0.5) / (docs.size + 0.5))
            all_docs.append(docs)
            all_weights.append(idf * tfs * (K1 + 1.0) / (tfs + norm[docs]))
        if not all_docs:
            return None
        scores: npt.NDArray[np.float64] = np.bincount(
            np.concatenate(all_docs), weights=np.concatenate(all_weights), minlength=n
        ).astype(np.float64, copy=False)
        return scores

    @staticmethod
    def _postings(snap: TextSnapshot, term: int, n: int
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        docs: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        tfs: npt.NDArray[np.float64] = np.zeros(0, np.float64)
        if term + 1 < len(snap.starts):
            lo, hi = int(snap.starts[term]), int(snap.starts[term + 1])
            docs = snap.docs[lo:hi].astype(np.int64)
            tfs = snap.tfs[lo:hi].astype(np.float64)
            if snap.base_n > n:  # a snapshot newer than the caller's n: cut to n
                cut = int(np.searchsorted(docs, n))
                docs, tfs = docs[:cut], tfs[:cut]
        tail = snap.delta.get(term, _EMPTY_TAIL)
        if tail.count:
            cut = int(np.searchsorted(tail.docs[: tail.count], n))  # positions ascend
            docs = np.concatenate([docs, tail.docs[:cut].astype(np.int64)])
            tfs = np.concatenate([tfs, tail.tfs[:cut].astype(np.float64)])
        return docs, tfs
