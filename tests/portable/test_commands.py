"""The CLI subcommands (backup, restore, export, import, clade) on real stores, no daemon."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from grimoire import Grimoire
from grimoire.cli import main
from grimoire.models.embedders import HashEmbedder


@pytest.fixture(autouse=True)
def hash_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GRIMOIRE_EMBEDDING__MODEL", "hash-384")
    yield
    structlog.reset_defaults()  # the commands configure logging for the process


def _out(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    return dict(json.loads(capsys.readouterr().out))  # nothing but the answer on stdout


def test_backup_restore_export_import_clade_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    with Grimoire.open(data, embedder=HashEmbedder()) as g:
        g.episode_write(text="gas spiked to 140 gwei")
        g.entry_add(category="warning", content="Avoid swaps when gas_gwei > 80 because fees "
                    "eat the gain", confidence=0.9)
    capsys.readouterr()  # the set-up's own log lines
    assert main(["backup", "--json", "--data", str(data), str(tmp_path / "bk")]) == 0
    assert _out(capsys)["files"]
    assert main(["restore", str(tmp_path / "bk"), str(tmp_path / "restored")]) == 0
    capsys.readouterr()
    assert main(["restore", str(tmp_path / "bk"), str(tmp_path / "restored")]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["export", "--json", "--data", str(data), str(tmp_path / "bundle")]) == 0
    assert _out(capsys)["counts"] == {"entries": 1, "causal": 0, "triples": 0}
    fresh = str(tmp_path / "fresh")
    assert main(["import", "--json", "--data", fresh, str(tmp_path / "bundle"),
                 "--provenance", "lethe"]) == 0
    assert _out(capsys)["entries"] == {"already_imported": 0, "admitted": 1}
    uri = str(tmp_path / "clade")
    assert main(["clade", "publish", "--json", "--data", str(data), uri]) == 0
    assert _out(capsys)["published"] == 1
    assert main(["clade", "pull", "--json", "--data", fresh, uri]) == 0
    assert _out(capsys)["foreign"] == 1
