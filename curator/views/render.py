"""Owner-readable sentences for distilled claims (SPEC §3, §7).

Owns the wording of insights ("Gas averages 6.1 gwei (vs 23.8 overall)
between 02:00 and 04:00 UTC (n=41)."), warnings ("Avoid Y when X: ..."),
heuristics ("When X, do Y because ..."), causal links and contradictions.
Every sentence carries its numbers and support so that the owner can judge
it; the wording is deterministic (same claim in, same bytes out) because
PLAYBOOK.md must be. Must not: compute statistics or read stores.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from curator.distiller.operations import NEGATIVE_RATE
from grimoire.records import Claim

__all__ = [
    "band_cut_in",
    "describe_event",
    "format_duration",
    "format_number",
    "render_against",
    "render_causal",
    "render_claim",
]

_UNITS = frozenset({"gwei", "bps", "bp", "usd", "usdc", "eth", "pct", "ms", "s", "wei", "gas"})
_ACRONYMS = {"pnl": "PnL", "tvl": "TVL", "apy": "APY", "apr": "APR", "eth": "ETH"}


def format_number(x: float) -> str:
    """Three significant figures at most, never scientific notation for owner text."""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.1f}"
    return f"{x:.2g}" if abs(x) >= 1e-4 else f"{x:.6f}".rstrip("0")


def format_duration(ms: float) -> str:
    if ms < 60_000:
        return f"{ms / 1000:.0f} s"
    if ms < 3_600_000:
        minutes = ms / 60_000
        return f"{minutes:.0f} min" if minutes == int(minutes) else f"{minutes:.1f} min"
    hours = ms / 3_600_000
    return f"{hours:.0f} h" if hours == int(hours) else f"{hours:.1f} h"


def _percent(rate: float) -> str:
    return f"{round(100 * rate)}%"


def metric_label(name: str) -> tuple[str, str]:
    """``gas_gwei`` → ("gas", "gwei"); ``fees`` → ("fees", "")."""
    head, _, tail = name.rpartition("_")
    label, unit = (head, tail) if head and tail.lower() in _UNITS else (name, "")
    words = [_ACRONYMS.get(w.lower(), w) for w in label.split("_") if w]
    return " ".join(words) or name, unit


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _hour(h: int) -> str:
    return f"{int(h) % 24:02d}:00"


def _window_phrase(window: Sequence[int]) -> str:
    return f"between {_hour(window[0])} and {_hour(window[1])} UTC"


def _band_clause(band: Sequence[str], evidence: Mapping[str, Any]) -> str:
    metric, part = str(band[0]), str(band[1])
    label, unit = metric_label(metric)
    cut = evidence.get("band_cut")
    if isinstance(cut, int | float):
        return f"{label} is {_WHERE[part == 'upper']} {format_number(float(cut))}" + (
            f" {unit}" if unit else "")
    return f"{label} is in its {'top' if part == 'upper' else 'bottom'} third"


_WHERE = {True: "above", False: "below"}


def band_cut_in(sentence: str, band: object) -> float | None:
    """The cut point a band claim's sentence states ("when gas is above 31.2 gwei" → 31.2),
    as ``_band_clause`` wrote it; None when the sentence does not state one. Band claims
    stored before ``Claim.band_cut`` existed kept their cut only there."""
    if (not isinstance(band, list | tuple) or len(band) != 2
            or band[1] not in ("upper", "lower")):
        return None
    label, _ = metric_label(str(band[0]))
    found = re.search(rf"\b{re.escape(label)} is {_WHERE[band[1] == 'upper']} "
                      r"(-?\d[\d,]*(?:\.\d+)?)([kMB])?\b", sentence)
    if not found:
        return None
    # PLAYBOOK.md's figures: 3,442 and 2.53M (playbook.render_text.fmt_number)
    scale = {"k": 1e3, "M": 1e6, "B": 1e9}.get(found.group(2) or "", 1.0)
    return float(found.group(1).replace(",", "")) * scale


def _object_phrase(condition: Mapping[str, Any]) -> str:
    """The action and what it acts on: "swap on WETH/USDC on base via uniswap"."""
    parts = [str(condition.get("action", "trade"))]
    if "token_pair" in condition:
        parts.append(f"on {condition['token_pair']}")
    if "chain" in condition:
        parts.append(f"on {condition['chain']}")
    if "tool" in condition:
        parts.append(f"via {condition['tool']}")
    return " ".join(parts)


def _clauses(condition: Mapping[str, Any], evidence: Mapping[str, Any]) -> list[str]:
    """Context clauses usable after "when": regime, metric band, time of day."""
    out: list[str] = []
    if "regime" in condition:
        out.append(f"the regime is {condition['regime']}")
    if "metric_band" in condition:
        out.append(_band_clause(condition["metric_band"], evidence))
    if "hour_window" in condition:
        out.append(f"the time is {_window_phrase(condition['hour_window'])}")
    return out


def _metric_context(condition: Mapping[str, Any], evidence: Mapping[str, Any]) -> str:
    parts: list[str] = []
    if "action" in condition:
        parts.append(f"in {condition['action']} episodes")
    if "token_pair" in condition:
        parts.append(f"on {condition['token_pair']}")
    if "chain" in condition:
        parts.append(f"on {condition['chain']}")
    if "tool" in condition:
        parts.append(f"via {condition['tool']}")
    if "regime" in condition:
        parts.append(f"when the regime is {condition['regime']}")
    if "metric_band" in condition:
        parts.append(f"when {_band_clause(condition['metric_band'], evidence)}")
    if "hour_window" in condition:
        parts.append(_window_phrase(condition["hour_window"]))
    return " ".join(parts)


def _metric_core(claim: Claim, evidence: Mapping[str, Any]) -> str:
    label, unit = metric_label(claim.target.removeprefix("metric:"))
    unit_text = f" {unit}" if unit else ""
    context = _metric_context(claim.condition, evidence)
    return (f"{label} averages {format_number(claim.effect)}{unit_text} "
            f"(vs {format_number(claim.baseline)} overall){' ' + context if context else ''} "
            f"(n={claim.support})")


def _rate_numbers(claim: Claim, evidence: Mapping[str, Any], word: str) -> str:
    hits = evidence.get("hits")
    count = int(hits) if isinstance(hits, int | float) else round(claim.effect * claim.support)
    action = claim.condition.get("action")
    # a condition on an action is measured against that action's own rate
    versus = f"for {action} overall" if action and len(claim.condition) > 1 else "overall"
    return (f"{count} of {claim.support} were {word} "
            f"({_percent(claim.effect)} vs {_percent(claim.baseline)} {versus})")


def render_claim(claim: Claim, evidence: Mapping[str, Any] | None = None) -> str:
    """The sentence for a metric-level or outcome-rate claim."""
    ev = evidence or {}
    if claim.target.startswith("metric:"):
        return _capital(_metric_core(claim, ev)) + "."
    word = "negative" if claim.target == NEGATIVE_RATE else "positive"
    bad = (claim.target == NEGATIVE_RATE) == (claim.direction == "higher")
    what = _object_phrase(claim.condition)
    clauses = _clauses(claim.condition, ev)
    numbers = _rate_numbers(claim, ev, word)
    if bad:
        when = f" when {' and '.join(clauses)}" if clauses else ""
        return f"Avoid {what}{when}: {numbers}."
    when = " and ".join(clauses) if clauses else "choosing an action"
    return f"When {when}, do {what} because {numbers}."


def render_against(claim: Claim, evidence: Mapping[str, Any] | None = None) -> str:
    """The sentence for a DOWNVOTE: the contradicted claim with the numbers observed now."""
    ev = evidence or {}
    if claim.target.startswith("metric:"):
        return f"Not confirmed by recent episodes: {_metric_core(claim, ev)}."
    if claim.target.startswith("event:"):
        return "Not confirmed by recent episodes: " + _causal_core(claim, ev) + "."
    word = "negative" if claim.target == NEGATIVE_RATE else "positive"
    what = _object_phrase(claim.condition)
    clauses = _clauses(claim.condition, ev)
    when = f" when {' and '.join(clauses)}" if clauses else ""
    return (f"Not confirmed by recent episodes: {what}{when}: "
            f"{_rate_numbers(claim, ev, word)}.")


def describe_event(label: str) -> str:
    """``regime_shift`` → "a regime shift"; ``action:swap:negative`` → "a negative swap"."""
    parts = label.split(":")
    if parts[0] == "action" and len(parts) >= 2:
        noun = parts[1].replace("_", " ")
        text = f"{parts[2]} {noun}" if len(parts) >= 3 else noun
    else:
        text = label.replace("_", " ").replace(":", " ")
    article = "an" if text[:1].lower() in "aeiou" else "a"
    return f"{article} {text}"


def _causal_core(claim: Claim, evidence: Mapping[str, Any]) -> str:
    cause = describe_event(str(claim.condition.get("event", "?")))
    effect = describe_event(claim.target.removeprefix("event:"))
    within = format_duration(float(claim.condition.get("within_ms", 0)))
    followed = evidence.get("followed")
    occurrences = evidence.get("occurrences")
    text = f"{cause} is followed by {effect} within {within}"
    kg = evidence.get("kg_evidence")
    if followed == 0 and isinstance(kg, int) and kg > 0:
        seen = (f": 0 of {occurrences} were followed within {within}"
                if isinstance(occurrences, int) and occurrences else "")
        return (f"{cause} leads to {effect} by {kg} explicit assertion{'s' * (kg != 1)} "
                f"(causal links the agent or the knowledge graph stated); recent episodes "
                f"do not show it yet{seen}")
    if isinstance(followed, int) and isinstance(occurrences, int) and occurrences > 0:
        text += (f": {followed} of {occurrences} times ({_percent(claim.effect)} vs "
                 f"{_percent(claim.baseline)} for any {within} window)")
    lag = evidence.get("lag_ms")
    if isinstance(lag, int | float) and followed:
        text += f", median lag {format_duration(float(lag))}"
    return text


def render_causal(claim: Claim, evidence: Mapping[str, Any] | None = None) -> str:
    """The sentence for a causal link found in episodes and/or asserted explicitly (the
    agent's causal.link and causal hints, or the knowledge graph)."""
    ev = evidence or {}
    text = _capital(_causal_core(claim, ev))
    kg = ev.get("kg_evidence")
    if isinstance(kg, int) and kg > 0 and ev.get("followed") != 0:
        text += f"; asserted explicitly {'once' if kg == 1 else f'{kg} times'}"
    return text + "."
