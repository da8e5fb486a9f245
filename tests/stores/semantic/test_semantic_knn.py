"""KNN: vec0 (the stored index) and the numpy mirror agree, with every filter."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.records import Category, EntryStatus, Regime
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.semantic.types import EntryFilter
from grimoire.stores.semantic.vectors import CacheOp, VectorCache, VectorMeta
from tests.stores.semantic.test_semantic_support import (
    DIM,
    clock,
    make_entry,
    open_store,
    rng,
    store,
    unit,
)

__all__ = ["clock", "rng", "store"]  # fixtures


def _ids(hits: list[tuple[Any, float]]) -> list[str]:
    return [e.id for e, _ in hits]


def _assert_same(a: list[tuple[Any, float]], b: list[tuple[Any, float]]) -> None:
    """Same entries with the same similarities (order may differ only between exact ties)."""
    assert len(a) == len(b)
    assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-5)
    if a:
        cut = a[-1][1] + 1e-5  # above the last similarity no tie can swap members
        assert {e.id for e, s in a if s > cut} == {e.id for e, s in b if s > cut}


def test_knn_returns_nearest_first_with_cosine(store: SemanticStore,
                                               rng: np.random.Generator) -> None:
    vectors = [unit(rng) for _ in range(20)]
    made = [make_entry() for _ in vectors]
    for e, v in zip(made, vectors, strict=True):
        store.insert_entry(e, v)
    query = vectors[3] + 0.05 * unit(rng)
    for source in ("cache", "vec0", "auto"):
        hits = store.knn(query, 5, source=source)  # type: ignore[arg-type]
        assert hits[0][0] == made[3]
        sims = [s for _, s in hits]
        assert sims == sorted(sims, reverse=True)
        q = query / np.linalg.norm(query)
        expected = sorted((float(v @ q) for v in vectors), reverse=True)[:5]
        assert np.allclose(sims, expected, atol=1e-5)


def test_strategy_regime_and_category_filters(store: SemanticStore,
                                              rng: np.random.Generator) -> None:
    v = unit(rng)
    rows = {
        "global": make_entry(),
        "dca": make_entry(strategy="eth-dca"),
        "lp": make_entry(strategy="lp", market_regime=Regime.BULL),
        "warn": make_entry(category=Category.WARNING, market_regime=Regime.CRISIS),
        "cand": make_entry(status=EntryStatus.CANDIDATE),
        "quar": make_entry(status=EntryStatus.QUARANTINED),
    }
    for e in rows.values():
        store.insert_entry(e, v + 0.01 * unit(rng))
    name = {e.id: k for k, e in rows.items()}
    cases = {
        None: {"global", "dca", "lp", "warn", "cand"},
        EntryFilter.for_strategy("eth-dca"): {"global", "dca", "warn", "cand"},
        EntryFilter.for_strategy("eth-dca", include_global=False): {"dca"},
        EntryFilter.for_strategy(None): {"global", "warn", "cand"},
        EntryFilter(regimes=(Regime.BULL, Regime.CRISIS)): {"lp", "warn"},
        EntryFilter(regimes=(Regime.CRISIS, None)): {"global", "dca", "warn", "cand"},
        EntryFilter(categories=(Category.WARNING,)): {"warn"},
        EntryFilter(statuses=(EntryStatus.CANDIDATE, EntryStatus.QUARANTINED)): {"cand", "quar"},
        EntryFilter(strategies=()): set(),
    }
    for filt, expected in cases.items():
        for source in ("cache", "vec0"):
            got = {name[e.id] for e, _ in store.knn(v, 10, filt, source=source)}  # type: ignore[arg-type]
            assert got == expected, (filt, source)


def test_k_edge_cases(store: SemanticStore, rng: np.random.Generator) -> None:
    assert store.knn(unit(rng), 5) == []
    for _ in range(3):
        store.insert_entry(make_entry(), unit(rng))
    assert len(store.knn(unit(rng), 10)) == 3
    assert len(store.knn(unit(rng), 10, source="vec0")) == 3
    assert store.knn(unit(rng), 0) == []
    with pytest.raises(ValidationError, match="k"):
        store.knn(unit(rng), -1)
    with pytest.raises(ValidationError, match="vector"):
        store.knn(np.ones(DIM - 1), 3)
    with pytest.raises(ValidationError, match="vector"):
        store.knn(np.full(DIM, np.nan), 3)


def test_cache_can_be_turned_off(tmp_path: Path, rng: np.random.Generator) -> None:
    with open_store(tmp_path / "s.sqlite", vector_cache=False) as store:
        e = make_entry()
        v = unit(rng)
        store.insert_entry(e, v)
        assert store.knn(v, 1)[0][0] == e
        with pytest.raises(NotAvailableError):
            store.knn(v, 1, source="cache")


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "insert", "status", "strategy", "reembed",
                         "archive", "category"]),
        st.integers(0, 10_000),
    ),
    min_size=1, max_size=40,
)
_FILTERS = st.builds(
    EntryFilter,
    categories=st.none() | st.lists(st.sampled_from(Category), max_size=3).map(tuple),
    statuses=st.none() | st.lists(st.sampled_from(EntryStatus), min_size=1, max_size=3).map(tuple),
    strategies=st.none() | st.lists(st.sampled_from([None, "a", "b"]), min_size=1,
                                    max_size=2).map(tuple),
    regimes=st.none() | st.lists(st.sampled_from([None, *Regime]), min_size=1,
                                 max_size=2).map(tuple),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, filters=st.lists(_FILTERS, min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12))
def test_mirror_equals_vec0_after_any_sequence_of_writes(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]],
    filters: list[EntryFilter], seed: int, k: int,
) -> None:
    """Invariant: the numpy mirror answers exactly what vec0 answers, and so does a
    mirror rebuilt from vec0 on reopen."""
    gen = np.random.default_rng(seed)
    path = tmp_path_factory.mktemp("knn") / "s.sqlite"
    store = open_store(path, synchronous="NORMAL")  # many commits; durability is not tested here
    live: list[Any] = []
    cats, stats = list(Category), list(EntryStatus)
    for op, n in ops:
        if op == "insert" or not live:
            e = make_entry(category=cats[n % len(cats)], status=stats[n % len(stats)],
                           strategy=[None, "a", "b"][n % 3],
                           market_regime=[None, *Regime][n % 7])
            store.insert_entry(e, unit(gen))
            live.append(e)
            continue
        i = n % len(live)
        e = live[i]
        if op == "status":
            e = dataclasses.replace(e, status=stats[(n // 7) % len(stats)])
            store.update_entry(e)
        elif op == "strategy":
            e = dataclasses.replace(e, strategy=[None, "a", "b"][(n // 7) % 3])
            store.update_entry(e)
        elif op == "category":
            e = dataclasses.replace(e, category=cats[(n // 7) % len(cats)])
            store.update_entry(e)
        elif op == "reembed":
            store.update_entry(e, unit(gen))
        else:
            e = store.archive(e.id)
        live[i] = e
    queries = [unit(gen) for _ in filters]
    for q, f in zip(queries, filters, strict=True):
        _assert_same(store.knn(q, k, f, source="cache"), store.knn(q, k, f, source="vec0"))
        # Every returned entry passes the filter, and nothing passing it was missed.
        passing = [e for e in live if f.matches(e)]
        assert len(store.knn(q, k, f)) == min(k, len(passing))
    store.close()
    with open_store(path) as reopened:
        for q, f in zip(queries, filters, strict=True):
            _assert_same(reopened.knn(q, k, f, source="cache"),
                         reopened.knn(q, k, f, source="vec0"))


def test_mirror_compacts_dead_slots_and_keeps_answers() -> None:
    """Re-embedding appends a row and marks the old one dead; compaction reclaims them."""
    gen = np.random.default_rng(3)
    cache = VectorCache(DIM)
    meta = VectorMeta("insight", "active", "", "")
    vecs = {rid: unit(gen) for rid in range(1, 51)}
    cache.apply(CacheOp(rid, v, meta) for rid, v in vecs.items())
    old = cache._snap
    for _ in range(5):
        vecs = {rid: unit(gen) for rid in vecs}
        cache.apply(CacheOp(rid, v, meta) for rid, v in vecs.items())
    assert sorted(cache.rids()) == list(range(1, 51))
    assert cache._n < 6 * 50  # compacted
    q = unit(gen)
    expected = sorted(vecs, key=lambda rid: -float(vecs[rid] @ q))[:5]
    assert [rid for rid, _ in cache.knn(q, 5, EntryFilter())] == expected
    # A snapshot taken before the changes still answers from its own vectors.
    assert len(old.matrix) == 50


def test_readers_of_an_old_snapshot_are_not_affected_by_appends(
    store: SemanticStore, rng: np.random.Generator
) -> None:
    first = make_entry()
    v = unit(rng)
    store.insert_entry(first, v)
    cache = store._cache
    assert cache is not None
    snap = cache._snap
    with store.transaction():
        for _ in range(300):  # forces the buffer to grow past its first capacity
            store.insert_entry(make_entry(), unit(rng))
    assert snap.matrix.shape == (1, DIM)
    assert np.allclose(snap.matrix[0], v)
    assert store.knn(v, 1)[0][0] == first


def test_knn_versions_stamps_match_stored_rows(tmp_path: Path,
                                               rng: np.random.Generator) -> None:
    """The mirror's row stamps (id, version) equal what SQLite holds, after inserts,
    updates, re-embeds and archives, and after a reopen (stamps read back in ``load``)."""
    from grimoire.stores.semantic import mentions
    path = tmp_path / "stamps.db"
    store = open_store(path)
    made = [make_entry(confidence=0.3 + 0.01 * i) for i in range(30)]
    vectors = {e.id: unit(rng) for e in made}
    for e in made:
        store.insert_entry(e, vectors[e.id])
    store.update_entry(dataclasses.replace(made[0], confidence=0.91, updated_at=5))
    store.update_entry(dataclasses.replace(made[1], strategy="lp", updated_at=6), unit(rng))
    store.archive(made[2].id, now=7)
    q = unit(rng)

    def stored(s: SemanticStore) -> dict[str, Any]:
        rids = s._db.read().execute("SELECT rid FROM grimoire_entries").fetchall()
        by_rid = mentions.entry_versions(s._db.read(), (r[0] for r in rids))
        return dict(by_rid.values())

    for s in (store, None):
        if s is None:
            store.close()
            s = store = open_store(path)
        truth = stored(s)
        for filt in (EntryFilter(), EntryFilter.for_strategy("lp")):
            found = s.knn_versions(q, 50, filt)
            assert found, filt
            assert {i: v for i, v, _ in found} == {i: truth[i] for i, _, _ in found}
            assert [i for i, _, _ in found] == _ids(s.knn(q, 50, filt, source="vec0"))
        current = {e.id: mentions.version_of(e) for e in s.get_entries(truth).values()}
        assert current == truth  # a record's version_of equals its stored row's version
        # max_entry_rid from the mirror equals SQLite's
        assert s.max_entry_rid() == mentions.max_entry_rid(s._db.read()) > 0
    store.close()
