"""Issue 27: what a new owner's first report showed wrong: a hit rate from one report, the
candidates nowhere, an empty graph as a row of zeros, legends cut by the chart's edge.
Through the installed ``grimoire report``, as the owner runs it."""

from __future__ import annotations

import re
from pathlib import Path

from grimoire.clock import FrozenClock
from grimoire.records import Category, EntryStatus
from grimoire.report.svg import Series, line_chart
from tests.curator.test_curator_support import open_grimoire, put
from tests.service.test_cli_owner import cli

T0 = 1_767_225_600_000


def test_the_report_shows_candidates_no_rate_from_one_report_and_says_the_graph_is_empty(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_grimoire(data, FrozenClock(T0)) as g:
        for i in range(3):
            put(g, category=Category.INSIGHT, status=EntryStatus.CANDIDATE, confidence=0.4,
                content=f"Candidate finding {i}: gas averages {20 + i} gwei on Mondays")
        put(g, content="Gas is cheap at night", confidence=0.9)
        found = g.retrieve(query="is gas cheap", k=3, mode="deciding")
        g.outcome_report(retrieval_id=found["retrieval_id"], outcome="negative",
                         followed_ids=[found["items"][0]["id"]])
    out = tmp_path / "r.html"
    p = cli("report", "--data", str(data), "--out", str(out))
    assert p.returncode == 0, p.stderr
    page = out.read_text(encoding="utf-8")
    assert "Candidates: being judged, not listed yet (3)" in page
    assert "Candidate finding 2: gas averages 22 gwei on Mondays" in page
    assert "No facts yet" in page
    assert "needs 5 reports" in page and ">0%<" not in page  # one report: no rate


def test_a_legend_label_fits_its_column_and_keeps_its_whole_name_in_the_tooltip() -> None:
    name = "0192ab3c When the market regime is sideways, volume averages"
    svg = line_chart([Series(name, [(1, 0.5), (2, 0.6)]), Series("other", [(1, 0.2)])],
                     title="t", x_label="x", y_label="y")
    shown = re.findall(r"<title>[^<]*</title>([^<]*)</text>", svg)
    assert shown and all(len(s) * 6.5 <= 190 - 18 for s in shown), shown
    assert f"<title>{name}</title>" in svg
