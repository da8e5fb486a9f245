"""``EpisodeIndex.newest``: the newest rows without sorting every row when they were
appended in time order, and the same answer as a full sort when they were not."""

from __future__ import annotations

import numpy as np

from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes.index import EpisodeIndex

DIM = 8


def add(index: EpisodeIndex, stamps: list[int], first: int) -> None:
    eps = [Episode(id=f"r-{first + i}", text="t", type=EpisodeType.ACTION, timestamp=ts)
           for i, ts in enumerate(stamps)]
    vecs = np.random.default_rng(first).normal(size=(len(eps), DIM)).astype(np.float32)
    index.add(eps, list(range(first, first + len(eps))), vecs)


def by_sort(index: EpisodeIndex, positions: np.ndarray, n: int) -> list[int]:
    snap = index.snap
    return positions[np.lexsort((positions, snap.timestamp[positions]))[-n:]].tolist()


def test_newest_takes_the_tail_of_time_ordered_rows_and_sorts_otherwise() -> None:
    index = EpisodeIndex(DIM)
    add(index, [10, 20, 20, 30, 40], 0)
    add(index, [40, 50, 60], 5)
    snap = index.snap
    every = np.arange(snap.n)
    assert index.time_ordered(snap)
    for n in (1, 3, 8, 20):
        assert index.newest(snap, every, n).tolist() == by_sort(index, every, n)
    some = np.array([0, 2, 3, 6])
    assert index.newest(snap, some, 2).tolist() == [3, 6]
    add(index, [15, 70], 8)  # a backfilled row: no longer time-ordered
    late = index.snap
    assert not index.time_ordered(late)
    every = np.arange(late.n)
    for n in (1, 4, 10):
        assert index.newest(late, every, n).tolist() == by_sort(index, every, n)
    assert index.newest(late, every, 3).tolist() == [6, 7, 9]
