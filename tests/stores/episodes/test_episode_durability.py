"""Durability of the episodic store: an acknowledged append survives SIGKILL; journal
replay is idempotent (a torn flush replays without duplicates); a lost journal file
only costs a rebuild of the text index."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import apsw
import lancedb
import pytest
from structlog.testing import capture_logs

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes.journal import JOURNAL_FILE
from grimoire.stores.episodes.store import EpisodeStore

EMB = HashEmbedder(dim=64)
REPO = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from grimoire.clock import SystemClock
    from grimoire.config import EpisodesConfig
    from grimoire.models.embedders import HashEmbedder
    from grimoire.records import Episode, EpisodeType
    from grimoire.stores.episodes.store import EpisodeStore

    directory, flush_rows = Path(sys.argv[1]), int(sys.argv[2])
    emb = HashEmbedder(dim=64)
    store = EpisodeStore.open(directory, model_id=emb.model_id, dim=emb.dim,
                              config=EpisodesConfig(flush_rows=flush_rows, flush_ms=10**9),
                              clock=SystemClock())
    for i in range(100_000):
        ep = Episode(id=f"k-{i}", text=f"killed writer episode {i}",
                     type=EpisodeType.OBSERVATION, timestamp=i)
        store.append([ep], emb.embed([ep.text]))
        print("ACK", ep.id, flush=True)  # acknowledged: append returned
""")


def make_episode(i: int) -> Episode:
    return Episode(id=f"t-{i}", text=f"torn flush episode {i}", type=EpisodeType.ACTION,
                   timestamp=i)


def open_store(path: Path, **cfg: Any) -> EpisodeStore:
    return EpisodeStore.open(path, model_id=EMB.model_id, dim=EMB.dim,
                             config=EpisodesConfig(**cfg), clock=FrozenClock())


def lance_ids(path: Path) -> list[str]:
    ids: list[str] = lancedb.connect(str(path)).open_table("episodes").to_arrow()["id"].to_pylist()
    return ids


def journal_rows(path: Path) -> int:
    conn = apsw.Connection(str(path / JOURNAL_FILE))
    try:
        return int(conn.execute("SELECT count(*) FROM journal").fetchall()[0][0])  # type: ignore[arg-type]
    finally:
        conn.close()


@pytest.mark.slow  # a child process importing lancedb: 3-12 s on the shared machine
@pytest.mark.parametrize("flush_rows", [3, 100_000], ids=["flushing", "journal-only"])
def test_acknowledged_appends_survive_sigkill(tmp_path: Path, flush_rows: int) -> None:
    """A writer killed with SIGKILL right after an append returned loses nothing it acked.

    flush_rows=3 kills it amid LanceDB flushes (torn flushes are likely);
    100_000 kills it with every row only in the journal.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), str(flush_rows)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    acked: list[str] = []
    assert child.stdout is not None
    try:
        while len(acked) < 40:
            line = child.stdout.readline()
            assert line, "the writer exited early"
            if line.startswith("ACK "):  # other lines are the child's log output
                acked.append(line.split()[1])
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with open_store(tmp_path) as store:
        found = [e.id for e in store.scan()]
        assert set(acked) <= set(found)
        assert len(found) == len(set(found)) >= len(acked)
        assert [e.id for e, _ in store.text_search("episode 7", 40)].count("k-7") == 1
    assert journal_rows(tmp_path) == 0  # replayed into LanceDB and released
    assert sorted(lance_ids(tmp_path)) == sorted(found)  # LanceDB holds each row once


def _copy_journal(src: Path, dest: Path) -> None:
    """A consistent copy of the live journal (SQLite backup API)."""
    source = apsw.Connection(str(src / JOURNAL_FILE))
    target = apsw.Connection(str(dest))
    with target.backup("main", source, "main") as backup:
        backup.step(-1)
    target.close()
    source.close()


def test_torn_flush_replays_without_duplicates(tmp_path: Path) -> None:
    """Journal rows that LanceDB already holds (crash after add, before the journal
    cleanup) are skipped on open; rows only in the journal are replayed once."""
    side = tmp_path / "journal-copy.sqlite"
    store_dir = tmp_path / "store"
    with open_store(store_dir, flush_rows=1000) as store:
        for i in range(10):
            store.append([make_episode(i)], EMB.embed([make_episode(i).text]))
        assert store.buffered == 10
        _copy_journal(store_dir, side)  # the journal as it stood before the flush
    # close() flushed: LanceDB holds 0-9 and the journal is empty. Put the old journal back,
    # as if the process died between LanceDB's add() and the journal cleanup.
    assert journal_rows(store_dir) == 0
    for suffix in ("-wal", "-shm"):
        Path(str(store_dir / JOURNAL_FILE) + suffix).unlink(missing_ok=True)
    shutil.copy(side, store_dir / JOURNAL_FILE)
    assert journal_rows(store_dir) == 10
    with capture_logs() as logs, open_store(store_dir) as store:
        assert store.count() == 10
        assert [e.id for e in store.scan()] == [f"t-{i}" for i in range(10)]
        store.append([make_episode(10)], EMB.embed(["ten"]))  # seq numbering continues
    opened = next(e for e in logs if e["event"] == "episodes.open")
    assert opened["skipped"] == 10 and opened["replayed"] == 0
    assert sorted(lance_ids(store_dir)) == sorted(f"t-{i}" for i in range(11))
    assert journal_rows(store_dir) == 0
    with open_store(store_dir) as store:
        assert next(e.id for e, _ in store.text_search("episode 10", 3)) == "t-10"


def test_journal_file_lost_after_a_clean_close_is_recreated(tmp_path: Path) -> None:
    """After close() the journal holds nothing LanceDB lacks: losing it loses nothing, and
    the text index (in memory) is rebuilt from LanceDB's texts."""
    with open_store(tmp_path) as store:
        for i in range(5):
            store.append([make_episode(i)], EMB.embed([make_episode(i).text]))
    for suffix in ("", "-wal", "-shm"):
        Path(str(tmp_path / JOURNAL_FILE) + suffix).unlink(missing_ok=True)
    with open_store(tmp_path) as store:
        assert store.count() == 5
        assert store.text_search("episode 3", 1)[0][0].id == "t-3"
        store.append([make_episode(5)], EMB.embed(["five"]))
    with open_store(tmp_path) as store:
        assert [e.id for e in store.scan()] == [f"t-{i}" for i in range(6)]


def test_append_is_committed_to_the_journal_before_it_returns(tmp_path: Path) -> None:
    """Buffered rows are already committed (WAL, synchronous=FULL) in the journal file,
    visible to another connection, and leave it once a flush made them durable in LanceDB."""
    with open_store(tmp_path, flush_rows=1000) as store:
        store.append([make_episode(0), make_episode(1)], EMB.embed(["a", "b"]))
        assert journal_rows(tmp_path) == 2
        assert lance_ids(tmp_path) == []
        conn = apsw.Connection(str(tmp_path / JOURNAL_FILE))
        assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
        conn.close()
        store.flush()
        assert journal_rows(tmp_path) == 0
        assert sorted(lance_ids(tmp_path)) == ["t-0", "t-1"]
