"""Backup while a daemon serves writes; restore verifies and refuses damage."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.config import Config
from grimoire.errors import ValidationError
from grimoire.models.embedders import HashEmbedder
from grimoire.portable.backup import backup, restore
from tests.service.daemon_support import (
    daemon_env,
    raw_connect,
    rpc,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)


def _small_flushes() -> Config:
    return Config().replace(**{"episodes.flush_rows": 16})


@pytest.mark.slow
def test_backup_under_four_writers_restores_every_acknowledged_episode(tmp_path: Path) -> None:
    with short_dir() as base:
        data = base / "data"
        env = daemon_env(GRIMOIRE_EPISODES__FLUSH_ROWS="16", GRIMOIRE_EPISODES__FLUSH_MS="50")
        proc = start_daemon(data, "--feed", "none", env=env)
        acked: list[set[str]] = [set() for _ in range(4)]
        stop = threading.Event()
        errors: list[str] = []

        def writer(n: int) -> None:
            with raw_connect(data / "grimoire.sock", timeout=30) as sock:
                i = 0
                while not stop.is_set() and i < 400:
                    answer = rpc(sock, "episode.write", {"text": f"writer {n} event {i}"}, i)
                    if "result" not in answer:
                        errors.append(str(answer))
                        return
                    acked[n].add(answer["result"]["id"])
                    i += 1

        try:
            wait_ready(proc, data / "grimoire.sock")
            threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            while sum(len(a) for a in acked) < 60 and not errors:
                threading.Event().wait(0.02)
            before = set().union(*(set(a) for a in acked))  # acknowledged before the backup
            result = backup(data, tmp_path / "bk")
            after_backup = sum(len(a) for a in acked)
            stop.set()
            for t in threads:
                t.join(60)
        finally:
            assert stop_daemon(proc) == 0
        assert not errors
        assert after_backup > len(before)  # the writers really ran during the backup
        manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
        assert manifest["stores"]["episodes"]["lance_version"] >= 1
        assert result["files"] == len(manifest["files"])
        restore(tmp_path / "bk", tmp_path / "restored")
        with Grimoire.open(tmp_path / "restored", embedder=HashEmbedder()) as g:
            stored = {ep.id for ep in g.context.episodes.scan()}
            assert before <= stored
            assert g.status()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    with Grimoire.open(tmp_path / "data", config=_small_flushes(),
                       embedder=HashEmbedder()) as g:
        for i in range(40):
            g.episode_write(text=f"gas spiked to {i} gwei")
        g.entry_add(category="warning", content="Avoid swaps when gas_gwei > 80 because fees "
                    "eat the gain")
    backup(tmp_path / "data", tmp_path / "bk")
    return tmp_path / "bk"


def test_restore_round_trip_keeps_counts(snapshot: Path, tmp_path: Path) -> None:
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert manifest["stores"]["semantic"]["rows"]
    restore(snapshot, tmp_path / "r")
    with Grimoire.open(tmp_path / "r", embedder=HashEmbedder()) as g:
        assert g.context.episodes.count() == 40
        assert g.entry_list(category="warning")["entries"]


def test_restore_refuses_tampered_file(snapshot: Path, tmp_path: Path) -> None:
    victim = snapshot / "semantic.sqlite"
    raw = bytearray(victim.read_bytes())
    raw[-10] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.raises(ValidationError, match="sha256"):
        restore(snapshot, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_restore_refuses_partial_copy(snapshot: Path, tmp_path: Path) -> None:
    next(p for p in (snapshot / "episodes").rglob("*.lance") if p.is_file()).unlink()
    with pytest.raises(ValidationError, match="partial"):
        restore(snapshot, tmp_path / "r")
    (snapshot / "manifest.json").unlink()
    with pytest.raises(ValidationError, match=r"no manifest\.json"):
        restore(snapshot, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_restore_refuses_non_empty_target_and_backup_refuses_existing_dest(
        snapshot: Path, tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep me")
    with pytest.raises(ValidationError, match="not empty"):
        restore(snapshot, tmp_path / "busy")
    assert (tmp_path / "busy" / "x").read_text() == "keep me"
    with pytest.raises(ValidationError, match="already exists"):
        backup(tmp_path / "data", snapshot)


def test_backup_of_a_graph_larger_than_lmdbs_default_map(tmp_path: Path) -> None:
    """py-lmdb's read-only default map (10 MiB) and compact copy both crashed on this store."""
    from grimoire.records.graph import Fact

    with Grimoire.open(tmp_path / "data", embedder=HashEmbedder()) as g:
        for lo in range(0, 3000, 1000):
            g.context.graph.assert_many([
                Fact(subject={"kind": "pool", "id": f"p{i}"}, predicate="deployed_by",
                     object={"kind": "address_cluster", "id": f"d{i % 97}"}, valid_from=1 + i)
                for i in range(lo, lo + 1000)])
    backup(tmp_path / "data", tmp_path / "bk")
    restore(tmp_path / "bk", tmp_path / "r")
    with Grimoire.open(tmp_path / "r", embedder=HashEmbedder()) as g:
        assert g.context.graph.count() == 3000


def test_episode_table_copied_in_durable_slices_restores_every_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The episode table is written slice by slice (so the daemon's fsyncs never wait
    behind the whole table); the slices together hold every row, once, in order."""
    import grimoire.portable.backup as backup_module

    with Grimoire.open(tmp_path / "data", config=_small_flushes(),
                       embedder=HashEmbedder()) as g:
        ids = [g.episode_write(text=f"pool {i} rebalanced")["id"] for i in range(50)]
    monkeypatch.setattr(backup_module, "_SLICE_BYTES", 4096)  # many slices from 50 rows
    assert backup_module._rows_per_slice(40_000, 50) < 50
    result = backup(tmp_path / "data", tmp_path / "bk")
    assert result["stores"]["episodes"]["lance_rows"] == 50
    restore(tmp_path / "bk", tmp_path / "r")
    with Grimoire.open(tmp_path / "r", embedder=HashEmbedder()) as g:
        assert g.context.episodes.count() == 50
        assert [g.episode_get(id=i)["text"] for i in ids] == [
            f"pool {i} rebalanced" for i in range(50)]


def test_rows_per_slice_bounds() -> None:
    from grimoire.portable.backup import _SLICE_BYTES, _rows_per_slice

    assert _rows_per_slice(0, 0) == 1
    assert _rows_per_slice(_SLICE_BYTES, 1000) == 1000  # one slice when it fits
    assert _rows_per_slice(4 * _SLICE_BYTES, 1000) == 250
    assert _rows_per_slice(10**15, 10) == 1  # a huge row is still copied, alone
