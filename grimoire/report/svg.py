"""Charts as inline SVG strings, rendered at build time (no script, no network)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "line_chart", "stacked_bars"]

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
W, H, PAD_L, PAD_B, PAD_T = 720, 260, 48, 56, 16


def _legend(names: Sequence[str], y: float) -> str:
    out: list[str] = []
    x = float(PAD_L)
    for i, name in enumerate(names):
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{y + 9}" font-size="11">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return "".join(out)


def stacked_bars(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]]
                 ) -> str:
    """One bar per label, stacked by series (e.g. episodes per day by type)."""
    names = list(series)
    totals = [sum(series[n][i] for n in names) for i in range(len(labels))]
    top = max(totals, default=0) or 1
    plot_w, plot_h = W - PAD_L - 10, H - PAD_B - PAD_T
    bw = plot_w / max(len(labels), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{W}" height="{H}"'
             f' role="img" aria-label="{escape(title)}">']
    parts.append(f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{W - 10}" '
                 f'y2="{PAD_T + plot_h}" stroke="#888"/>')
    parts.append(f'<text x="4" y="{PAD_T + 10}" font-size="11">{top:g}</text>')
    for i, label in enumerate(labels):
        y = float(PAD_T + plot_h)
        for k, name in enumerate(names):
            v = series[name][i]
            if v <= 0:
                continue
            h = plot_h * v / top
            y -= h
            parts.append(f'<rect x="{PAD_L + i * bw + 1:.1f}" y="{y:.1f}" '
                         f'width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
                         f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(label)} '
                         f'{escape(name)}: {v:g}</title></rect>')
        if len(labels) <= 16 or i % max(len(labels) // 8, 1) == 0:
            parts.append(f'<text x="{PAD_L + i * bw + 2:.1f}" y="{PAD_T + plot_h + 14}" '
                         f'font-size="10">{escape(label)}</text>')
    parts.append(_legend(names, H - 20))
    parts.append("</svg>")
    return "".join(parts)


def line_chart(title: str, series: Mapping[str, Sequence[tuple[float, float]]], *,
               y_max: float = 1.0, marks: Mapping[str, Sequence[tuple[float, float, str]]]
               | None = None) -> str:
    """Lines of (x, y) points (e.g. a rule's confidence per curator cycle); ``marks`` add
    a symbol at (x, y) (✓ validated, ✗ contradicted)."""
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1.0
    plot_w, plot_h = W - PAD_L - 10, H - PAD_B - PAD_T

    def px(x: float) -> float:
        return PAD_L + plot_w * (x - x0) / span

    def py(y: float) -> float:
        return PAD_T + plot_h * (1 - min(max(y / y_max, 0.0), 1.0))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{W}" height="{H}"'
             f' role="img" aria-label="{escape(title)}">',
             f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{W - 10}" y2="{PAD_T + plot_h}" '
             'stroke="#888"/>',
             f'<text x="4" y="{PAD_T + 10}" font-size="11">{y_max:g}</text>',
             f'<text x="{PAD_L}" y="{PAD_T + plot_h + 14}" font-size="10">{x0:g}</text>',
             f'<text x="{W - 40}" y="{PAD_T + plot_h + 14}" font-size="10">{x1:g}</text>']
    for k, (name, pts) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        if len(pts) == 1:
            parts.append(f'<circle cx="{px(pts[0][0]):.1f}" cy="{py(pts[0][1]):.1f}" r="3" '
                         f'fill="{color}"><title>{escape(name)}</title></circle>')
        elif pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                         f'stroke-width="2"><title>{escape(name)}</title></polyline>')
        for x, y, symbol in (marks or {}).get(name, ()):
            parts.append(f'<text x="{px(x) - 4:.1f}" y="{py(y) - 4:.1f}" font-size="11" '
                         f'fill="{color}">{escape(symbol)}</text>')
    parts.append(_legend([n[:40] for n in series], H - 20))
    parts.append("</svg>")
    return "".join(parts)
