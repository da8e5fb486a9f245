"""``grimoire report``: one self-contained HTML file, opened in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.embed import HashEmbedder
from grimoire.grimoire import Grimoire
from grimoire.report import build_report
from tests.service.daemon_support import daemon_env

DAY = 86_400_000
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _memory(root: Path) -> Path:
    """Three days of episodes, rules through the curator, a fact and a causal link."""
    clock = FrozenClock()
    with Grimoire.open(root, clock=clock, embedder=HashEmbedder()) as g:
        for day in range(3):
            for i in range(6):
                outcome = "negative" if i % 3 == 0 else "positive"
                g.episode_write(text=f"swap {i} ETH on day {day} gas {20 + 30 * (i % 3)} gwei",
                                type="action", outcome=outcome, strategy="eth-dca",
                                metrics={"gas_gwei": 20 + 30 * (i % 3)})
                clock.advance(3_600_000)
            g.episode_write(text=f"gas spiked on day {day}", type="observation")
            clock.advance(DAY - 6 * 3_600_000)
        cause = g.episode_write(text="gas spiked to 120 gwei", type="observation")["id"]
        clock.advance(60_000)
        effect = g.episode_write(text="swap reverted out of gas", type="action",
                                 outcome="negative")["id"]
        g.causal_link(cause_id=cause, effect_id=effect, relationship="caused")
        g.kg_assert(subject={"kind": "pool", "id": "weth-usdc"}, predicate="oracle_dependency",
                    object={"kind": "oracle", "id": "chainlink"}, valid_from=1)
        g.entry_add(category="warning", content="Avoid swaps on WETH/USDC when gas is above "
                    "80 gwei: 7 of 9 reverted")
        g.curator_run()
    return root


def test_the_report_is_self_contained_and_reads_every_section(tmp_path: Path) -> None:
    with Grimoire.open(_memory(tmp_path / "d"), embedder=HashEmbedder(),
                       read_only=True) as g:
        html = build_report(g)
    assert "<script" not in html and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", "") and "https://" not in html  # nothing to fetch
    for section in ("What was learned", "Episodes", "Retrieval", "Knowledge graph",
                    "Causal links"):
        assert f"<h2>{section}</h2>" in html
    assert "1 facts (1 open, 0 closed)" in html
    assert "1 links (1 explicit)" in html
    days = re.findall(r"<text[^>]*>(2026-01-0\d)</text>", html)
    assert len(set(days)) >= 3  # episodes per day, one bar per day


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get "
                    "install -y chromium): the report's browser test needs it")
def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    data = _memory(tmp_path / "d")
    out = tmp_path / "report.html"
    p = subprocess.run([str(Path(sys.executable).parent / "grimoire"), "report", "--data",
                        str(data), "-o", str(out)], capture_output=True, text=True,
                       env=daemon_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert CHROMIUM is not None
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]
    shot = tmp_path / "shot.png"
    run = subprocess.run([*flags, f"--user-data-dir={tmp_path / 'profile1'}",
                          f"--screenshot={shot}", "--window-size=800,2600",
                          out.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = subprocess.run([*flags, f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom",
                          out.as_uri()], capture_output=True, text=True, timeout=120)
    svgs = re.findall(r"<svg[^>]*>(.*?)</svg>", dom.stdout, flags=re.S)
    assert len(svgs) == out.read_text(encoding="utf-8").count("<svg") >= 5, dom.stderr[-2000:]
    for svg in svgs:  # every chart drew something: bars, lines or points
        assert re.search(r"<(rect|polyline|circle)\b", svg), svg[:300]
    console = [line for line in run.stderr.splitlines() + dom.stderr.splitlines()
               if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
