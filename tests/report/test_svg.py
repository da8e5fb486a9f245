"""The report's charts: round ticks that cover the data, escaped text, a frame for no data."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from grimoire.report.svg import Series, histogram, line_chart, nice_ticks, sparkline, stacked_bars

NS = "{http://www.w3.org/2000/svg}"


@given(st.floats(-1e6, 1e6), st.floats(0, 1e6), st.booleans())
def test_ticks_cover_the_range_in_round_steps(lo: float, span: float, integer: bool) -> None:
    ticks = nice_ticks(lo, lo + span, integer=integer)
    assert ticks[0] <= lo + 1e-6 and ticks[-1] >= lo + span - 1e-6
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(abs(s / steps[0] - 1) < 1e-3 for s in steps)  # one step size throughout
    if integer:
        assert all(t == int(t) for t in ticks)


def test_a_line_chart_draws_each_series_within_its_frame() -> None:
    svg = line_chart([Series("a", [(1, 0.2), (2, 0.9), (3, 0.5)]),
                      Series("b", [(1, 0.1), (3, 0.3)])],
                     title="t", x_label="cycle", y_label="conf", y_range=(0, 1))
    root = ET.fromstring(svg)
    paths = [p for p in root.iter(f"{NS}path") if p.get("class") == "series"]
    assert len(paths) == 2
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    for p in paths:
        for x, y in re.findall(r"[ML]([\d.]+),([\d.]+)", p.get("d", "")):
            assert 0 <= float(x) <= width and 0 <= float(y) <= height


def test_text_is_escaped_and_no_data_says_so() -> None:
    svg = line_chart([Series("<script>alert(1)</script>", [(1, 1.0), (2, 2.0)]),
                      Series("x", [(1, 3.0)])], title="a & b", x_label="x", y_label="y")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)  # well-formed
    empty = line_chart([], title="t", x_label="x", y_label="y", empty="nothing yet")
    assert "nothing yet" in empty and 'class="series"' not in empty
    assert "–" in sparkline([])


def test_stacked_bars_heights_add_up_to_each_total() -> None:
    svg = stacked_bars([0, 1], [("a", [2.0, 0.0]), ("b", [1.0, 4.0])], title="t",
                       x_label="d", y_label="n")
    bars = [r for r in ET.fromstring(svg).iter(f"{NS}rect") if r.get("class") == "bar"]
    assert len(bars) == 3  # zero-height segments are not drawn
    heights = [float(r.get("height", 0)) for r in bars]
    assert abs((heights[0] + heights[1]) * 4 - heights[2] * 3) < 1.0  # 3 units vs 4 units


def test_a_histogram_counts_every_value_once() -> None:
    svg = histogram([("k", [0.5, 1.0, 5.0, 50.0])], [0.0, 1.0, 10.0, 100.0], title="t",
                    x_label="lag", bin_label=lambda lo, hi: f"{lo}-{hi}")
    titles = [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}title")]
    assert "0.0-1.0 · k: 1" in titles and "1.0-10.0 · k: 2" in titles
    assert "10.0-100.0 · k: 1" in titles
