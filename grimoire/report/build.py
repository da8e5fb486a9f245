"""``grimoire report``: one self-contained HTML file of what the memory holds and learned.

Every number is read from the stores of an open ``Grimoire`` (nothing is
estimated); charts are inline SVG built here, so the file opens anywhere, with
no script and no network. Sections: the rules' confidence across curator
cycles with ✓ (validated) / ✗ (contradicted) and when each became active or
left; episodes per day by type and by outcome; retrieval hit rate; the
knowledge graph's size; the causal links with their lags.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime
from html import escape
from typing import Any

from grimoire.records import EntryStatus
from grimoire.report.svg import line_chart, stacked_bars
from grimoire.stores.semantic_types import EntryFilter

__all__ = ["build_report"]

RULES = ("warning", "heuristic")
MAX_RULES_CHARTED = 10
MAX_LINKS = 50

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:760px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;border-bottom:1px solid #eee;
text-align:left}.muted{color:#777}svg.chart{display:block;margin:.5em 0}"""


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _rules_section(ctx: Any) -> str:
    entries = ctx.semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)),
                                        order="created_at", limit=None)
    rules = [e for e in entries if e.category.value in RULES]
    if not rules:
        return "<p class='muted'>No warning or heuristic yet: the curator has not promoted " \
               "any rule.</p>"
    series: dict[str, list[tuple[float, float]]] = {}
    marks: dict[str, list[tuple[float, float, str]]] = {}
    rows = []
    charted = sorted(rules, key=lambda e: -e.confidence)[:MAX_RULES_CHARTED]
    for e in rules:
        entered = left = None
        points: list[tuple[float, float]] = []
        symbols: list[tuple[float, float, str]] = []
        conf = None
        for d in sorted(ctx.semantic.list_curator_deltas(entry_id=e.id),
                        key=lambda d: (d.cycle, d.id)):
            before, after = d.before or {}, d.after or {}
            if isinstance(after.get("confidence"), int | float):
                conf = float(after["confidence"])
                points.append((d.cycle, conf))
            y = conf if conf is not None else e.confidence
            if int(after.get("validated_count", 0) or 0) > int(
                    before.get("validated_count", 0) or 0):
                symbols.append((d.cycle, y, "✓"))
            if int(after.get("contradicted_count", 0) or 0) > int(
                    before.get("contradicted_count", 0) or 0):
                symbols.append((d.cycle, y, "✗"))
            status = after.get("status")
            if status == "active" and entered is None:
                entered = d.cycle
            elif status in ("demoted", "archived") and entered is not None:
                left = d.cycle
        name = f"{e.id[:8]} {e.content}"
        if e in charted and points:
            series[name] = points
            marks[name] = symbols
        rows.append([e.id[:8], e.category.value, e.status.value, f"{e.confidence:.2f}",
                     f"{e.validated_count} ✓ / {e.contradicted_count} ✗",
                     "-" if entered is None else f"cycle {entered}",
                     "-" if left is None else f"cycle {left}", e.content[:90]])
    chart = (line_chart("rule confidence per curator cycle", series, marks=marks)
             if series else "<p class='muted'>No curator cycle has changed a rule's "
             "confidence yet.</p>")
    return chart + _table(["id", "category", "status", "confidence", "votes",
                           "became active", "left", "rule"], rows)


def _episodes_section(ctx: Any) -> tuple[str, int]:
    by_type: dict[str, Counter[str]] = defaultdict(Counter)
    by_outcome: dict[str, Counter[str]] = defaultdict(Counter)
    n = 0
    for ep in ctx.episodes.scan():
        day = _day(ep.timestamp)
        by_type[ep.type.value][day] += 1
        by_outcome[ep.outcome.value][day] += 1
        n += 1
    days = sorted({d for c in by_type.values() for d in c})
    if not days:
        return "<p class='muted'>No episodes yet.</p>", 0
    types = {t: [float(c[d]) for d in days] for t, c in sorted(by_type.items())}
    outcomes = {o: [float(c[d]) for d in days] for o, c in sorted(by_outcome.items())}
    return (stacked_bars("episodes per day by type", days, types)
            + stacked_bars("episodes per day by outcome", days, outcomes), n)


