"""EpisodeStore: append, reads (get, ref, search, text search, listings), flush policy,
compaction, identity checks, lifecycle. Real stores in tmp_path, HashEmbedder vectors."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from structlog.testing import capture_logs

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.errors import (
    EmbeddingMismatchError,
    NotFoundError,
    SchemaVersionError,
    StoreError,
    ValidationError,
)
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Outcome, Regime
from grimoire.stores.episodes.schema import META_VERSION, row_schema
from grimoire.stores.episodes.store import EpisodeFilter, EpisodeStore

EMB = HashEmbedder(dim=64)
_counter = itertools.count()


def make_episode(**overrides: Any) -> Episode:
    n = next(_counter)
    fields: dict[str, Any] = {
        "id": f"ep-{n:06d}",
        "text": f"swap eth for usdc on uniswap number {n}",
        "type": EpisodeType.ACTION,
        "timestamp": 1_767_225_600_000 + n,
    }
    fields.update(overrides)
    return Episode(**fields)


def vecs(episodes: list[Episode]) -> np.ndarray:
    return EMB.embed([e.text for e in episodes])


def open_store(path: Path, clock: FrozenClock | None = None, **cfg: Any) -> EpisodeStore:
    return EpisodeStore.open(path, model_id=EMB.model_id, dim=EMB.dim,
                             config=EpisodesConfig(**cfg), clock=clock or FrozenClock())


def add(store: EpisodeStore, *episodes: Episode) -> None:
    store.append(list(episodes), vecs(list(episodes)))


def test_roundtrip_every_field_buffered_flushed_and_reopened(tmp_path: Path) -> None:
    """Every Episode field survives the buffer, LanceDB, and a reopen unchanged."""
    full = make_episode(
        outcome=Outcome.NEGATIVE, ref="tx:0xabc", tool="uniswap", chain="base",
        token_pair="ETH/USDC", tick_id=42, regime=Regime.HIGH_VOL, strategy="momentum",
        actions=("swap", "hedge"), emotional_tag="anxious", gain=-12.5, valid_from=10,
        valid_until=20, metrics={"gas_gwei": 31.5, "slippage_bps": 12.0},
        prediction={"expected_return": 0.02}, causal_hint="ep-000001",
    )
    bare = make_episode()
    with open_store(tmp_path) as store:
        add(store, full, bare)
        assert store.get(full.id) == full  # buffered
        assert store.flush() == 2
        assert store.get(full.id) == full and store.get(bare.id) == bare  # from Arrow
    with open_store(tmp_path) as store:
        assert store.get(full.id) == full and store.get(bare.id) == bare
        assert store.count() == 2
        assert store.get("missing") is None


def test_get_by_ref_returns_every_episode_with_that_ref_in_order(tmp_path: Path) -> None:
    a, b, c = make_episode(ref="msg-1"), make_episode(ref="msg-2"), make_episode(ref="msg-1")
    with open_store(tmp_path, flush_rows=2) as store:
        add(store, a)
        add(store, b)
        add(store, c)  # a, b flushed; c buffered
        assert [e.id for e in store.get_by_ref("msg-1")] == [a.id, c.id]
        assert store.get_by_ref("nope") == []
    with open_store(tmp_path) as store:
        assert [e.id for e in store.get_by_ref("msg-1")] == [a.id, c.id]


def test_search_ranks_by_cosine_and_sees_buffered_rows(tmp_path: Path) -> None:
    texts = ["gas price spiked on mainnet", "bridge usdc to base", "gas fees low on base",
             "regime shift to bear market"]
    eps = [make_episode(text=t) for t in texts]
    with open_store(tmp_path, flush_rows=2) as store:
        add(store, *eps[:2])  # flushed
        add(store, *eps[2:3])  # buffered: fewer than flush_rows... flushed at 2 rows
        add(store, eps[3])
        query = EMB.embed(["gas price on mainnet"])[0]
        hits = store.search(query, 3)
        assert hits[0][0].id == eps[0].id
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        expected = EMB.embed(texts) @ query
        # int8 vectors in memory (episodes_index): a cosine is off by ~0.001 at most
        assert scores[0] == pytest.approx(float(expected.max()), abs=3e-3)
        assert store.search(query, 0) == []
        assert len(store.search(query, 99)) == 4


def test_search_prefilters(tmp_path: Path) -> None:
    """type, regime, strategy, tool and the time range each restrict the candidates."""
    eps = [
        make_episode(text="gas spike", type=EpisodeType.OBSERVATION, regime=Regime.BULL,
                     strategy="a", tool="t1", timestamp=1000),
        make_episode(text="gas spike again", type=EpisodeType.ACTION, regime=Regime.BEAR,
                     strategy="b", tool="t2", timestamp=2000),
        make_episode(text="gas spike third", type=EpisodeType.ACTION, regime=Regime.BULL,
                     strategy="a", tool=None, timestamp=3000),
    ]
    with open_store(tmp_path) as store:
        add(store, *eps)
        q = EMB.embed(["gas spike"])[0]

        def ids(flt: EpisodeFilter) -> set[str]:
            return {e.id for e, _ in store.search(q, 10, flt)}

        assert ids(EpisodeFilter(types=["action"])) == {eps[1].id, eps[2].id}
        assert ids(EpisodeFilter(regime="bull")) == {eps[0].id, eps[2].id}
        assert ids(EpisodeFilter(strategy="a", types=[EpisodeType.ACTION])) == {eps[2].id}
        assert ids(EpisodeFilter(tool="t2")) == {eps[1].id}
        assert ids(EpisodeFilter(tool="unknown")) == set()
        assert ids(EpisodeFilter(since_ms=2000, until_ms=3000)) == {eps[1].id}
        assert ids(EpisodeFilter()) == {e.id for e in eps}
        store.flush()
        assert ids(EpisodeFilter(regime=Regime.BULL, since_ms=2500)) == {eps[2].id}


def test_filter_rejects_bad_values() -> None:
    with pytest.raises(ValidationError, match="types"):
        EpisodeFilter(types=["nonsense"])
    with pytest.raises(ValidationError, match="types"):
        EpisodeFilter(types="action")
    with pytest.raises(ValidationError, match="regime"):
        EpisodeFilter(regime="sunny")
    with pytest.raises(ValidationError, match="since_ms"):
        EpisodeFilter(since_ms="yesterday")  # type: ignore[arg-type]


def test_text_search_bm25_with_filters(tmp_path: Path) -> None:
    eps = [
        make_episode(text="oracle price deviation on chainlink feed", strategy="a"),
        make_episode(text="swapped tokens, nothing about oracles", strategy="b"),
        make_episode(text="routine observation of the pool", strategy="a"),
    ]
    with open_store(tmp_path, flush_rows=2) as store:
        add(store, *eps)
        hits = store.text_search("chainlink oracle", 5)
        assert [e.id for e, _ in hits][:2] == [eps[0].id, eps[1].id]  # porter: oracles
        assert hits[0][1] > hits[1][1] > 0
        assert [e.id for e, _ in store.text_search("oracle", 5, EpisodeFilter(strategy="b"))] \
            == [eps[1].id]
        assert store.text_search("", 5) == []
        assert store.text_search('" OR * AND :', 5) == []  # punctuation only: no terms
        assert store.text_search("zebra", 5) == []
        assert store.text_search("pool", 0) == []
    with open_store(tmp_path) as store:
        assert store.text_search("pool", 5)[0][0].id == eps[2].id


def test_recent_scan_vectors_and_all_vectors(tmp_path: Path) -> None:
    eps = [make_episode(strategy="s" if i % 2 else "t", timestamp=10_000 - i,
                        type=EpisodeType.ACTION if i % 3 else EpisodeType.OBSERVATION)
           for i in range(7)]
    with open_store(tmp_path, flush_rows=3) as store:
        add(store, *eps)
        newest_last = sorted(eps, key=lambda e: e.timestamp)
        assert store.recent(3) == newest_last[-3:]
        assert store.recent(2, strategy="s") == [e for e in newest_last if e.strategy == "s"][-2:]
        assert store.recent(10, types=["observation"]) == [
            e for e in newest_last if e.type is EpisodeType.OBSERVATION]
        assert store.recent(10, since=9_997) == [e for e in newest_last if e.timestamp >= 9_997]
        assert list(store.scan()) == eps
        assert list(store.scan(since_ms=9_996)) == [e for e in eps if e.timestamp >= 9_996]
        got = store.vectors_for([eps[4].id, eps[0].id])
        want = vecs([eps[4], eps[0]])
        # int8-quantised in memory: within one quantisation step of max |x| / 127
        np.testing.assert_allclose(got, want, atol=float(np.abs(want).max()) / 127)
        with pytest.raises(NotFoundError):
            store.vectors_for(["nope"])
        ids, matrix = store.all_vectors()
        assert ids == [e.id for e in eps] and matrix.shape == (7, EMB.dim)
        assert not matrix.codes.flags.writeable and not matrix.scales.flags.writeable
        np.testing.assert_allclose(matrix @ want[0], matrix.dequantize() @ want[0], atol=1e-5)
        np.testing.assert_allclose(matrix[[4, 0]], got)


def test_flush_policy_rows_age_and_maybe_flush(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_store(tmp_path, clock, flush_rows=3, flush_ms=1000) as store:
        add(store, make_episode(), make_episode())
        assert store.buffered == 2
        assert store.maybe_flush(clock.now + 999) == 0
        assert store.maybe_flush(clock.now + 1000) == 2
        assert store.buffered == 0
        add(store, make_episode(), make_episode(), make_episode())  # reaches flush_rows
        assert store.buffered == 0
        add(store, make_episode())
        clock.advance(1500)
        add(store, make_episode())  # the buffer is older than flush_ms: this append flushes
        assert store.buffered == 0
        assert store.stats()["flushed_rows"] == 7


def test_compaction_runs_on_schedule_and_on_demand(tmp_path: Path) -> None:
    with open_store(tmp_path, flush_rows=1, compact_every_appends=4) as store:
        with capture_logs() as logs:
            for _ in range(9):
                add(store, make_episode())
        assert [e["event"] for e in logs].count("episodes.compact") == 2
        assert store.stats()["fragments"] <= 2
        result = store.compact()
        assert result["fragments_after"] == 1
        stats = store.stats()
        assert stats["fragments"] == 1 and stats["rows"] == 9
        assert stats["last_compact"]["fragments_after"] == 1
        assert stats["disk_bytes"] == stats["lance_bytes"] + stats["journal_bytes"]
    with open_store(tmp_path) as store:
        assert store.count() == 9


def test_other_embedding_model_or_dim_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        add(store, make_episode())
    with pytest.raises(EmbeddingMismatchError) as err:
        EpisodeStore.open(tmp_path, model_id="other-model", dim=EMB.dim,
                          config=EpisodesConfig(), clock=FrozenClock())
    assert EMB.model_id in str(err.value) and "other-model" in str(err.value)
    with pytest.raises(EmbeddingMismatchError, match="dim 32"):
        EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=32,
                          config=EpisodesConfig(), clock=FrozenClock())
    with open_store(tmp_path) as store:  # the refusals changed nothing
        assert store.count() == 1


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    schema = row_schema(model_id=EMB.model_id, dim=EMB.dim)
    newer = schema.with_metadata({**schema.metadata, META_VERSION: b"99"})
    lancedb.connect(str(tmp_path)).create_table("episodes", schema=newer)
    with pytest.raises(SchemaVersionError, match="upgrade Grimoire"):
        open_store(tmp_path)


def test_foreign_table_is_refused(tmp_path: Path) -> None:
    lancedb.connect(str(tmp_path)).create_table("episodes", pa.table({"x": [1]}))
    with pytest.raises(StoreError, match="schema metadata"):
        open_store(tmp_path)


def test_one_open_store_per_directory(tmp_path: Path) -> None:
    with open_store(tmp_path), pytest.raises(StoreError, match="open in another"):
        open_store(tmp_path)
    with open_store(tmp_path) as store:  # the lock is released on close
        assert store.count() == 0


def test_closed_store_refuses_writes_and_close_is_idempotent(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    add(store, make_episode())
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        add(store, make_episode())
    with pytest.raises(StoreError, match="closed"):
        store.flush()


def test_bad_config_is_refused(tmp_path: Path) -> None:
    from grimoire.errors import ConfigError

    with pytest.raises(ConfigError):
        open_store(tmp_path, flush_rows=0)
    with pytest.raises(ConfigError):
        open_store(tmp_path, cleanup_older_than_s=-1)


def test_open_and_flush_emit_log_events(tmp_path: Path) -> None:
    with capture_logs() as logs, open_store(tmp_path, flush_rows=1) as store:
        add(store, make_episode())
    events = [e["event"] for e in logs]
    assert events[0] == "episodes.open" and "episodes.flush" in events
    assert events[-1] == "episodes.close"


def test_public_surface() -> None:
    """The module exports exactly the store and its filter; the verbs later layers use exist."""
    import grimoire.stores.episodes.store as module

    assert sorted(module.__all__) == ["EpisodeFilter", "EpisodeStore"]
    for verb in ("open", "append", "flush", "maybe_flush", "compact", "get", "get_by_ref",
                 "search", "text_search", "count", "recent", "scan", "vectors_for",
                 "all_vectors", "stats", "close", "__enter__", "__exit__"):
        assert callable(getattr(EpisodeStore, verb)), verb


def test_refused_open_leaves_no_wrong_identity_behind(tmp_path: Path) -> None:
    """A journal lost and an open with the wrong model refused: the right model still opens."""
    from grimoire.stores.episodes.journal import JOURNAL_FILE

    with open_store(tmp_path) as store:
        add(store, make_episode())
    (tmp_path / JOURNAL_FILE).unlink()
    with pytest.raises(EmbeddingMismatchError):
        EpisodeStore.open(tmp_path, model_id="other-model", dim=EMB.dim,
                          config=EpisodesConfig(), clock=FrozenClock())
    with open_store(tmp_path) as store:
        assert store.count() == 1


def test_rows_read_back_whole_across_chunks_with_different_all_null_columns(
        tmp_path: Path) -> None:
    """The in-memory Arrow rows drop all-null columns per chunk and the columns the index
    holds as codes; reads across such chunks (one-row slices, takes, merges) and after a
    reopen still give every field back."""
    def full(i: int) -> Episode:
        return make_episode(outcome=Outcome.POSITIVE, ref=f"r-{i}", tool="uniswap",
                            chain="base", token_pair="ETH/USDC", tick_id=i,
                            regime=Regime.HIGH_VOL, strategy=f"s{i % 3}", gain=1.5,
                            valid_from=i, valid_until=i + 1, causal_hint="x", thread="t",
                            actor="a", emotional_tag="calm", metrics={"m": 1.0})

    bare = [make_episode() for _ in range(100)]
    some = [full(i) for i in range(10)]
    more = [full(i) for i in range(10, 110)]
    everything = [*bare, *some, *more]
    with open_store(tmp_path) as store:
        for batch in (bare, some):
            add(store, *batch)
            store.flush()
        assert len(store._index.snap.chunks) == 2  # bare rows' chunk lacks the null columns
        assert store.recent(20) == everything[90:110]  # one-row slices from both chunks
        assert list(store.scan()) == everything[:110]  # takes per chunk
        add(store, *more)
        store.flush()  # merged with the chunks before it
        assert all(store.get(e.id) == e for e in everything)
        assert list(store.scan()) == everything
        assert store.get_by_ref("r-105") == [more[95]]
    with open_store(tmp_path) as store:
        assert list(store.scan()) == everything and store.recent(3) == everything[-3:]
