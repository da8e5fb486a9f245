"""Redo logs (``grimoire.stores.redo``): the second copy of every acknowledged write.

Real stores in ``tmp_path`` through ``Grimoire.open`` (frozen clock, hash embedder): each
write is in its store's log until a backup covers it; a replay of the logs over a backup
gives back exactly the stores; what never committed is never in a log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import lmdb
import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder
from grimoire.portable.backup import backup, restore
from grimoire.stores.redo import lmdbops, statements
from grimoire.stores.redo.log import RedoLog, read_records
from tests.curator.test_curator_support import curator_config

T0 = 1_767_225_600_000


def _open(root: Path, clock: FrozenClock) -> Grimoire:
    return Grimoire.open(root, config=curator_config(), clock=clock,
                         embedder=HashEmbedder(dim=384))


def _write(g: Grimoire, tag: str, n: int = 3) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"episode": [], "entry": [], "triple": []}
    for i in range(n):
        out["episode"].append(g.episode_write(
            text=f"{tag} swap {i} WETH/USDC at {20 + i} gwei", type="action",
            outcome="negative" if i % 2 else "positive", actor="bot-a",
            timestamp=T0 + i * 60_000)["id"])
        entry = g.entry_add(category="warning", content=f"Avoid {tag} pool {i} when gas_gwei "
                            f"> {60 + i} because fees eat the gain")
        out["entry"].append(entry["id"])
        out["triple"].append(g.kg_assert(subject={"kind": "pool", "id": f"{tag}-{i}"},
                                         predicate="custom:fee_bps", object=5 + i,
                                         valid_from=1)["id"])
    g.context.episodes.flush()
    return out


def _sqlite_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ordinary table (FTS and vector shadow tables included)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE "
            "'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%'")]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}
    finally:
        conn.close()


def _lmdb_records(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=32)
    try:
        out: dict[bytes, list[tuple[bytes, bytes]]] = {}
        with env.begin() as txn:
            names = [k for k, _ in txn.cursor()]
            for name in names:
                db = env.open_db(name, txn=txn, create=False)
                out[name] = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)]
        return out
    finally:
        env.close()


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def test_each_acknowledged_write_is_in_its_store_log(root: Path, clock: FrozenClock) -> None:
    with _open(root, clock) as g:
        written = _write(g, "first")
    _, semantic = read_records(root / "redo/semantic.log")
    _, graph = read_records(root / "redo/graph.log")
    text = repr(semantic)
    assert all(i in text for i in written["entry"])
    raw = b"".join(op[3] for _, ops in graph for op in ops if op[0] == "p")
    assert all(f"first-{i}".encode() in raw for i in range(3))
    conn = apsw.Connection(str(root / "episodes/episodes_journal.sqlite"))
    try:
        kept = {str(r[0]) for r in conn.execute("SELECT id FROM kept")}
    finally:
        conn.close()
    assert kept == set(written["episode"])  # flushed to LanceDB, and kept once more


def test_a_rolled_back_transaction_leaves_no_record(root: Path, clock: FrozenClock) -> None:
    with _open(root, clock) as g:
        _write(g, "first", 1)
        before = read_records(root / "redo/semantic.log")[1]
        with pytest.raises(RuntimeError), g.context.semantic.transaction():
            g.context.semantic.set_meta("doomed", 1)
            raise RuntimeError("the caller is never told it is stored")
        assert read_records(root / "redo/semantic.log")[1] == before
        g.context.semantic.set_meta("kept", 1)
        after = read_records(root / "redo/semantic.log")[1]
    assert len(after) == len(before) + 1 and "doomed" not in repr(after[-1])


def test_a_record_appended_but_never_committed_is_dropped_at_open(root: Path,
                                                                 clock: FrozenClock) -> None:
    with _open(root, clock) as g:
        _write(g, "first", 1)
    for name in ("semantic", "graph"):  # the process died between append and commit
        log = RedoLog(root / f"redo/{name}.log", store=name, fresh=False)
        log.append(log.last_seq + 1, [["q", "INSERT INTO nowhere VALUES(?)", ["lost"]]])
        log.close()
        with open(root / f"redo/{name}.log", "ab") as f:
            f.write(b"\x10\x00\x00\x00torn")  # and a torn frame after it
    with _open(root, clock) as g:
        for name in ("semantic", "graph"):
            assert "nowhere" not in repr(read_records(root / f"redo/{name}.log")[1])
        _write(g, "second", 1)
    for name in ("semantic", "graph"):
        seqs = [seq for seq, _ in read_records(root / f"redo/{name}.log")[1]]
        assert seqs == list(range(1, len(seqs) + 1))  # numbered on, no gap, no repeat


def test_a_backup_prunes_the_records_it_covers(root: Path, tmp_path: Path,
                                              clock: FrozenClock) -> None:
    with _open(root, clock) as g:
        _write(g, "first")
    assert read_records(root / "redo/semantic.log")[1]  # before: there is work to do
    made = backup(root, tmp_path / "b1")  # a backup is its own process beside the writer
    marks = made["stores"]["redo"]
    assert marks["semantic"] > 0 and marks["graph"] > 0 and marks["episodes"] > 0
    with _open(root, clock) as g:
        after = _write(g, "second")  # the next commit of each store drops the covered
    header, semantic = read_records(root / "redo/semantic.log")
    assert semantic and min(s for s, _ in semantic) == marks["semantic"] + 1
    assert header["pruned_to"] == marks["semantic"] and header["fresh"] is False
    graph = read_records(root / "redo/graph.log")[1]
    assert graph and min(s for s, _ in graph) == marks["graph"] + 1
    conn = apsw.Connection(str(root / "episodes/episodes_journal.sqlite"))
    try:
        kept = {str(r[0]) for r in conn.execute("SELECT id FROM kept")}
    finally:
        conn.close()
    assert kept == set(after["episode"])
    # The backup's own journal does not carry the kept copy (its table has the rows).
    conn = apsw.Connection(str(tmp_path / "b1/episodes/episodes_journal.sqlite"))
    try:
        assert conn.execute("SELECT count(*) FROM kept").fetchall() == [(0,)]
    finally:
        conn.close()


def test_replaying_the_logs_over_a_backup_gives_back_the_same_files(
        root: Path, tmp_path: Path, clock: FrozenClock) -> None:
    with _open(root, clock) as g:
        _write(g, "first")
    backup(root, tmp_path / "b1")
    with _open(root, clock) as g:
        written = _write(g, "second")
        g.kg_invalidate(written["triple"][0], at=2)
        g.retrieve(query="swap WETH/USDC")
        g.curator_run()  # many statements, nested savepoints among them
    live_rows = _sqlite_rows(root / "semantic.sqlite")
    live_graph = _lmdb_records(root / "graph.lmdb")
    copy = tmp_path / "copy"
    restore(tmp_path / "b1", copy)
    assert _sqlite_rows(copy / "semantic.sqlite") != live_rows  # the test can fail
    sql = statements.replay(copy / "semantic.sqlite",
                            read_records(root / "redo/semantic.log")[1])
    kv = lmdbops.replay(copy / "graph.lmdb", read_records(root / "redo/graph.log")[1])
    assert sql["records"] > 0 and kv["records"] > 0
    assert _sqlite_rows(copy / "semantic.sqlite") == live_rows
    assert _lmdb_records(copy / "graph.lmdb") == live_graph


def test_with_no_backup_repair_rebuilds_a_damaged_store_from_a_log_begun_with_it(
        root: Path, tmp_path: Path, clock: FrozenClock) -> None:
    from grimoire.portable.check import repair

    with _open(root, clock) as g:
        written = _write(g, "first", 4)
    assert read_records(root / "redo/semantic.log")[0]["fresh"] is True
    target = root / "semantic.sqlite"
    size = target.stat().st_size
    with open(target, "r+b") as f:  # every page but the first (the header) damaged
        f.seek(4096)
        f.write(os.urandom(size - 4096))
    fixed = repair(root, None, tmp_path / "fixed")
    assert fixed["damaged"] == ["semantic"] and fixed["check"]["ok"], fixed
    assert fixed["replayed"]["semantic"]["records"] > 0
    with _open(tmp_path / "fixed", clock) as g:
        assert all(g.context.semantic.get_entry(i) is not None for i in written["entry"])
        assert all(g.context.episodes.get(i) is not None for i in written["episode"])
