"""The episode write path's two stages: the model embeds the next group while the writer
commits the previous one, and an acknowledged write is still durable (issue 15 item 5).

No timing: the writer is held on an Event and the test checks what happens meanwhile.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from grimoire.clock import FrozenClock
from grimoire.embed import HashEmbedder, Vectors
from grimoire.grimoire import Grimoire


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
