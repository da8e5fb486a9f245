"""``grimoire explain`` and the MCP explain tool say when the memory is simulated and print
its times as simulated time, never as real UTC (as PLAYBOOK.md and ``status`` do)."""

from __future__ import annotations

from pathlib import Path

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.mcp import tools
from grimoire.models.embedders import HashEmbedder
from tests.portable.test_marker_carried import _store
from tests.service.test_cli_errors import cli


def _entry_id(data: Path) -> str:
    with Grimoire.open(data, clock=FrozenClock(), embedder=HashEmbedder(),
                       read_only=True) as g:
        entries = g.entry_list(limit=10)["entries"]
        assert len(entries) == 1
        return str(entries[0]["id"])


def test_explain_labels_simulated_memory_and_its_times(tmp_path: Path) -> None:
    for name, feed in (("demo", "sim"), ("live", "none")):
        _store(tmp_path / name, feed)
    sim = cli("explain", _entry_id(tmp_path / "demo"), "--data", str(tmp_path / "demo"))
    assert sim.returncode == 0, sim.stderr[-2000:]
    assert sim.stdout.count("Simulated memory") == 1
    assert "simulated time" in sim.stdout and "UTC" not in sim.stdout
    real = cli("explain", _entry_id(tmp_path / "live"), "--data", str(tmp_path / "live"))
    assert real.returncode == 0, real.stderr[-2000:]
    assert "Simulated memory" not in real.stdout and "simulated time" not in real.stdout
    assert "UTC" in real.stdout


def test_the_mcp_explain_summary_says_simulated_memory(tmp_path: Path) -> None:
    for name, feed in (("demo", "sim"), ("live", "none")):
        _store(tmp_path / name, feed)
    said = {}
    for name in ("demo", "live"):
        with Grimoire.open(tmp_path / name, clock=FrozenClock(), embedder=HashEmbedder(),
                           read_only=True) as g:
            entry = g.entry_list(limit=10)["entries"][0]
            said[name] = tools.explain_summary(g.entry_explain(entry["id"]))
    assert "simulated time" in str(said["demo"]["memory"])
    assert "memory" not in said["live"]
