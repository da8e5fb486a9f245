"""The in-memory BM25 index behind EpisodeStore.text_search: tokenizer and stemmer, exact
Okapi BM25 scores, and incremental indexing (delta + merges) equal to a batch build."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.stores.episodes.text import K1, B, TextIndex, s_stem, tokenize


def test_tokenizer_lowercases_splits_and_stems() -> None:
    rows, terms, local = tokenize(["Swaps of ETH: gas 30 gwei!", "", "Policies café_x"])
    assert [terms[i] for i in local] == ["swap", "of", "eth", "gas", "30", "gwei",
                                         "policy", "café_x"]
    assert rows.tolist() == [0, 0, 0, 0, 0, 0, 2, 2]
    assert [s_stem(w) for w in ("oracles", "status", "glass", "queries", "gas", "shoes")] == [
        "oracle", "status", "glass", "query", "gas", "shoe"]


def _reference_bm25(docs: list[str], query: str) -> dict[int, float]:
    tokenized = []
    for doc in docs:
        _rows, terms, local = tokenize([doc])
        tokenized.append([terms[i] for i in local])
    _r, qterms, _l = tokenize([query])
    n = len(docs)
    avgdl = sum(len(t) for t in tokenized) / n
    scores: dict[int, float] = {}
    for term in qterms:
        df = sum(term in t for t in tokenized)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, toks in enumerate(tokenized):
            tf = Counter(toks)[term]
            if tf:
                scores[i] = scores.get(i, 0.0) + idf * tf * (K1 + 1) / (
                    tf + K1 * (1 - B + B * len(toks) / avgdl))
    return scores


def test_scores_are_okapi_bm25() -> None:
    docs = ["gas spike on mainnet gas gas", "bridge usdc to base", "gas fees low on base",
            "regime shift to bear market", "nothing relevant here at all today"]
    index = TextIndex()
    index.load(pa.array(docs))
    got = dict(index.search(len(docs), "gas base", 10, None))
    want = _reference_bm25(docs, "gas base")
    assert got.keys() == want.keys()
    for pos, score in want.items():
        assert math.isclose(got[pos], score, rel_tol=1e-6)  # lengths are float32
    top = index.search(len(docs), "gas base", 10, None)
    assert [p for p, _ in top] == sorted(want, key=lambda p: (-want[p], p))


def test_score_gives_the_bm25_of_rows_outside_the_top_k() -> None:
    """What the FTS overlap check scores LanceDB's hits with: our BM25 of any row, whether
    or not our own top k holds it (0 where no query word matches, or past n)."""
    docs = ["gas spike on mainnet gas gas", "bridge usdc to base", "gas fees low on base",
            "regime shift to bear market", "nothing relevant here at all today"]
    index = TextIndex()
    index.load(pa.array(docs))
    want = _reference_bm25(docs, "gas base")
    assert len(index.search(len(docs), "gas base", 1, None)) == 1
    got = index.score(len(docs), "gas base", [4, 2, 1, 0, 3])
    assert got[0] == 0.0 and got[4] == 0.0
    for pos, score in zip([2, 1, 0], got[1:4], strict=True):
        assert math.isclose(score, want[pos], rel_tol=1e-6)
    assert index.score(2, "gas base", [2]) == [0.0]  # row 2 is not below n = 2
    assert index.score(len(docs), "unknown words", [0, 1]) == [0.0, 0.0]


def test_mask_and_n_limit_the_candidates() -> None:
    docs = ["alpha beta", "alpha", "beta gamma", "alpha alpha"]
    index = TextIndex()
    index.load(pa.array(docs[:2]))
    index.add(2, docs[2:])
    assert {p for p, _ in index.search(4, "alpha", 10, None)} == {0, 1, 3}
    assert {p for p, _ in index.search(2, "alpha", 10, None)} == {0, 1}  # rows >= n unseen
    mask = np.array([False, True, True, False])
    assert {p for p, _ in index.search(4, "alpha beta", 10, mask)} == {1, 2}
    assert index.search(4, "zeta", 10, None) == []
    assert index.search(4, "", 10, None) == []


words = st.sampled_from(["gas", "swap", "swaps", "pool", "oracle", "eth", "usdc", "bear",
                         "bull", "spike", "fees", "low", "high", "bridge"])
texts = st.lists(words, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(corpus=st.lists(texts, min_size=1, max_size=60), loaded=st.integers(0, 60),
       batch=st.integers(1, 7), query=st.lists(words, min_size=1, max_size=3).map(" ".join))
def test_incremental_index_equals_batch_build(corpus: list[str], loaded: int, batch: int,
                                              query: str) -> None:
    """Loading some rows, adding the rest in batches (with merges every few rows) gives the
    same scores as building from all rows at once, at every prefix n."""
    loaded = min(loaded, len(corpus))
    incremental = TextIndex(min_delta=5)
    incremental.load(pa.array(corpus[:loaded]))
    for start in range(loaded, len(corpus), batch):
        incremental.add(start, corpus[start:start + batch])
    full = TextIndex()
    full.load(pa.array(corpus))
    for n in {len(corpus), max(1, len(corpus) // 2)}:
        got = incremental.search(n, query, 100, None)
        want = full.search(n, query, 100, None) if n == len(corpus) else None
        if want is not None:
            assert [p for p, _ in got] == [p for p, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)
        prefix = TextIndex()
        prefix.load(pa.array(corpus[:n]))
        np.testing.assert_allclose(sorted(s for _, s in got),
                                   sorted(s for _, s in prefix.search(n, query, 100, None)),
                                   rtol=1e-6)


def test_a_load_in_batches_builds_the_postings_of_one_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``load`` tokenizes ``LOAD_BATCH`` texts at a time (memory at 1M rows); batches of 7
    give the same postings and scores as one batch."""
    from grimoire.stores.episodes import text as text_module

    docs = [f"swap {i % 5} on pool{i % 3} costs fees {'high' if i % 4 else 'low'}"
            for i in range(50)]
    whole = TextIndex()
    whole.load(pa.array(docs))
    monkeypatch.setattr(text_module, "LOAD_BATCH", 7)
    batched = TextIndex()
    batched.load(pa.array(docs))
    assert batched.vocab == whole.vocab
    for attr in ("starts", "docs", "tfs"):
        assert np.array_equal(getattr(batched.snap, attr), getattr(whole.snap, attr))
    assert batched.search(50, "pool1 low fees", 10, None) == whole.search(50, "pool1 low fees",
                                                                           10, None)
