"""The episode index's int8 vectors (``QuantizedRows``): scores, rows, growth, flushes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes import index as episodes_index
from grimoire.stores.episodes.index import MIN_CAPACITY, EpisodeIds, EpisodeIndex, pending_vectors
from grimoire.stores.episodes.quantized import QuantizedRows, quantize

DIM = 48


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_products_and_rows_match_the_float_matrix_within_a_step() -> None:
    x = unit_rows(2500)  # more than one block of rows
    x[7] = 0.0  # a zero row stays zero
    rows = QuantizedRows(*quantize(x))
    step = float(np.abs(x).max()) / 127
    assert rows.shape == (2500, DIM) and len(rows) == 2500
    np.testing.assert_allclose(rows[:], x, atol=step)
    np.testing.assert_allclose(rows[[3, 1]], x[[3, 1]], atol=step)
    np.testing.assert_allclose(rows[5], x[5], atol=step)
    q = unit_rows(1, seed=1)[0]
    scores = rows @ q
    assert scores.dtype == np.float32 and scores.shape == (2500,)
    np.testing.assert_allclose(scores, x @ q, atol=DIM * step / 2)
    np.testing.assert_allclose(scores, rows.dequantize() @ q, atol=1e-5)
    many = unit_rows(3, seed=2).T
    np.testing.assert_allclose(rows @ many, rows.dequantize() @ many, atol=1e-5)
    np.testing.assert_allclose(rows.take([9, 2]) @ q, scores[[9, 2]], atol=1e-6)
    assert scores[7] == 0.0
    # a stored row scored against itself keeps its exact squared norm (1 for a unit row)
    np.testing.assert_allclose(np.einsum("ij,ij->i", rows[:10], x[:10])[[0, 1, 2]], 1.0,
                               atol=1e-5)


def episode(i: int) -> Episode:
    return Episode(id=f"e-{i}", text=f"row {i}", type=EpisodeType.ACTION, timestamp=1_000 + i)


def test_index_grows_by_a_quarter_and_keeps_exact_vectors_until_flushed() -> None:
    index = EpisodeIndex(DIM)
    x = unit_rows(MIN_CAPACITY + 10, seed=3)
    index.add([episode(i) for i in range(MIN_CAPACITY)], list(range(MIN_CAPACITY)),
              x[:MIN_CAPACITY])
    index.add([episode(i) for i in range(MIN_CAPACITY, MIN_CAPACITY + 10)],
              list(range(MIN_CAPACITY, MIN_CAPACITY + 10)), x[MIN_CAPACITY:])
    snap = index.snap
    assert snap.codes.dtype == np.int8 and snap.codes.shape[0] == MIN_CAPACITY * 5 // 4
    np.testing.assert_array_equal(pending_vectors(snap), x)  # exact, for the flush
    index.mark_flushed(MIN_CAPACITY, pa.table({"id": [f"e-{i}" for i in range(MIN_CAPACITY)]}))
    np.testing.assert_array_equal(pending_vectors(index.snap), x[MIN_CAPACITY:])
    top = index.search(index.snap, x[MIN_CAPACITY + 3], 1, None)
    assert top[0][0] == MIN_CAPACITY + 3 and abs(top[0][1] - 1.0) < 1e-5


def test_id_lookup_across_merges_loads_and_hash_collisions(monkeypatch: pytest.MonkeyPatch,
                                                           ) -> None:
    n = episodes_index._RECENT_IDS + 100
    x = unit_rows(n, seed=5)
    index = EpisodeIndex(DIM)
    for lo in range(0, n, 1024):  # crosses one merge of the recent ids
        hi = min(n, lo + 1024)
        index.add([episode(i) for i in range(lo, hi)], list(range(lo, hi)), x[lo:hi])
    assert len(index.lookup.hashes) == episodes_index._RECENT_IDS
    assert 0 < len(index.lookup.recent) < episodes_index._RECENT_IDS
    assert all(index.find(f"e-{i}") == i for i in range(n))
    assert index.find("e-nope") is None and index.find(f"e-{n}") is None
    index.mark_flushed(n, pa.table({"id": [f"e-{i}" for i in range(n)]}))
    assert all(index.find(f"e-{i}") == i for i in range(0, n, 7))
    ids = EpisodeIds(index.snap)
    assert len(ids) == n and ids[3] == "e-3" and ids[-1] == f"e-{n - 1}"
    assert list(ids) == [f"e-{i}" for i in range(n)] and ids[2:4] == ["e-2", "e-3"]
    # every id hashing alike: found by comparing the stored ids, never a wrong row
    monkeypatch.setattr(episodes_index, "_id_hash", lambda _id: 7)
    loaded = EpisodeIndex(DIM)
    loaded.load(pa.table({"id": [f"e-{i}" for i in range(50)], "seq": list(range(50)),
                          "type": ["action"] * 50, "regime": pa.nulls(50, pa.string()),
                          "strategy": pa.nulls(50, pa.string()),
                          "tool": pa.nulls(50, pa.string()),
                          "timestamp": list(range(50)), "ref": pa.nulls(50, pa.string())}),
                [(np.arange(50, dtype=np.int64), x[:50])])
    assert [loaded.find(f"e-{i}") for i in (0, 17, 49)] == [0, 17, 49]
    assert loaded.find("e-50") is None
