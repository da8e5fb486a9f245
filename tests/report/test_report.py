"""``grimoire report`` end to end: a simulated run's store in, one self-contained HTML file
out whose numbers are the ones PLAYBOOK.md printed, rendered by a real headless Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario
from grimoire.models.embedders import FastEmbedEmbedder
from grimoire.records import EpisodeType, Outcome
from grimoire.report import ReportData, collect, render_page, write_report
from tests.report.browser import CHROMIUM, render

pytestmark = pytest.mark.slow

TICK_MS = 180_000  # the scenarios' tick_seconds_hint
TICKS = 1200  # 24 curator cycles, 2.5 simulated days
RETRIEVE_EVERY = 20
REPORT_EVERY = 40
LINE = re.compile(r"^- `([0-9a-f-]+)` · (?:[a-z ]+ · )*conf (\d\.\d\d) · ✓(\d+) ✗(\d+)")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not "
                                    "installed (.ci/run installs it: apt-get install chromium)")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, real_embedder: FastEmbedEmbedder
        ) -> Iterator[dict[str, Any]]:
    """The default scenario tick by tick with the curator every 50 ticks, a retrieval every
    20 ticks and an outcome for every other one; PLAYBOOK.md kept after each cycle."""
    path = tmp_path_factory.mktemp("report") / "data"
    clock = FrozenClock()
    start = clock.now
    feed = SimFeed(load_scenario(None), 7)
    playbooks: dict[int, str] = {}
    outcomes: list[str] = []
    config = Config().replace(**{"distiller.every_episodes": 50,
                                 "episodes.flush_ms": 3_600_000})
    with Grimoire.open(path, config=config, clock=clock, embedder=real_embedder) as g:
        for tick in range(1, TICKS + 1):
            now = start + tick * TICK_MS
            clock.set(now)
            summary = g.tick(now=now, feed_episodes=feed.poll(tick, now))
            if "curator" in summary:
                playbooks[summary["curator"]["cycle"]] = g.playbook_get()["markdown"]
            if tick % RETRIEVE_EVERY == 0:
                result = g.retrieve(query="is gas cheap enough to swap now", k=5)
                if tick % REPORT_EVERY == 0:
                    outcome = "positive" if tick % (3 * REPORT_EVERY) else "negative"
                    g.outcome_report(retrieval_id=result["retrieval_id"], outcome=outcome)
                    outcomes.append(outcome)
        data = collect(g.context)
        episodes = list(g.context.episodes.scan())
    yield {"path": path, "data": data, "playbooks": playbooks, "outcomes": outcomes,
           "episodes": episodes, "config": config}


def test_every_listing_is_what_that_cycles_playbook_printed(run: dict[str, Any]) -> None:
    data: ReportData = run["data"]
    assert [c for c, _ in data.cycles] == sorted(run["playbooks"])
    assert len(data.cycles) == TICKS // 50
    by_cycle: dict[int, dict[str, tuple[float, int, int]]] = {}
    for rule in data.rules:
        for p in rule.points:
            by_cycle.setdefault(p.cycle, {})[rule.entry_id] = (p.confidence, p.validated,
                                                               p.contradicted)
    assert any(len(r.points) > 1 for r in data.rules)
    for cycle, markdown in run["playbooks"].items():
        printed = {m.group(1): (float(m.group(2)), int(m.group(3)), int(m.group(4)))
                   for m in map(LINE.match, markdown.splitlines()) if m}
        listed = by_cycle.get(cycle, {})
        assert len(printed) == len(listed), cycle
        for short, (conf, ok, bad) in printed.items():
            (entry_id,) = [i for i in listed if i.startswith(short)]
            got_conf, got_ok, got_bad = listed[entry_id]
            assert (f"{got_conf:.2f}", got_ok, got_bad) == (f"{conf:.2f}", ok, bad), cycle


def test_entering_and_leaving_follow_the_listings(run: dict[str, Any]) -> None:
    data: ReportData = run["data"]
    order = [c for c, _ in data.cycles]
    for rule in data.rules:
        cycles = [p.cycle for p in rule.points]
        assert rule.entered_cycle == cycles[0]
        if rule.left_cycle is None:
            assert cycles[-1] == order[-1]
        else:
            assert rule.left_cycle == order[order.index(cycles[-1]) + 1]


def test_episode_and_retrieval_counts_are_the_stores(run: dict[str, Any]) -> None:
    data: ReportData = run["data"]
    episodes = run["episodes"]
    assert sum(sum(day.values()) for day in data.episodes_by_day.values()) == len(episodes)
    actions = [e for e in episodes if e.type is EpisodeType.ACTION
               and e.outcome is not Outcome.DESCRIPTIVE]
    assert sum(sum(day.values()) for day in data.outcomes_by_day.values()) == len(actions)
    assert sum(d.count for d in data.retrievals) == TICKS // RETRIEVE_EVERY
    assert sum(d.reported for d in data.retrievals) == len(run["outcomes"])
    assert sum(d.positive for d in data.retrievals) == run["outcomes"].count("positive")
    assert all(d.p50_ms is not None and 0 < d.p50_ms <= (d.p95_ms or 0)
               for d in data.retrievals)


def test_the_page_is_self_contained(run: dict[str, Any], tmp_path: Path) -> None:
    html = render_page(run["data"])
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}
    assert html.count("<svg") >= 8
    assert write_report(run["data"], tmp_path / "r.html") == len(html.encode("utf-8"))


def test_the_cli_writes_the_report(run: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "grimoire", "report", "--data",
                           str(run["path"]), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}") and out.stat().st_size > 10_000
    missing = subprocess.run([sys.executable, "-m", "grimoire", "report", "--data",
                              str(tmp_path / "nothing"), "--out", str(out)],
                             capture_output=True, text=True, timeout=300, check=False)
    assert missing.returncode == 2 and "holds no Grimoire data" in missing.stderr
    assert not (tmp_path / "nothing").exists()


@needs_chromium
def test_chromium_renders_every_chart_without_console_errors(run: dict[str, Any],
                                                             tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_report(run["data"], page)
    shown = render(page)
    assert shown.console == [] and shown.loads == []
    # The DOM Chromium built holds every chart with its marks ...
    charts = re.findall(r"<svg[^>]*class=\"chart\".*?</svg>", shown.dom, re.S)
    assert len(charts) >= 8
    drawn = [c for c in charts if 'class="series"' in c or 'class="bar"' in c]
    assert len(drawn) >= 6, "most charts have data in this run"
    # ... and the screenshot shows them: the series colours are on screen.
    pixels = shown.png.reshape(-1, 3).astype(int)
    for colour in ("#2f6fb3", "#3f9b4f", "#b23a3a"):
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(pixels - rgb).sum(axis=1) < 30).sum() > 200, colour


@needs_chromium
def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    """The checks above can fail: a console error and a file the page loads are both seen."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="missing.png"><script>console.error("boom")'
                    "</script></body></html>")
    shown = render(page, height=200)
    assert any("boom" in m for m in shown.console)
    assert shown.loads == [(tmp_path / "missing.png").as_uri()]
