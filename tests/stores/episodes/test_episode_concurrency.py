"""One writer thread appends, flushes and compacts while reader threads search, get and
text-search: readers never fail, never see a partial row, and see counts only grow."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Regime
from grimoire.stores.episodes.store import EpisodeFilter, EpisodeStore

EMB = HashEmbedder(dim=32)
TOTAL = 400


def test_readers_run_safely_during_writes(tmp_path: Path) -> None:
    texts = [f"pool {i % 11} gas {i % 7} swap number {i}" for i in range(TOTAL)]
    vectors = EMB.embed(texts)
    episodes = [Episode(id=f"c-{i}", text=t, type=EpisodeType.ACTION, timestamp=i,
                        regime=Regime.BULL if i % 2 else Regime.BEAR, ref=f"r-{i % 50}")
                for i, t in enumerate(texts)]
    acked = 0  # episodes [0, acked) were acknowledged by append
    done = threading.Event()
    errors: list[BaseException] = []
    rounds = [0, 0]
    config = EpisodesConfig(flush_rows=64, compact_every_appends=5)
    store = EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=EMB.dim, config=config,
                              clock=FrozenClock())

    def writer() -> None:
        nonlocal acked
        try:
            i = 0
            while i < TOTAL:
                size = 1 + i % 7  # single rows and small batches
                store.append(episodes[i:i + size], vectors[i:i + size])
                i = min(TOTAL, i + size)
                acked = i
                if i in (150, 151, 152, 153, 154, 155, 156):  # one explicit compaction mid-run
                    store.compact()
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        last_count = 0
        try:
            # wait() yields the GIL briefly so the writer is not starved on two cores.
            while not done.wait(0.005):
                rounds[seed] += 1
                seen = acked
                count = store.count()
                assert count >= max(seen, last_count)
                last_count = count
                if seen:
                    j = int(rng.integers(seen))
                    assert store.get(f"c-{j}") == episodes[j]  # acknowledged: visible, whole
                    hits = store.search(vectors[j], 3, EpisodeFilter(regime=episodes[j].regime))
                    assert hits and hits[0][1] >= 0.999 and all(
                        e == episodes[int(e.id[2:])] for e, _ in hits)
                    found = store.text_search(f"number {j}", 5)
                    assert all(e == episodes[int(e.id[2:])] for e, _ in found)
                    refs = store.get_by_ref(f"r-{j % 50}")
                    assert [e.id for e in refs] == sorted((e.id for e in refs),
                                                          key=lambda x: int(x[2:]))
                    ids, matrix = store.all_vectors()
                    assert len(ids) == matrix.shape[0] >= seen
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    store.close()
    assert not errors, errors[0]
    assert min(rounds) >= 5  # the readers really overlapped the writes
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=EMB.dim, config=config,
                           clock=FrozenClock()) as reopened:
        assert reopened.count() == TOTAL
        assert list(reopened.scan()) == episodes
