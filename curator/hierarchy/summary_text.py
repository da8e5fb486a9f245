"""Sentences of the extractive summaries: shared fields, outcomes, metric ranges, quotes.

Owns the wording of L1/L2 summaries (``curator.hierarchy.summaries``) so that module
keeps to the logic. Pure functions of episodes and numbers: fixed float
formats, UTC times from integer milliseconds, no locale, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from grimoire.records import Episode, Outcome, Regime

__all__ = [
    "GIST_MARK",
    "MAX_QUOTE",
    "as_regime",
    "fields_text",
    "highlight",
    "metrics_text",
    "outcomes_text",
    "period",
    "quote",
    "ranked",
    "shared_fields",
    "span",
    "tags",
]

MAX_QUOTE = 160
GIST_MARK = " Examples:"  # L2 quotes the first example after this mark in each L1


_SHARED_FIELDS = ("regime", "strategy", "tool", "token_pair", "chain")


def shared_fields(members: Sequence[Episode]) -> dict[str, str]:
    out = {}
    for name in _SHARED_FIELDS:
        values = {_field(m, name) for m in members}
        if len(values) == 1 and None not in values:
            out[name] = str(values.pop())
    return out


def _field(episode: Episode, name: str) -> str | None:
    value = getattr(episode, name)
    if isinstance(value, Regime):
        return value.value
    return None if value is None else str(value)


def fields_text(members: Sequence[Episode]) -> str:
    parts = []
    for name in _SHARED_FIELDS:
        counts = Counter(v for m in members if (v := _field(m, name)) is not None)
        if not counts:
            continue
        label = name.replace("_", " ")
        if len(counts) == 1 and sum(counts.values()) == len(members):
            parts.append(f"{label} {next(iter(counts))}")
        else:
            parts.append(f"{label} mixed (" + ", ".join(f"{k} {n}" for k, n in
                                                        ranked(counts)[:3]) + ")")
    return "; ".join(parts) + "." if parts else ""


def outcomes_text(members: Sequence[Episode]) -> str:
    counts = Counter(m.outcome for m in members if m.outcome is not Outcome.DESCRIPTIVE)
    parts = []
    if counts:
        parts.append("outcomes " + ", ".join(
            f"{counts[o]} {o.value}" for o in (Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL)
            if counts[o]))
    gains = [m.gain for m in members if m.gain is not None]
    if gains:
        parts.append(f"gain {_range(min(gains), max(gains), '')} (total {_num(sum(gains))})")
    return ("Outcomes: " + "; ".join(parts).removeprefix("outcomes ") + ".") if parts else ""


def metrics_text(members: Sequence[Episode]) -> str:
    names = sorted({k for m in members for k in m.metrics})
    parts = []
    for name in names:
        values = [m.metrics[name] for m in members if name in m.metrics]
        label, unit = _metric_label(name)
        text = f"{label} {_range(min(values), max(values), unit)}"
        if len(values) < len(members):
            text += f" (in {len(values)})"
        parts.append(text)
    return ("Metrics: " + "; ".join(parts) + ".") if parts else ""


_UNITS = {"gwei": "gwei", "bps": "bps", "usd": "USD", "pct": "%", "ms": "ms"}


def _metric_label(name: str) -> tuple[str, str]:
    head, _, tail = name.rpartition("_")
    if head and tail in _UNITS:
        return head.replace("_", " "), _UNITS[tail]
    return name.replace("_", " "), ""


def _num(value: float) -> str:
    text = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}" if abs(value) >= 10 \
        else f"{value:.2f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text == "-0" else text


def _range(low: float, high: float, unit: str) -> str:
    dash = " to " if low < 0 else "–"  # "-2–2" would read as a subtraction
    body = _num(low) if _num(low) == _num(high) else f"{_num(low)}{dash}{_num(high)}"
    return f"{body}{'' if not unit else '%' if unit == '%' else ' ' + unit}"


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _utc(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def span(start: int, end: int) -> str:
    a, b = _utc(start), _utc(end)
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC"
    return f"{a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M} UTC"


def period(members: Sequence[Episode]) -> str:
    return span(members[0].timestamp, members[-1].timestamp)


def quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_QUOTE else flat[: MAX_QUOTE - 1].rstrip() + "…"


def highlight(content: str) -> str:
    """An L1's most representative quote (its first example), else the start of its text."""
    _, mark, tail = content.partition(GIST_MARK)
    if mark and "“" in tail and "”" in tail.split("“", 1)[1]:
        return quote(tail.split("“", 1)[1].split("”", 1)[0])
    return quote(content)


def tags(level: int, shared: Mapping[str, str]) -> tuple[str, ...]:
    return ("summary", f"summary:l{level}", *(f"{k}:{v}" for k, v in sorted(shared.items())))


def as_regime(value: str | None) -> Regime | None:
    return None if value is None else Regime(value)
