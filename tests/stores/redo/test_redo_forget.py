"""``forget`` and the redo copies: the forgotten text leaves them, and a repair that
replays them over an older backup brings back every other write and none of the name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from grimoire.cli import main
from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.portable.backup import backup
from tests.curator.test_curator_support import curator_config
from tests.forget.test_forget import NAME, _config_file, _fill, _scan


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()  # the commands configure logging for the process


def _open(root: Path, clock: FrozenClock) -> Grimoire:
    return Grimoire.open(root, config=curator_config(), clock=clock,
                         embedder=HashEmbedder(dim=384, model_id="hash-384"))


def _redo_files(root: Path) -> list[tuple[str, str]]:
    hits = _scan(root, NAME)
    return [h for h in hits if h[0].startswith("redo/") or "journal" in h[0]]


def test_forget_takes_the_name_out_of_the_redo_copies(tmp_path: Path,
                                                      clock: FrozenClock) -> None:
    root = tmp_path / "data"
    with _open(root, clock) as g:
        _fill(g)
        before = _redo_files(root)
        # The test can fail: the second copies hold the name (the journal's kept rows, the
        # told entry's statement, the triples' LMDB records).
        files = {p.split("-wal")[0] for p, _ in before}  # the journal's WAL, or the file
        assert {"redo/semantic.log", "redo/graph.log",
                "episodes/episodes_journal.sqlite"} <= files
        g.forget(entity=NAME)
        assert _redo_files(root) == []
    assert _scan(root, NAME) == []


def test_a_repair_after_a_forget_replays_the_rest_and_none_of_the_name(
        tmp_path: Path, clock: FrozenClock, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "data"
    config = _config_file(tmp_path)
    with _open(root, clock) as g:
        g.entry_add(category="insight", content="Bridge fees rise 4% after 2 failed relays")
    backup(root, tmp_path / "before")  # older than the writes and the forget below
    with _open(root, clock) as g:
        _fill(g)
        later = g.entry_add(category="insight", content="Swaps on base cost 30% less at "
                            "night because gas_gwei falls")["id"]
        g.forget(actor=NAME)
    target = root / "semantic.sqlite"
    with open(target, "r+b") as f:  # the semantic store is damaged
        f.seek(4096)
        f.write(os.urandom(target.stat().st_size - 4096))
    args = ["--data", str(root), "--config", str(config), "--json"]
    assert main(["repair", *args, "--backup", str(tmp_path / "before"),
                 "--into", str(tmp_path / "fixed")]) == 0
    capsys.readouterr()
    assert _scan(tmp_path / "fixed", NAME) == []
    with _open(tmp_path / "fixed", clock) as g:
        assert g.context.semantic.get_entry(later) is not None  # replayed from the log
        assert g.context.semantic.entries_quoting([NAME]) == []
        assert g.context.episodes.find_ids(actor=NAME) == []
