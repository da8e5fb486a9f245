"""The episode write path's two stages: the model embeds the next group while the writer
commits the previous one, and an acknowledged write is still durable (issue 15 item 5).

No timing: the writer is held on an Event and the test checks what happens meanwhile.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import EmbedderError, ValidationError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder, Vectors


class WatchedEmbedder(HashEmbedder):
    """The hash embedder, noting which texts it was asked to embed (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.embedded = threading.Event()

    def embed(self, texts: list[str]) -> Vectors:
        out = super().embed(texts)
        self.seen.extend(texts)
        self.embedded.set()
        return out


def test_embedding_runs_while_the_writer_is_busy_and_the_ack_waits_for_the_append(
        tmp_path: Path) -> None:
    embedder = WatchedEmbedder()
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=embedder) as g:
        release = threading.Event()
        held = threading.Event()

        def hold() -> None:  # a long commit in progress on the writer thread
            held.set()
            release.wait(30)

        with ThreadPoolExecutor(2) as pool:
            blocker = pool.submit(g.context.writer.call, hold)
            assert held.wait(30)
            embedder.embedded.clear()
            write = pool.submit(g.episode_write, text="gas spiked on base while committing")
            # The stage embeds it although the writer is still busy ...
            assert embedder.embedded.wait(30)
            assert "gas spiked on base while committing" in embedder.seen
            # ... but the write is not acknowledged (nor stored) before the writer appends it.
            assert not write.done()
            assert g.context.episodes.count() == 0
            release.set()
            blocker.result(30)
            episode_id = write.result(30)["id"]
        stored = g.context.episodes.get(episode_id)
        assert stored is not None and stored.text == "gas spiked on base while committing"
        vector = g.context.episodes.vectors_for([episode_id])[0]
        want = embedder.embed(["gas spiked on base while committing"])[0]
        # held as int8 in memory: within a quantisation step (max |x| / 127) of the embedding
        assert np.allclose(vector, want, atol=float(np.abs(want).max()) / 127)


def test_concurrent_writes_in_both_stages_all_land_once(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=HashEmbedder()) as g:
        texts = [f"swap {i} WETH at {i} gwei" for i in range(64)]
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda t: g.episode_write(text=t)["id"], texts))
        assert len(set(ids)) == 64 and g.context.episodes.count() == 64
        assert sorted(g.context.episodes.get(i).text for i in ids) == sorted(texts)


class GatedEmbedder(HashEmbedder):
    """The hash embedder; the first call waits on ``gate`` (so writes queue up behind it),
    texts containing "refused" make the model fail, texts containing "nan" give NaNs."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> Vectors:
        if not self.entered.is_set():
            self.entered.set()
            assert self.gate.wait(30)
        self.calls.append(len(texts))
        if any("refused" in t for t in texts):
            raise EmbedderError("the model refused a text")
        out = super().embed(texts)
        out[["nan" in t for t in texts]] = np.nan
        return out


def _queue_behind_first(g: Grimoire, embedder: GatedEmbedder, pool: ThreadPoolExecutor,
                        texts: list[str]) -> list[Future[dict[str, Any]]]:
    """One write holds the embedding stage; ``texts`` queue there and form one group."""
    first = pool.submit(g.episode_write, text="the first write holds the model")
    assert embedder.entered.wait(30)
    stage = g.context.embed_stage
    assert stage is not None
    futures = [pool.submit(g.episode_write, text=t) for t in texts]
    while stage.qsize() < len(texts):
        threading.Event().wait(0.001)
    embedder.gate.set()
    first.result(30)
    return futures


def test_concurrent_writers_are_one_group_for_the_writer_and_each_gets_its_ack(
        tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=embedder) as g:
        texts = [f"client {i} swapped {i} WETH" for i in range(8)]
        with ThreadPoolExecutor(9) as pool:
            jobs_before = g.context.writer.jobs_done
            futures = _queue_behind_first(g, embedder, pool, texts)
            ids = [f.result(30)["id"] for f in futures]
        assert len(set(ids)) == 8
        assert embedder.calls[-1] == 8  # one embedding call for the eight callers ...
        # ... and one writer job (one durable append) for the first write and one for them
        assert g.context.writer.jobs_done - jobs_before == 2
        assert [g.context.episodes.get(i).text for i in ids] == texts
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=HashEmbedder()) as g:
        assert {g.context.episodes.get(i).text for i in ids} == set(texts)  # durable


def test_a_text_the_model_refuses_fails_only_its_own_write(tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=embedder) as g:
        texts = ["fine one", "the model refused this", "fine two", "fine three"]
        with ThreadPoolExecutor(5) as pool:
            futures = _queue_behind_first(g, embedder, pool, texts)
            with pytest.raises(EmbedderError, match="refused"):
                futures[1].result(30)
            ids = [futures[i].result(30)["id"] for i in (0, 2, 3)]
        assert [g.context.episodes.get(i).text for i in ids] == ["fine one", "fine two",
                                                                 "fine three"]
        assert g.context.episodes.count() == 4  # the three and the first write


def test_a_write_the_store_refuses_fails_alone_and_the_rest_of_its_group_is_stored(
        tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=embedder) as g:
        texts = ["fine one", "a nan vector", "fine two"]
        with ThreadPoolExecutor(4) as pool:
            futures = _queue_behind_first(g, embedder, pool, texts)
            with pytest.raises(ValidationError, match="NaN"):
                futures[1].result(30)
            ids = [futures[i].result(30)["id"] for i in (0, 2)]
        assert [g.context.episodes.get(i).text for i in ids] == ["fine one", "fine two"]
        assert g.context.episodes.count() == 3
        assert all(g.context.episodes.get(e.id).text != "a nan vector"
                   for e in g.context.episodes.scan())
