"""Charts as inline SVG strings, drawn at build time (no script, no fonts, no network).

``line_chart`` (several series over a shared x axis), ``stacked_bars`` (one bar per x,
stacked by category), ``sparkline`` (a tiny line for a table cell) and ``histogram``.
Pure: numbers in, markup out; every text is escaped. A chart with no data says so in
its own frame rather than drawing empty axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["PALETTE", "Series", "histogram", "line_chart", "nice_ticks", "sparkline",
           "stacked_bars"]

PALETTE = ("#2f6fb3", "#d0632b", "#3f9b4f", "#a8327d", "#8c6d1f", "#5b5bd6", "#2a9d9d",
           "#b23a3a", "#6b7280", "#c08a00")
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'
Fmt = Callable[[float], str]


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]
    color: str = ""


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` round tick values from at or below ``lo`` to at or above ``hi``
    (whole numbers only with ``integer``: cycles, days)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    # A range too narrow to tell apart at this magnitude (or below a millionth: the report's
    # numbers are confidences, counts and milliseconds) is drawn as a constant.
    if hi - lo <= max(abs(lo), abs(hi)) * 1e-9 or hi - lo < 1e-6:
        hi = lo + max(1.0, abs(lo) * 0.1)
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(lo / step) * step
    n = max(1, math.ceil((hi - start) / step - 1e-9))  # at most 2 × count + 1 steps
    return [round(start + i * step, 10) for i in range(n + 1)]


def _frame(width: int, height: int, title: str, body: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>{body}</svg>')


def _empty(width: int, height: int, title: str, message: str) -> str:
    return _frame(width, height, title,
                  f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" '
                  f'fill="none" stroke="#ccc"/><text x="{width / 2}" y="{height / 2}" '
                  f'text-anchor="middle" {_FONT} fill="#666">{escape(message)}</text>')


@dataclass(frozen=True, slots=True)
class _Axes:
    x0: float
    x1: float
    y0: float
    y1: float
    left: int
    right: int
    top: int
    bottom: int

    def x(self, v: float) -> float:
        return self.left + (v - self.x0) / ((self.x1 - self.x0) or 1) * (self.right - self.left)

    def y(self, v: float) -> float:
        return self.bottom - (v - self.y0) / ((self.y1 - self.y0) or 1) * (self.bottom - self.top)


def _axes_markup(ax: _Axes, xticks: Sequence[float], yticks: Sequence[float], x_fmt: Fmt,
                 y_fmt: Fmt, x_label: str, y_label: str) -> str:
    out = [f'<g {_FONT} fill="#333" stroke="none">']
    for t in yticks:
        y = ax.y(t)
        out.append(f'<line x1="{ax.left}" x2="{ax.right}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#e5e7eb"/>')
        out.append(f'<text x="{ax.left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{escape(y_fmt(t))}</text>')
    for t in xticks:
        x = ax.x(t)
        out.append(f'<text x="{x:.1f}" y="{ax.bottom + 15}" text-anchor="middle">'
                   f'{escape(x_fmt(t))}</text>')
    out.append(f'<line x1="{ax.left}" x2="{ax.right}" y1="{ax.bottom}" y2="{ax.bottom}" '
               f'stroke="#555"/>')
    out.append(f'<text x="{(ax.left + ax.right) / 2:.1f}" y="{ax.bottom + 32}" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(12 {(ax.top + ax.bottom) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text></g>')
    return "".join(out)


# An 11 px sans-serif character is at most ~6.5 px wide (digits, capitals, "w" and "m"):
# a legend label is cut to what fits its column, the whole name in its tooltip.
_CHAR_PX = 6.5


def _legend(names: Sequence[tuple[str, str]], x: int, y: int, width: int) -> str:
    fits = max(4, int((width - 18) / _CHAR_PX))
    out = [f'<g {_FONT} fill="#333">']
    for i, (name, color) in enumerate(names):
        yy = y + i * 15
        shown = name if len(name) <= fits else name[:fits - 1].rstrip() + "…"
        out.append(f'<rect x="{x}" y="{yy - 8}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{yy + 1}"><title>{escape(name)}</title>'
                   f'{escape(shown)}</text>')
    out.append("</g>")
    return "".join(out)


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str,
               width: int = 760, height: int = 280, y_range: tuple[float, float] | None = None,
               x_fmt: Fmt = _num, y_fmt: Fmt = _num, legend: bool = True,
               x_integer: bool = True, empty: str = "no data yet") -> str:
    pts = [p for s in series for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])]
    if not pts:
        return _empty(width, height, title, empty)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    lo, hi = y_range if y_range is not None else (min(0.0, min(ys)), max(ys))
    yticks = nice_ticks(lo, hi)
    xticks = nice_ticks(min(xs), max(xs), 6, integer=x_integer)
    legend_w = 190 if legend and len(series) > 1 else 0
    ax = _Axes(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1, yticks[0], yticks[-1],
               52, width - 16 - legend_w, 14, height - 40)
    body = [_axes_markup(ax, [t for t in xticks if ax.x0 <= t <= ax.x1], yticks, x_fmt, y_fmt,
                         x_label, y_label)]
    named = []
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        good = [(x, y) for x, y in s.points if math.isfinite(x) and math.isfinite(y)]
        if not good:
            continue
        named.append((s.name, color))
        path = " ".join(f"{'M' if j == 0 else 'L'}{ax.x(x):.1f},{ax.y(y):.1f}"
                        for j, (x, y) in enumerate(good))
        body.append(f'<path class="series" d="{path}" fill="none" stroke="{color}" '
                    f'stroke-width="1.8"><title>{escape(s.name)}</title></path>')
        for x, y in good if len(good) <= 60 else ():
            body.append(f'<circle cx="{ax.x(x):.1f}" cy="{ax.y(y):.1f}" r="2.2" fill="{color}">'
                        f'<title>{escape(s.name)}: {escape(x_fmt(x))} → {escape(y_fmt(y))}'
                        f'</title></circle>')
    if legend_w:
        body.append(_legend(named, width - legend_w + 4, 22, legend_w - 4))
    return _frame(width, height, title, "".join(body))


def stacked_bars(xs: Sequence[float], stacks: Sequence[tuple[str, Sequence[float]]], *,
                 title: str, x_label: str, y_label: str, width: int = 760, height: int = 280,
                 x_fmt: Fmt = _num, colors: Sequence[str] = PALETTE,
                 empty: str = "no data yet") -> str:
    totals = [sum(values[i] for _, values in stacks) for i in range(len(xs))]
    if not xs or not any(totals):
        return _empty(width, height, title, empty)
    yticks = nice_ticks(0.0, max(totals))
    legend_w = 150
    ax = _Axes(0, len(xs), 0.0, yticks[-1], 52, width - 16 - legend_w, 14, height - 40)
    slot = (ax.right - ax.left) / len(xs)
    bar = max(1.0, slot * 0.8)
    every = max(1, math.ceil(len(xs) / 10))
    body = [_axes_markup(ax, [], yticks, x_fmt, _num, x_label, y_label)]
    for i, x in enumerate(xs):
        left = ax.left + i * slot + (slot - bar) / 2
        base = 0.0
        for j, (name, values) in enumerate(stacks):
            v = values[i]
            if v <= 0:
                continue
            top, bottom = ax.y(base + v), ax.y(base)
            body.append(f'<rect class="bar" x="{left:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                        f'height="{max(0.5, bottom - top):.1f}" fill="{colors[j % len(colors)]}">'
                        f'<title>{escape(x_fmt(x))} · {escape(name)}: {_num(v)}</title></rect>')
            base += v
        if i % every == 0:
            body.append(f'<text x="{left + bar / 2:.1f}" y="{ax.bottom + 15}" {_FONT} '
                        f'text-anchor="middle" fill="#333">{escape(x_fmt(x))}</text>')
    body.append(_legend([(n, colors[j % len(colors)]) for j, (n, _) in enumerate(stacks)],
                        width - legend_w + 4, 22, legend_w - 4))
    return _frame(width, height, title, "".join(body))


def sparkline(values: Sequence[float], *, width: int = 140, height: int = 26,
              y_range: tuple[float, float] = (0.0, 1.0), color: str = PALETTE[0],
              label: str = "") -> str:
    pts = [v for v in values if math.isfinite(v)]
    if not pts:
        return _empty(width, height, label or "sparkline", "–")
    lo, hi = y_range
    n = len(pts)

    def xy(i: int, v: float) -> str:
        x = 2 + (i / (n - 1) if n > 1 else 0.5) * (width - 4)
        y = height - 2 - (min(max(v, lo), hi) - lo) / ((hi - lo) or 1) * (height - 4)
        return f"{x:.1f},{y:.1f}"

    path = " ".join(f"{'M' if i == 0 else 'L'}{xy(i, v)}" for i, v in enumerate(pts))
    if n == 1:
        path += f" L{xy(0, pts[0])}"
    end = xy(n - 1, pts[-1]).split(",")
    return _frame(width, height, label or "sparkline",
                  f'<path class="series" d="{path}" fill="none" stroke="{color}" '
                  f'stroke-width="1.5"/><circle cx="{end[0]}" cy="{end[1]}" r="2" '
                  f'fill="{color}"/>')


def histogram(groups: Sequence[tuple[str, Sequence[float]]], edges: Sequence[float], *,
              title: str, x_label: str, bin_label: Callable[[float, float], str],
              width: int = 760, height: int = 260, empty: str = "no data yet") -> str:
    """Counts of each group's values in the bins [edges[i], edges[i+1]) (last bin closed)."""
    bins = len(edges) - 1
    counts: list[tuple[str, list[float]]] = []
    for name, values in groups:
        row = [0.0] * bins
        for v in values:
            for i in range(bins):
                if edges[i] <= v < edges[i + 1] or (i == bins - 1 and v == edges[-1]):
                    row[i] += 1
                    break
        counts.append((name, row))
    labels = [bin_label(edges[i], edges[i + 1]) for i in range(bins)]
    return stacked_bars(list(range(bins)), counts, title=title, x_label=x_label,
                        y_label="count", width=width, height=height,
                        x_fmt=lambda i: labels[int(i)], empty=empty)
