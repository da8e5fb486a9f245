"""The episode index saved beside the table (``sidecar``/``resume``): an open reads only
the rows after the save, and a missing, stale or corrupt save is rebuilt from LanceDB."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes.lance import LanceEpisodes
from grimoire.stores.episodes.sidecar import INDEX_DIR
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.episodes.text import TextIndex

EMB = HashEmbedder(dim=32)
REPO = Path(__file__).resolve().parents[3]


def episode(i: int) -> Episode:
    return Episode(id=f"s-{i}", text=f"sidecar swap number {i} on pool {i % 7}",
                   type=EpisodeType.ACTION, timestamp=1_000 + i, tool=f"tool{i % 3}",
                   ref=f"ref-{i}" if i % 5 == 0 else None)


def open_store(path: Path, read_only: bool = False, **cfg: Any) -> EpisodeStore:
    config = EpisodesConfig(**{"flush_rows": 50, **cfg})
    return EpisodeStore.open(path, model_id=EMB.model_id, dim=EMB.dim, config=config,
                             clock=FrozenClock(), read_only=read_only)


def fill(store: EpisodeStore, lo: int, hi: int) -> None:
    for start in range(lo, hi, 40):
        eps = [episode(i) for i in range(start, min(hi, start + 40))]
        store.append(eps, EMB.embed([e.text for e in eps]))


def snapshot(store: EpisodeStore, n: int) -> dict[str, Any]:
    query = EMB.embed(["sidecar swap number 17 on pool 3"])[0]
    return {
        "count": store.count(),
        "search": [(e.id, round(s, 5)) for e, s in store.search(query, 10)],
        "text": [(e.id, round(s, 5)) for e, s in store.text_search("swap 17 pool", 10)],
        "get": [store.get(f"s-{i}") for i in range(0, n, 37)],
        "ref": [e.id for e in store.get_by_ref("ref-15")],
        "tool": [e.id for e in store.recent(5, strategy=None)],
        "vectors": store.vectors_for([f"s-{i}" for i in range(0, n, 41)]).round(5).tolist(),
    }


def no_vector_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """An open that reads every vector from LanceDB, or tokenizes every text, fails."""
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the open read every stored row")
    monkeypatch.setattr(LanceEpisodes, "vector_batches", refuse)
    monkeypatch.setattr(TextIndex, "load", refuse)


def test_reopen_reads_the_saved_index_not_every_row(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 400)
        before = snapshot(store, 400)
    assert (tmp_path / INDEX_DIR / "meta.json").is_file()
    no_vector_reads(monkeypatch)
    with open_store(tmp_path) as store:
        assert snapshot(store, 400) == before
        fill(store, 400, 450)  # appends after a resumed open land in the same files
        assert store.get("s-449") is not None and store.get("s-3") is not None
        after = snapshot(store, 450)
    with open_store(tmp_path) as store:
        assert snapshot(store, 450) == after
    with open_store(tmp_path, read_only=True) as reader:
        assert snapshot(reader, 450) == after


CRASH = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from tests.stores.episodes.test_episode_sidecar import fill, open_store
    store = open_store(Path(sys.argv[1]), index_save_rows=100)
    fill(store, 400, 700)   # saved at 500 and 600 rows; flushed to LanceDB up to 700
    store.flush()
    fill(store, 700, 720)   # in the journal only
    os._exit(0)             # no close: no final save
""")


def test_a_crash_after_the_save_applies_the_delta_and_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 400)
    subprocess.run([sys.executable, "-c", CRASH, str(tmp_path), str(REPO)], check=True,
                   cwd=REPO)
    no_vector_reads(monkeypatch)
    with open_store(tmp_path) as store:
        assert store.count() == 720
        assert [store.get(f"s-{i}") for i in range(720)] == [episode(i) for i in range(720)]
        got = store.search(EMB.embed([episode(710).text])[0], 1)
        assert got[0][0].id == "s-710"
        assert store.text_search("number 705", 1)[0][0].id == "s-705"
        assert store.buffered == 0


@pytest.mark.parametrize("damage", ["meta", "codes", "rows", "lookup", "postings"])
def test_a_missing_or_corrupt_save_is_rebuilt(tmp_path: Path, damage: str) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 300)
        before = snapshot(store, 300)
    root = tmp_path / INDEX_DIR
    target = {"meta": "meta.json", "codes": ".codes", "rows": ".arrow",
              "lookup": "0.npy", "postings": ".docs.npy"}[damage]
    path = next(p for p in root.iterdir() if p.name.endswith(target))
    if damage == "meta":
        path.write_text("{not json")
    else:
        with open(path, "r+b") as fh:
            fh.truncate(7)
    with open_store(tmp_path) as store:
        assert snapshot(store, 300) == before


def test_forget_makes_the_save_stale_and_it_is_rebuilt(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 300)
        assert store.erase(["s-5", "s-6"]) == 2
        fill(store, 300, 310)
        before = snapshot(store, 310)
    no_vector_reads(monkeypatch)  # the erase saved the rebuilt index: no rebuild on open
    with open_store(tmp_path) as store:
        assert store.get("s-5") is None and store.count() == 308
        assert snapshot(store, 310) == before


def test_a_table_with_rows_the_save_does_not_know_is_rebuilt(tmp_path: Path) -> None:
    """The table changed behind the save (a restored or edited table): rows missing."""
    with open_store(tmp_path) as store:
        fill(store, 0, 200)
    import lancedb

    table = lancedb.connect(str(tmp_path)).open_table("episodes")
    table.delete("seq < 10")
    with open_store(tmp_path) as store:
        assert store.count() == 190
        assert store.get("s-3") is None and store.get("s-150") is not None
        q = EMB.embed([episode(150).text])[0]
        assert store.search(q, 1)[0][0].id == "s-150"
        assert np.isfinite(store.vectors_for(["s-199"])).all()


def _mapped_rss_kib(suffix: str) -> int:
    """Resident KiB of this process's mappings of files ending in ``suffix``."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            inside = line.rstrip().endswith(suffix)
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_release_hands_back_the_pages_a_full_scan_read(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 400)
    with open_store(tmp_path) as store:
        store.search(EMB.embed(["a full exact scan"])[0], 5)  # reads every code
        # This store's file only: an earlier test's mapping may not be collected yet.
        codes = str(next((tmp_path / "episodes.index").glob("*.codes")))
        assert _mapped_rss_kib(codes) > 0
        store._sidecar.release()
        assert _mapped_rss_kib(codes) == 0
        assert store.search(EMB.embed([episode(7).text])[0], 1)[0][0].id == "s-7"
