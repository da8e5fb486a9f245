"""The report's HTML: one self-contained file (inline CSS and SVG; no script, no network).

``render_page(data)`` lays out the sections; ``write_report(data, path)`` writes it
atomically, so a reader never sees half a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from grimoire.report.data import MIN_REPORTED, ReportData, RuleHistory
from grimoire.report.svg import Series, histogram, line_chart, sparkline, stacked_bars
from playbook import write_atomic
from playbook.render_text import short_ids

__all__ = ["render_page", "write_report"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#1f2937;
line-height:1.45;padding:0 16px}
h1{margin-bottom:0}h2{margin-top:2em;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.sub{color:#6b7280;margin-top:4px}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #e5e7eb;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:1.4em}table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:middle}
td.num{white-space:nowrap}
th{background:#f9fafb}td.num{text-align:right;font-variant-numeric:tabular-nums}
.sim{background:#fff4d6;border:1px solid #e0b84f;padding:.4em .6em}
.note{color:#6b7280;font-size:.9em}svg.chart{max-width:100%;height:auto;display:block;
margin:8px 0}code{font-size:.9em}
"""
_TYPE_COLORS = {"observation": "#9ca3af", "action": "#2f6fb3", "regime_shift": "#d0632b",
                "clade_alert": "#a8327d", "replicant_report": "#5b5bd6",
                "coordination_intent": "#2a9d9d", "safety_incident": "#b23a3a"}
_OUTCOME_COLORS = {"positive": "#3f9b4f", "neutral": "#9ca3af", "negative": "#b23a3a"}
_LAG_EDGES = (0.0, 1_000.0, 10_000.0, 60_000.0, 600_000.0, 3_600_000.0, 21_600_000.0,
              86_400_000.0, float("inf"))


def _date(day: float) -> str:
    return datetime.fromtimestamp(int(day) * 86_400, tz=UTC).strftime("%Y-%m-%d")


def _when(ms: int, simulated: bool = False) -> str:
    """A time of the memory: UTC, or simulated time when the memory is simulated (the
    simulator's clock runs ahead of the wall clock: never printed as a real UTC time)."""
    text = datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
    return f"{text} {'simulated time' if simulated else 'UTC'}"


def _duration(ms: float) -> str:
    if ms == float("inf"):
        return "∞"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size:
            value = ms / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else \
                f"{value:.1f} {unit}"
    return f"{ms:.0f} ms"


class _Shorts(dict[str, str]):
    """Entry ids → the short ids PLAYBOOK.md and ``grimoire explain`` use."""

    def __missing__(self, key: str) -> str:
        return key


