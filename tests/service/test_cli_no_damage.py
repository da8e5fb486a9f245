"""Bad settings leave no damage: every setting is tried before anything is created, so a
refused run or import leaves no directory, no marker and no empty store behind. Through
the installed ``grimoire``."""

from __future__ import annotations

import json
from pathlib import Path

from grimoire import Grimoire
from grimoire.models.embedders import BUNDLED_MODEL_ID, HashEmbedder
from grimoire.portable.bundle import export_bundle
from tests.service.test_cli_errors import assert_clear, cli

ONE_TICK = ("--max-ticks", "1", "--tick-seconds", "0.01")


def test_a_bogus_feed_creates_nothing_and_leaves_the_directory_free(tmp_path: Path) -> None:
    data = tmp_path / "X"
    assert_clear(cli("run", "--feed", "bogus", "--data", str(data), *ONE_TICK), 2,
                 "daemon.feed", "'bogus'")
    assert not data.exists()
    # nothing was recorded, so the simulator may still have the directory
    proc = cli("run", "--feed", "sim", "--data", str(data), *ONE_TICK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((data / "FEED.json").read_text())["kind"] == "simulated"


def test_a_dimension_the_model_does_not_have_is_a_clear_error_and_creates_nothing(
        tmp_path: Path) -> None:
    data = tmp_path / "Z"
    env = {"GRIMOIRE_EMBEDDING__MODEL": BUNDLED_MODEL_ID, "GRIMOIRE_EMBEDDING__DIM": "512"}
    proc = cli("run", "--feed", "none", "--data", str(data), *ONE_TICK, env=env)
    assert_clear(proc, 2, "embedding.dim", "384-d", "dim=512")
    assert not data.exists()


def _bundle(tmp_path: Path) -> Path:
    with Grimoire.open(tmp_path / "src", embedder=HashEmbedder()) as g:
        g.entry_add(category="warning", content="avoid swaps when gas_gwei is above 80",
                    confidence=0.9)
        export_bundle(g.context, tmp_path / "bundle")
    return tmp_path / "bundle"


def test_a_tampered_bundle_creates_no_store(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = bundle / "entries.jsonl"
    path.write_text(path.read_text().replace("80", "90"))
    data = tmp_path / "fresh"
    proc = cli("import", str(bundle), "--provenance", "predecessor", "--data", str(data))
    assert_clear(proc, 1, "entries.jsonl", "sha256")
    assert not data.exists()
