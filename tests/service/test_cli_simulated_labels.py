"""Simulated memory says so wherever the owner reads it: PLAYBOOK.md, ``grimoire status``
and ``grimoire report`` name it simulated and print its times as simulated time, never as
real UTC. Real memory is printed as before. Through the installed ``grimoire``."""

from __future__ import annotations

import re
from pathlib import Path

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder
from grimoire.service.datadir import record_feed_kind
from tests.service.test_cli_errors import cli

# Two days ahead of any wall clock these tests run under: the simulator's clock at 600x.
SIM_NOW = 4_102_444_800_000  # 2100-01-01T00:00Z


def _store(data: Path, feed: str) -> None:
    record_feed_kind(data, feed, "default" if feed == "sim" else None)
    clock = FrozenClock(SIM_NOW)
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder()) as g:
        for i in range(3):
            clock.advance(60_000)
            g.episode_write(text=f"gas hit {80 + i} gwei and the swap lost 3% to fees",
                            type="action", outcome="negative", strategy="s1")
        g.curator_run()


def test_playbook_status_and_report_label_simulated_memory(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    _store(data, "sim")
    book = (data / "PLAYBOOK.md").read_text()
    assert "memory: simulated" in book.split("---")[1]  # the front matter
    assert "**Simulated memory.**" in book
    assert "2100-01-01 00:03:00 simulated time" in book and "00:03:00 UTC" not in book

    proc = cli("status", "--data", str(data))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^memory +simulated \(feed sim", proc.stdout, re.MULTILINE)
    assert "at 2100-01-01 00:03:00 simulated time" in proc.stdout
    assert "00:03:00Z" not in proc.stdout

    out = tmp_path / "r.html"
    proc = cli("report", "--data", str(data), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "<strong>Simulated memory.</strong>" in html
    assert "Times of the memory are simulated time" in html and "Times are UTC" not in html


def test_real_memory_is_not_labelled_simulated(tmp_path: Path) -> None:
    data = tmp_path / "agent"
    _store(data, "none")
    book = (data / "PLAYBOOK.md").read_text()
    assert "imulated" not in book and "2100-01-01 00:03:00 UTC" in book
    proc = cli("status", "--data", str(data))
    assert re.search(r"^memory +real \(feed none", proc.stdout, re.MULTILINE)
    assert "simulated" not in proc.stdout