def _links_section(ctx: Any) -> str:
    edges = ctx.semantic.list_edges(limit=None)
    if not edges:
        return "<p class='muted'>No causal links yet.</p>"
    by_kind = Counter(e.kind.value for e in edges)
    lags = [e.lag_ms / 60000 for e in edges if e.lag_ms is not None]
    hist: Counter[str] = Counter()
    for m in lags:
        hist["< 1 min" if m < 1 else "< 1 h" if m < 60 else "< 1 day" if m < 1440
             else ">= 1 day"] += 1
    labels = ["< 1 min", "< 1 h", "< 1 day", ">= 1 day"]
    chart = (stacked_bars("causal links by lag", labels,
                          {"links": [float(hist[k]) for k in labels]}) if lags else "")
    top = sorted(edges, key=lambda e: -e.weight)[:MAX_LINKS]
    rows = [[e.kind.value, e.cause_id[:8], e.effect_id[:8], f"{e.weight:.2f}",
             "-" if e.lag_ms is None else f"{e.lag_ms / 1000:g} s",
             str(e.evidence_count), e.relationship or ""] for e in top]
    summary = ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()))
    return (f"<p>{len(edges)} links ({escape(summary)}); the {len(top)} strongest:</p>"
            + chart + _table(["kind", "cause", "effect", "weight", "lag", "evidence",
                              "relationship"], rows))


def build_report(g: Any) -> str:
    """The report's HTML for an open ``Grimoire`` (read-only use is enough)."""
    ctx = g.context
    status = g.status()
    episodes_html, n_episodes = _episodes_section(ctx)
    graph = status.get("graph") or {}
    hit = (status.get("health") or {}).get("retrieval_hit_rate") or {}
    cycle = status.get("last_curator_cycle") or {}
    retr = ctx.semantic.retrieval_counts()
    hit_value = hit.get("value")
    hit_text = ("not enough reported outcomes yet" if hit_value is None
                else f"{float(hit_value):.0%} of {hit.get('n')} reported retrievals")
    sections = [
        f"<h1>Grimoire report</h1><p class='muted'>{escape(str(status.get('data_dir')))}"
        f" · generated {_when(ctx.now())} UTC · tick {status.get('tick')} · "
        f"{n_episodes} episodes · curator cycle {cycle.get('cycle', 0)}</p>",
        "<h2>What was learned</h2>", _rules_section(ctx),
        "<h2>Episodes</h2>", episodes_html,
        "<h2>Retrieval</h2>",
        f"<p>{retr.get('total', 0)} retrievals logged, {retr.get('reported', 0)} with a "
        f"reported outcome; hit rate: {escape(hit_text)}. (Latency is not recorded per "
        "retrieval; each answer carries its own <code>trace.ms</code>.)</p>",
        stacked_bars("retrieval outcomes", ["retrievals"],
                     {k: [float(v)] for k, v in retr.items() if k not in ("total",)
                      and isinstance(v, int) and v}
                     or {"none": [0.0]}),
        "<h2>Knowledge graph</h2>",
        f"<p>{graph.get('triples', 0)} facts ({graph.get('open', 0)} open, "
        f"{graph.get('closed', 0)} closed) about {graph.get('subjects', 0)} subjects.</p>",
        stacked_bars("knowledge graph facts", ["facts"],
                     {"open": [float(graph.get("open", 0))],
                      "closed": [float(graph.get("closed", 0))]}),
        "<h2>Causal links</h2>", _links_section(ctx),
    ]
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<title>Grimoire report</title>"
            f"<style>{CSS}</style></head><body>{''.join(sections)}</body></html>\n")
