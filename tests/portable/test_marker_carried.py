"""The "simulated" marker (FEED.json) travels with the memory: backup and restore carry it,
export bundles say it, and import refuses to mix simulated and real memory unless asked,
marking a fresh directory with the bundle's kind. Through the installed ``grimoire``."""

from __future__ import annotations

import json
from pathlib import Path

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder
from grimoire.service.datadir import record_feed_kind
from tests.service.test_cli_errors import assert_clear, cli

WARNING = "avoid swaps when gas_gwei is above 80 because fees eat the gain"


def _store(data: Path, feed: str, warning: str | None = WARNING) -> None:
    record_feed_kind(data, feed, "default" if feed == "sim" else None)
    with Grimoire.open(data, clock=FrozenClock(), embedder=HashEmbedder()) as g:
        g.episode_write(text="gas hit 90 gwei and the swap lost 3% to fees")
        if warning:
            g.entry_add(category="warning", content=warning, confidence=0.9)


def _kind(data: Path) -> dict[str, object]:
    marker: dict[str, object] = json.loads((data / "FEED.json").read_text())
    return marker


def _ok(*args: str) -> dict[str, object]:
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer: dict[str, object] = json.loads(proc.stdout)
    return answer


def test_backup_and_restore_carry_the_simulated_marker(tmp_path: Path) -> None:
    _store(tmp_path / "demo", "sim")
    _ok("backup", "--data", str(tmp_path / "demo"), str(tmp_path / "bk"))
    assert json.loads((tmp_path / "bk" / "manifest.json").read_text())["memory"] == "simulated"
    restored = _ok("restore", str(tmp_path / "bk"), str(tmp_path / "copy"))
    assert restored["memory"] == "simulated"
    assert _kind(tmp_path / "copy")["kind"] == "simulated"
    # the restored demo is not taken for real memory: a real feed is refused there
    proc = cli("run", "--feed", "none", "--data", str(tmp_path / "copy"), "--max-ticks", "1")
    assert_clear(proc, 2, "holds simulated memory")


def test_import_marks_a_fresh_directory_and_refuses_to_mix_unless_asked(
        tmp_path: Path) -> None:
    _store(tmp_path / "demo", "sim")
    _ok("export", "--data", str(tmp_path / "demo"), str(tmp_path / "bundle"))
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["memory"] \
        == "simulated"

    fresh = tmp_path / "fresh"
    answer = _ok("import", str(tmp_path / "bundle"), "--provenance", "predecessor",
                 "--data", str(fresh))
    assert answer["memory"] == "simulated"
    assert _kind(fresh)["kind"] == "simulated" and _kind(fresh)["feed"] == "import"

    real = tmp_path / "real"
    _store(real, "none", warning=None)
    before = _kind(real)
    proc = cli("import", str(tmp_path / "bundle"), "--provenance", "predecessor",
               "--data", str(real))
    assert_clear(proc, 2, "holds real memory", "simulated memory", "--allow-mixed")
    assert _kind(real) == before
    with Grimoire.open(real, embedder=HashEmbedder(), read_only=True) as g:
        assert g.status()["entries"]["total"] == 0

    mixed = _ok("import", str(tmp_path / "bundle"), "--provenance", "predecessor", "--data",
                str(real), "--allow-mixed")
    assert mixed["entries"] == answer["entries"]  # the same items went in
    after = _kind(real)
    assert after["kind"] == "real"
    assert [m["kind"] for m in after["mixed_in"]] == ["simulated"]  # type: ignore[attr-defined]


def test_a_real_bundle_is_refused_by_simulated_memory(tmp_path: Path) -> None:
    _store(tmp_path / "agent", "none")
    _ok("export", "--data", str(tmp_path / "agent"), str(tmp_path / "bundle"))
    _store(tmp_path / "demo", "sim", warning=None)
    proc = cli("import", str(tmp_path / "bundle"), "--provenance", "predecessor",
               "--data", str(tmp_path / "demo"))
    assert_clear(proc, 2, "holds simulated memory", "exported from real memory")
