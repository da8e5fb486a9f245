"""Read-only opens of the three stores, beside a writer and without one.

Each store is written by a writer object that stays open (as a daemon's would) while a
read-only object of the same store reads it: no lock is taken, nothing is written, writes
raise NotAvailableError. What the reader sees: episodes as of its open (a snapshot: LanceDB
rows plus the journal rows not yet flushed), entries and triples live (each read sees the
writer's last commit).
"""

from __future__ import annotations

import hashlib
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.errors import NotAvailableError, SchemaVersionError, StoreError
from grimoire.records.graph import EntityKind, EntityRef, Fact, ObjectValue, Predicate
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.graph.store import GraphStore
from grimoire.stores.semantic import schema as semantic_schema
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.sqlite import connect
from tests.stores.episodes.test_episode_store import EMB, add, make_episode, vecs
from tests.stores.semantic.test_semantic_support import DIM, MODEL, make_entry, unit

AAVE = EntityRef(EntityKind.CONTRACT, "aave")
LINK = EntityRef(EntityKind.ORACLE, "chainlink")
PYTH = EntityRef(EntityKind.ORACLE, "pyth")

# LMDB's lock file is its reader table (shared memory kept in a file): every process that
# opens the environment with lock=True writes its reader slot there, so its bytes are not
# compared (its presence is). Everything else must be byte-for-byte unchanged.
_LOCK_REGIONS = {"lock.mdb"}


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` → sha256 (lock regions: present, bytes not compared)."""
    out: dict[str, str] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(root))
        out[rel] = ("lock-region" if path.name in _LOCK_REGIONS
                    else hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def open_episodes(path: Path, *, read_only: bool = False, **cfg: Any) -> EpisodeStore:
    return EpisodeStore.open(path, model_id=EMB.model_id, dim=EMB.dim,
                             config=EpisodesConfig(**cfg), clock=FrozenClock(),
                             read_only=read_only)


def open_semantic(path: Path, *, read_only: bool = False) -> SemanticStore:
    return SemanticStore.open(path, model_id=MODEL, dim=DIM, clock=FrozenClock(),
                              read_only=read_only)


def open_graph(path: Path, *, read_only: bool = False, **kwargs: Any) -> GraphStore:
    return GraphStore.open(path, clock=FrozenClock(1_767_225_600_000), read_only=read_only,
                           **kwargs)


def fact(subject: EntityRef, obj: EntityRef, block: int) -> Fact:
    return Fact(subject=subject, predicate=Predicate.ORACLE_DEPENDENCY,
                object=ObjectValue.entity(obj), valid_from=block)


# -- episodes ---------------------------------------------------------------------------------


def test_episode_reader_sees_flushed_and_journaled_rows_beside_the_writer(
        tmp_path: Path) -> None:
    """The writer keeps its lock; the reader opens anyway and sees LanceDB's rows plus the
    journal's unflushed ones, as of its open; it releases nothing from the journal."""
    path = tmp_path / "episodes"
    writer = open_episodes(path, flush_rows=1000, flush_ms=10**9)
    flushed = [make_episode() for _ in range(5)]
    add(writer, *flushed)
    writer.flush()
    buffered = [make_episode(text=f"pending row {i} about curve pools") for i in range(3)]
    add(writer, *buffered)
    assert writer.buffered == 3
    try:
        with open_episodes(path, read_only=True) as reader:
            assert reader.read_only and reader.count() == 8
            assert reader.get(buffered[0].id) == buffered[0]
            assert reader.get(flushed[-1].id) == flushed[-1]
            hits = reader.search(EMB.embed([buffered[1].text])[0], k=1)
            assert hits[0][0].id == buffered[1].id
            assert reader.text_search("curve pools", k=3)[0][0].id in {e.id for e in buffered}
            # A snapshot: the writer's later rows appear on the next open.
            later = make_episode()
            add(writer, later)
            assert reader.get(later.id) is None
            for call in (lambda: reader.append([make_episode()], EMB.embed(["x"])),
                         reader.flush, lambda: reader.maybe_flush(0), reader.compact):
                with pytest.raises(NotAvailableError, match="read-only"):
                    call()
            assert reader.stats()["read_only"] is True
        with open_episodes(path, read_only=True) as again:
            assert again.get(later.id) == later
        assert writer.buffered == 4  # the reader released nothing
    finally:
        writer.close()
    with open_episodes(path) as reopened:
        assert reopened.count() == 9


def test_episode_reader_needs_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no episode store"):
        open_episodes(tmp_path / "none", read_only=True)
    assert not (tmp_path / "none").exists()


# -- semantic ----------------------------------------------------------------------------------


def test_semantic_reader_reads_live_beside_the_writer_and_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "semantic.sqlite"
    rng = np.random.default_rng(7)
    with open_semantic(path) as writer:
        first = make_entry()
        writer.insert_entry(first, unit(rng))
        with open_semantic(path, read_only=True) as reader:
            assert reader.read_only
            assert reader.get_entry(first.id) == first
            second = make_entry()
            vector = unit(rng)
            writer.insert_entry(second, vector)
            assert reader.get_entry(second.id) == second  # live: the last commit
            assert reader.knn(vector, 1)[0][0].id == second.id
            with pytest.raises(NotAvailableError, match="read-only"):
                reader.insert_entry(make_entry(), unit(rng))
            with pytest.raises(NotAvailableError, match="read-only"):
                reader.archive(first.id)
            with pytest.raises(NotAvailableError, match="read-only"):
                reader.set_meta("tick", 3)
        assert writer.get_entry(first.id) == first


def test_semantic_reader_refuses_older_and_newer_schemas_without_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "semantic.sqlite"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", semantic_schema.MIGRATIONS[:2])
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", 2)
    open_semantic(path).close()
    monkeypatch.undo()
    before = tree_digest(tmp_path)
    with pytest.raises(StoreError, match="daemon migrates it on its next start"):
        open_semantic(path, read_only=True)
    assert tree_digest(tmp_path) == before
    conn = connect(path)
    conn.pragma("user_version", semantic_schema.SCHEMA_VERSION + 1)
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        open_semantic(path, read_only=True)
    with pytest.raises(StoreError, match="no semantic store"):
        open_semantic(tmp_path / "missing.sqlite", read_only=True)


# -- graph ---------------------------------------------------------------------------------------


def _graph_writer(path: str, commands: Any, done: Any) -> None:
    """Another process's writer (LMDB allows one environment per path per process)."""
    with open_graph(Path(path), map_size=1 << 16) as writer:
        while (command := commands.get()) is not None:
            if command == "one":
                writer.assert_many([fact(AAVE, LINK, 100)])
            elif command == "two":
                writer.assert_many([fact(AAVE, PYTH, 200)])
            elif command == "many":
                writer.assert_many([fact(EntityRef(EntityKind.CONTRACT, f"p{i:05d}"), LINK, 10)
                                    for i in range(3000)])
            done.put(writer.stats()["map_size"])


def test_graph_reader_reads_live_and_follows_the_writers_map_growth(tmp_path: Path) -> None:
    """A reader beside a writer process sees each commit; when the writer's map doubles past
    the reader's mapping, the reader adopts the new size instead of failing."""
    path = tmp_path / "graph.lmdb"
    spawn = multiprocessing.get_context("spawn")
    commands, done = spawn.Queue(), spawn.Queue()
    child = spawn.Process(target=_graph_writer, args=(str(path), commands, done))
    child.start()
    try:
        commands.put("one")
        done.get(timeout=60)
        with open_graph(path, read_only=True, map_size=1 << 16) as reader:
            assert reader.read_only
            assert [t.object.value.id for t in reader.query_at(AAVE, 150)] == ["chainlink"]
            commands.put("two")
            done.get(timeout=60)
            assert [t.object.value.id for t in reader.query_at(AAVE, 250)] == ["pyth"]
            mapped = reader.stats()["map_size"]
            commands.put("many")
            assert done.get(timeout=60) > mapped  # the writer's map grew past the reader's
            assert reader.count() == 3002
            assert reader.stats()["map_size"] > mapped
            neighbors = reader.k_hop_neighbors(AAVE, 1, 250)
            assert [n.entity.id for n in neighbors] == ["pyth"]
            with pytest.raises(NotAvailableError, match="read-only"):
                reader.assert_many([fact(PYTH, LINK, 5)])
    finally:
        commands.put(None)
        child.join(60)
    assert child.exitcode == 0


def test_graph_reader_needs_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no graph store"):
        open_graph(tmp_path / "graph.lmdb", read_only=True)
    assert not (tmp_path / "graph.lmdb").exists()


# -- nothing changes -----------------------------------------------------------------------------


def test_a_read_only_session_changes_no_file(tmp_path: Path) -> None:
    """With no writer open, reading all three stores leaves every file as it was (and creates
    none: no SQLite -wal/-shm left behind), journal rows included."""
    rng = np.random.default_rng(3)
    with open_episodes(tmp_path / "episodes", flush_rows=1000, flush_ms=10**9) as episodes:
        add(episodes, *[make_episode() for _ in range(4)])
        episodes.flush()
        kept = make_episode()
        add(episodes, kept)
    with open_semantic(tmp_path / "semantic.sqlite") as semantic:
        entry = make_entry()
        semantic.insert_entry(entry, unit(rng))
    with open_graph(tmp_path / "graph.lmdb") as graph:
        graph.assert_many([fact(AAVE, LINK, 100)])
    before = tree_digest(tmp_path)
    with (open_episodes(tmp_path / "episodes", read_only=True) as episodes,
          open_semantic(tmp_path / "semantic.sqlite", read_only=True) as semantic,
          open_graph(tmp_path / "graph.lmdb", read_only=True) as graph):
        assert episodes.get(kept.id) == kept and episodes.count() == 5
        assert semantic.get_entry(entry.id) == entry
        assert semantic.knn(unit(rng), 1)
        assert graph.count() == 1
        episodes.stats()
        graph.stats()
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize(("failing_pass", "saved"), [(0, False), (1, False), (0, True)],
                         ids=["rows", "vectors", "rows-after-saved-index"])
def test_episode_reader_rereads_when_the_writer_removes_the_version_under_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_pass: int,
        saved: bool) -> None:
    """The writer's compaction (cleanup 0) may delete the files of the version a reader is
    reading: the read fails inside LanceDB (in the rows' pass or the vectors' pass of a
    full read, or the read of the rows after a saved index), and the reader reads again
    from the then-latest version."""
    import shutil

    from grimoire.stores.episodes.lance import LanceEpisodes
    from grimoire.stores.episodes.sidecar import INDEX_DIR

    path = tmp_path / "episodes"
    written = [make_episode() for _ in range(3)]
    with open_episodes(path) as writer:
        add(writer, *written[:1])
    kept = tmp_path / "index-at-one-row"
    shutil.copytree(path / INDEX_DIR, kept)
    with open_episodes(path) as writer:
        add(writer, *written[1:])
    shutil.rmtree(path / INDEX_DIR)
    if saved:  # the index saved before the last two rows: the reader reads the rows after
        shutil.copytree(kept, path / INDEX_DIR)
    real = LanceEpisodes.__init__
    failures = iter([OSError("Not found: data/…lance (removed by compaction)")])

    def init(self: LanceEpisodes, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        assert self._table.schema is not None  # a reader opens its table on first use
        table = self._table
        search = table.search

        calls = iter(range(1_000))

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if next(calls) == failing_pass:
                for exc in failures:
                    raise exc
            return search(*args, **kwargs)

        monkeypatch.setattr(table, "search", flaky)

    monkeypatch.setattr(LanceEpisodes, "__init__", init)
    with open_episodes(path, read_only=True) as reader:
        assert reader.count() == 3
        assert all(reader.get(ep.id) == ep for ep in written)
        for ep, vector in zip(written, vecs(written), strict=True):  # each vector in its row
            assert reader.search(vector, k=1)[0][0].id == ep.id
    assert next(failures, None) is None  # the failure was met, and retried
