"""10,000 single-episode appends through the public API keep LanceDB's fragments, versions
and disk size bounded (one LanceDB add() per row made 10k versions and 4.4 GB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Regime
from grimoire.stores.episodes.store import EpisodeFilter, EpisodeStore

N = 10_000
DIM = 384
EMB = HashEmbedder(dim=DIM)


@pytest.mark.slow  # 20-50 s: 10k fsync'd journal commits (~1.5 ms each) on a shared machine
# cleanup_older_than_s=0 makes the bounds independent of wall-clock speed; it is safe here
# because no reader uses LanceDB's old versions (reads are served from memory).
@pytest.mark.filterwarnings("ignore:optimize\\(cleanup_older_than=0\\):UserWarning")
def test_ten_thousand_single_appends_stay_bounded(tmp_path: Path) -> None:
    config = EpisodesConfig(flush_rows=256, flush_ms=1000, compact_every_appends=10,
                            cleanup_older_than_s=0)
    clock = FrozenClock()
    texts = [f"tick {i} observed gas {i % 97} gwei on pool {i % 13} regime {i % 6}"
             for i in range(N)]
    vectors = EMB.embed(texts)
    regimes = list(Regime)
    worst = {"fragments": 0, "versions": 0, "data_files": 0, "lance_bytes": 0}
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=DIM, config=config,
                           clock=clock) as store:
        for i, text in enumerate(texts):
            ep = Episode(id=f"s-{i}", text=text, type=EpisodeType.OBSERVATION,
                         timestamp=clock.advance(40), regime=regimes[i % 6],
                         strategy=f"strat-{i % 3}", metrics={"gas_gwei": float(i % 97)})
            store.append([ep], vectors[i:i + 1])
            if i % 500 == 499:
                stats = store.stats()
                for key in worst:
                    worst[key] = max(worst[key], stats[key])
        store.compact()
        final = store.stats()
        assert final["rows"] == N
        hits = store.search(vectors[1234], 5, EpisodeFilter(regime=regimes[1234 % 6]))
        assert hits[0][0].id == "s-1234"
    raw_bytes = N * DIM * 4  # the vectors alone
    # A flush every 256 rows and a compaction (with cleanup) every 10 flushes: never more
    # than ~10 fragments, data files or versions, and about one copy of the data on disk.
    every = config.compact_every_appends
    assert worst["fragments"] <= every + 1
    assert worst["data_files"] <= every + 2
    assert worst["versions"] <= every + 2
    assert worst["lance_bytes"] < 1.5 * raw_bytes
    assert final["fragments"] == final["data_files"] == final["versions"] == 1
    assert final["lance_bytes"] < 1.2 * raw_bytes
    # The journal keeps the unflushed rows and, until a backup covers them, every flushed
    # row again (its ``kept`` copy, stores.redo): no backup was taken here.
    assert final["journal_bytes"] < 2 * raw_bytes
    print(f"worst={worst} final={ {k: final[k] for k in worst} }")
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=DIM, config=config,
                           clock=clock) as store:
        assert store.count() == N
        want = vectors[9999]
        # in memory int8 (within a quantisation step); in LanceDB exactly what was appended
        np.testing.assert_allclose(store.vectors_for(["s-9999"])[0], want,
                                   atol=float(np.abs(want).max()) / 127)
        stored = store.lance_table().to_arrow()
        row = stored.filter(pc.equal(stored["id"], "s-9999"))["vector"].to_pylist()[0]
        np.testing.assert_allclose(np.asarray(row, np.float32), want, atol=1e-7)


@pytest.mark.filterwarnings("error::UserWarning")  # the store itself must not warn
def test_file_cap_bounds_versions_whatever_the_clock(tmp_path: Path) -> None:
    """A writer faster than the wall clock (the default 60 s version cleanup never
    applies) still keeps data files and versions under ``max_files``: the cap is counted
    at every flush, and every row stays readable after each compaction."""
    config = EpisodesConfig(flush_rows=8, flush_ms=10**9, compact_every_appends=10**6,
                            max_files=6)
    clock = FrozenClock()
    texts = [f"burst {i} gas {i % 7} gwei" for i in range(240)]
    vectors = EMB.embed(texts)
    worst = {"data_files": 0, "versions": 0}
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=DIM, config=config,
                           clock=clock) as store:
        for i in range(0, len(texts), 8):
            eps = [Episode(id=f"b-{j}", text=texts[j], type=EpisodeType.OBSERVATION,
                           timestamp=clock.advance(1)) for j in range(i, i + 8)]
            store.append(eps, vectors[i:i + 8])
            stats = store.stats()
            for key in worst:
                worst[key] = max(worst[key], stats[key])
        assert store.stats()["last_compact"] is not None
    assert worst["data_files"] <= config.max_files
    assert worst["versions"] <= config.max_files
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=DIM, config=config,
                           clock=clock) as store:
        assert store.count() == len(texts)
        assert [e.id for e in store.scan()] == [f"b-{j}" for j in range(len(texts))]