def _cards(items: Sequence[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{escape(v)}</b>{escape(k)}</div>' for k, v in items) + "</div>"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    out = ["<table><thead><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _learned(data: ReportData, short: _Shorts) -> str:
    cycles = [c for c, _ in data.cycles]
    out = ['<h2 id="learned">What was learned over time</h2>']
    if not cycles:
        return "".join(out) + ('<p class="note">No curator cycle has written PLAYBOOK.md yet '
                               "(it is written every <code>curator.every_ticks</code> ticks, "
                               "or by <code>grimoire curate</code>).</p>")
    per_cycle: dict[str, dict[int, int]] = {}
    for rule in data.rules:
        key = {"warning": "warnings", "heuristic": "heuristics"}.get(rule.category,
                                                                     "insights and links")
        bucket = per_cycle.setdefault(key, {})
        for p in rule.points:
            bucket[p.cycle] = bucket.get(p.cycle, 0) + 1
    series = [Series(name, [(c, float(counts.get(c, 0))) for c in cycles])
              for name, counts in sorted(per_cycle.items())]
    out.append(line_chart(series, title="Entries listed in PLAYBOOK.md per curator cycle",
                          x_label="curator cycle", y_label="entries listed"))
    current = sorted((r for r in data.rules if r.left_cycle is None),
                     key=lambda r: (-r.points[-1].confidence, r.entry_id))[:10]
    out.append(line_chart(
        [Series(f"{short[r.entry_id]} {r.content[:28]}", [(p.cycle, p.confidence)
                                                          for p in r.points]) for r in current],
        title="Confidence shown in PLAYBOOK.md, per cycle (the 10 most confident listed now)",
        x_label="curator cycle", y_label="confidence", y_range=(0.0, 1.0),
        y_fmt=lambda v: f"{v:.1f}", empty="nothing is listed now"))
    out.append('<p class="note">Each row is an entry PLAYBOOK.md listed at least once. ✓ and ✗ '
               "are the confirmations and contradictions printed beside it (first listing → "
               "latest); the line is its confidence at each cycle that listed it.</p>")
    out.append(_table(
        ["id", "kind", "what it says", "now", "entered", "left", "✓", "✗", "confidence"],
        [_rule_row(r, data, short) for r in data.rules], {6, 7}))
    return "".join(out)


def _candidates(data: ReportData, short: _Shorts) -> str:
    """What the curator is still judging: never in PLAYBOOK.md, so never in the table above."""
    total = int((data.counts.get("entries_by_status") or {}).get("candidate", 0))
    out = [f'<h3 id="candidates">Candidates: being judged, not listed yet ({total:,})</h3>']
    if not data.candidates:
        return "".join(out) + '<p class="note">No candidate entry right now.</p>'
    shown = len(data.candidates)
    out.append('<p class="note">An entry starts as a candidate and is listed in PLAYBOOK.md '
               "once it is promoted (or, a warning, once its confidence allows). "
               + (f"The {shown} most confident of {total:,}:" if total > shown else "")
               + "</p>")
    out.append(_table(["id", "kind", "what it says", "✓", "✗", "confidence"], [
        [f"<code>{escape(short[i])}</code>", escape(kind),
         escape(text[:160] + ("…" if len(text) > 160 else "")), str(ok), str(bad), f"{conf:.2f}"]
        for i, kind, conf, ok, bad, text in data.candidates], {3, 4, 5}))
    return "".join(out)


def _rule_row(rule: RuleHistory, data: ReportData, short: _Shorts) -> list[str]:
    times = dict(data.cycles)
    first, last = rule.points[0], rule.points[-1]
    left = ("still listed" if rule.left_cycle is None
            else f"cycle {rule.left_cycle} ({_when(times[rule.left_cycle], data.simulated)})")
    if rule.relisted:
        left += f"; came back {rule.relisted}×"
    return [f"<code>{escape(short[rule.entry_id])}</code>", escape(rule.category),
            escape(rule.content[:160] + ("…" if len(rule.content) > 160 else "")),
            escape(rule.status), f"cycle {first.cycle} ({escape(_when(first.at, data.simulated))})",
            escape(left), f"{first.validated} → {last.validated}",
            f"{first.contradicted} → {last.contradicted}",
            sparkline([p.confidence for p in rule.points],
                      label=f"confidence of {short[rule.entry_id]}")]


def _episodes(data: ReportData) -> str:
    days = sorted(set(data.episodes_by_day) | set(data.outcomes_by_day))
    out = ['<h2 id="episodes">Episodes per day</h2>']
    types = list(data.episode_types)
    out.append(stacked_bars(
        days, [(t, [float(data.episodes_by_day.get(d, {}).get(t, 0)) for d in days])
               for t in types],
        title="Episodes per day by type (UTC days)", x_label="day", y_label="episodes",
        x_fmt=_date, colors=[_TYPE_COLORS.get(t, "#6b7280") for t in types]))
    outcomes = [o for o in ("positive", "neutral", "negative")
                if any(o in v for v in data.outcomes_by_day.values())]
    out.append(stacked_bars(
        days, [(o, [float(data.outcomes_by_day.get(d, {}).get(o, 0)) for d in days])
               for o in outcomes],
        title="Actions per day by outcome", x_label="day", y_label="actions", x_fmt=_date,
        colors=[_OUTCOME_COLORS[o] for o in outcomes], empty="no action has an outcome yet"))
    return "".join(out)


def _retrieval(data: ReportData) -> str:
    out = ['<h2 id="retrieval">Retrieval</h2>']
    days = data.retrievals
    total = sum(d.count for d in days)
    reported = sum(d.reported for d in days)
    positive = sum(d.positive for d in days)
    out.append(_cards([("retrievals", f"{total:,}"), ("outcomes reported", f"{reported:,}"),
                       ("hit rate (positive / reported)",
                        f"{positive / reported:.0%}" if reported >= MIN_REPORTED
                        else f"– (needs {MIN_REPORTED} reports)")]))
    out.append(line_chart(
        [Series("p50", [(d.day, d.p50_ms) for d in days if d.p50_ms is not None]),
         Series("p95", [(d.day, d.p95_ms) for d in days if d.p95_ms is not None])],
        title="Retrieval latency per day (ms)", x_label="day", y_label="ms", x_fmt=_date,
        empty="no retrieval with a logged latency yet"))
    out.append(line_chart(
        [Series("hit rate", [(d.day, d.hit_rate) for d in days if d.hit_rate is not None])],
        title=f"Hit rate per day: retrievals whose decision went well, of those reported "
              f"(days with {MIN_REPORTED} reports or more)",
        x_label="day", y_label="hit rate", x_fmt=_date, y_range=(0.0, 1.0),
        y_fmt=lambda v: f"{v:.0%}", legend=False,
        empty=f"no day has {MIN_REPORTED} outcomes reported yet" if reported
        else "no outcome reported yet"))
    return "".join(out)


def _graph(data: ReportData) -> str:
    g = data.graph
    if not g.get("triples"):
        return ('<h2 id="graph">Knowledge graph</h2><p class="note">No facts yet: the graph '
                "holds what the agent asserts (<code>kg.assert</code>) or a bundle imports."
                "</p>")
    return ('<h2 id="graph">Knowledge graph</h2>' + _cards(
        [("triples", f"{g.get('triples', 0):,}"), ("open (valid now)", f"{g.get('open', 0):,}"),
         ("closed", f"{g.get('closed', 0):,}"), ("versions", f"{g.get('versions', 0):,}"),
         ("subjects", f"{g.get('subjects', 0):,}")]))


def _causal(data: ReportData, short: _Shorts) -> str:
    c = data.causal
    out = ['<h2 id="causal">Causal links</h2>',
           _cards([(f"{kind} edges", f"{n:,}") for kind, n in c.edges_by_kind.items()]
                  or [("edges", "0")])]
    out.append(histogram(
        list(c.lags_ms.items()), _LAG_EDGES, title="Lag from cause to effect, by edge kind",
        x_label="lag", bin_label=lambda lo, hi: f"{_duration(lo)}–{_duration(hi)}"
        if hi != float("inf") else f"≥ {_duration(lo)}", empty="no causal edge yet"))
    if c.links:
        out.append(_table(
            ["id", "status", "confidence", "link", "within"],
            [[f"<code>{escape(short[i])}</code>", escape(status), f"{conf:.2f}",
              escape(text[:180]), escape(_duration(w)) if w is not None else "–"]
             for i, status, conf, text, w in c.links], {2}))
    else:
        out.append('<p class="note">No causal link has been learned yet.</p>')
    return "".join(out)


def render_page(data: ReportData) -> str:
    counts = data.counts
    by_status = counts.get("entries_by_status", {})
    head = (f"<h1>Grimoire report</h1><p class=\"sub\">{escape(data.data_dir)} · generated "
            f"{escape(_when(data.generated_at))} (wall clock) · {len(data.cycles)} curator "
            "cycles recorded"
            "</p>" + _cards([
                ("episodes", f"{counts.get('episodes', 0):,}"),
                ("knowledge entries", f"{counts.get('entries', 0):,}"),
                ("active", f"{by_status.get('active', 0):,}"),
                ("candidates", f"{by_status.get('candidate', 0):,}"),
                ("causal edges", f"{counts.get('causal_edges', 0):,}")]))
    times = ("Times of the memory are simulated time (the simulator's clock, ahead of the "
             "wall clock); days are the simulator's days of the episodes' own timestamps."
             if data.simulated else
             "Times are UTC; days are UTC days of the episodes' own timestamps.")
    nav = ('<p class="note">Sections: <a href="#learned">learned over time</a> · '
           '<a href="#episodes">episodes</a> · <a href="#retrieval">retrieval</a> · '
           '<a href="#graph">knowledge graph</a> · <a href="#causal">causal links</a>. '
           f"{times}</p>")
    if data.simulated:
        nav = ('<p class="sim"><strong>Simulated memory.</strong> Everything here was learned '
               "from Grimoire's built-in market simulator (<code>grimoire run --feed sim"
               "</code>), not from an agent's real episodes.</p>") + nav
    short = _Shorts(short_ids([*(r.entry_id for r in data.rules),
                               *(link[0] for link in data.causal.links),
                               *(c[0] for c in data.candidates)]))
    body = (head + nav + _learned(data, short) + _candidates(data, short) + _episodes(data)
            + _retrieval(data) + _graph(data) + _causal(data, short))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Grimoire report</title><style>{_CSS}</style></head><body>{body}"
            "</body></html>\n")


def write_report(data: ReportData, path: Path) -> int:
    """Write the page to ``path`` atomically (``playbook.write_atomic``: a reader never sees
    half a report); returns its size in bytes."""
    text = render_page(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return len(text.encode("utf-8"))
