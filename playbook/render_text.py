"""Text pieces of PLAYBOOK.md: Markdown-safe cleaning, short ids, numbers, claim sentences.

Owns how one entry's words become one safe line of Markdown. It must not
decide which entries appear or in what order (that is ``compiler``), and it
imports nothing from Grimoire but records and ids. Every function is pure and
deterministic: no locale, no wall clock, fixed float formats.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from grimoire.ids import shared_prefix_len
from grimoire.records import Category, Claim, GrimoireEntry

__all__ = [
    "MAX_FIELD_CHARS",
    "clean_inline",
    "effect_words",
    "entry_sentence",
    "fmt_number",
    "fmt_percent",
    "metric_label",
    "render_claim",
    "short_ids",
]

MAX_FIELD_CHARS = 400
SHORT_ID_CHARS = 8

# Characters that end a line in some renderer or editor (not only \n): a line
# break inside an entry must never reach the file, or the entry could open a
# heading, a code fence or a new front-matter block.
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
_SPACES = re.compile(r"\s+")
# Block-level markers that mean something at the start of a Markdown line
# (heading, quote, list, rule, table, fence, front matter). Entries never start
# a line in our layout, but a field may be shown first in some viewer, so we
# strip them there too.
_LEADING_MARKERS = re.compile(r"^(?:[#>*+=|~`_-]+|\d+[.)])\s*")
# "<" that would start inline HTML (a tag, a comment, a declaration): an entry
# could otherwise hide the rest of the file in rendered view with "<!--".
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


def clean_inline(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """One line of plain text that cannot change the layout of the Markdown around it.

    Line breaks and runs of whitespace become one space; control and format
    characters (including bidi overrides) are removed; leading block markers
    are stripped; an HTML opener ``<x`` is escaped as ``\\<x``; backticks
    become apostrophes (so an entry cannot open a code span over our ids); the
    result is cut to ``limit`` characters with an ellipsis.
    """
    text = _LINE_BREAKS.sub(" ", text)
    if not text.isprintable():  # fast path: ordinary text has nothing to remove
        text = "".join(ch for ch in text
                       if unicodedata.category(ch) not in {"Cc", "Cf", "Cs", "Co", "Cn"})
    text = _SPACES.sub(" ", text).strip()
    previous = None
    while previous != text:  # "# - > x" has several markers in a row
        previous = text
        text = _LEADING_MARKERS.sub("", text).strip()
    text = text.replace("`", "'")
    text = _HTML_START.sub(r"\\<", text)
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
        if text.endswith("\\…"):  # never leave a dangling escape before the ellipsis
            text = text[:-2] + "…"
    return text


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Map each id to its shortest prefix of at least 8 characters unique among ``ids``.

    UUIDv7 ids start with the creation time, so the first 8 characters are
    shared by every entry made in the same ~65 seconds; a fixed 8-character
    prefix would be ambiguous for ``grimoire explain``. Like git, we lengthen
    a prefix only where it collides, so most ids stay 8 characters.
    """
    unique = sorted(set(ids))
    out: dict[str, str] = {}
    for i, id_ in enumerate(unique):
        need = SHORT_ID_CHARS
        for j in (i - 1, i + 1):  # in sorted order the longest shared prefix is a neighbour
            if 0 <= j < len(unique):
                need = max(need, shared_prefix_len(id_, unique[j]) + 1)
        out[id_] = id_[: min(need, len(id_))]
    return out



def fmt_number(value: float) -> str:
    """A short, stable rendering of a measured value for a person: at most three significant
    figures past the thousands (2528932 → 2.53M, 12840 → 12.8k, 3441.7 → 3,442, 20.79 → 20.8,
    6.564 → 6.56); no locale, no exponent."""
    magnitude = abs(value)
    if magnitude >= 1e4:
        for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "B")):
            scaled = _three_figures(value / scale)
            if abs(float(scaled)) < 1000 or suffix == "B":  # 999,960 rounds up: 1M
                return f"{scaled}{suffix}"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    return _three_figures(value)


def _three_figures(value: float) -> str:
    magnitude = abs(value)
    text = f"{value:.0f}" if magnitude >= 100 else f"{value:.1f}" if magnitude >= 10 else (
        f"{value:.2f}")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in {"-0", ""} else text


def fmt_percent(rate: float) -> str:
    """A rate (0..1) as a person reads it: whole percents from 10% up (82.94% → 83%), one
    decimal below (4.62% → 4.6%)."""
    pct = 100 * rate
    text = f"{pct:.0f}" if abs(pct) >= 9.95 else f"{pct:.1f}".rstrip("0").rstrip(".")
    return f"{'0' if text in {'-0', ''} else text}%"


def effect_words(effect: float, baseline: float, *, rate: bool = False) -> str:
    """How far the value under the condition is from the rest, in plain words: "34% higher",
    "2.1 times as often", "12 bps lower" (a difference where a ratio means nothing)."""
    if effect == baseline:
        return "no different"
    higher = effect > baseline
    if baseline > 0 and effect >= 0:
        ratio = effect / baseline
        if ratio >= 2:
            return f"{_three_figures(ratio)} times as {'often' if rate else 'high'}"
        change = abs(ratio - 1)
        word = ("more often" if higher else "less often") if rate else (
            "higher" if higher else "lower")
        return f"{fmt_percent(change)} {word}"
    return f"{fmt_number(abs(effect - baseline))} {'higher' if higher else 'lower'}"


_UNITS = {"gwei": "gwei", "bps": "bps", "usd": "USD", "pct": "%", "ms": "ms", "s": "s"}


def metric_label(name: str) -> tuple[str, str]:
    """``gas_gwei`` → (``gas``, ``gwei``); a name without a known unit suffix has no unit."""
    head, _, tail = name.rpartition("_")
    if head and tail in _UNITS:
        return head.replace("_", " "), _UNITS[tail]
    return name.replace("_", " "), ""


def _with_unit(value: float, unit: str) -> str:
    if not unit:
        return fmt_number(value)
    if unit == "%":
        return f"{fmt_number(value)}%"
    return f"{fmt_number(value)} {unit}"


# Condition keys rendered in this order (the rest follow alphabetically), so
# that the same claim always reads the same way.
_KEY_ORDER = ("regime", "strategy", "tool", "chain", "token_pair", "type", "hour_window")
_ACTION_KEYS = ("action", "actions")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return fmt_number(float(value))
    if isinstance(value, list | tuple):
        return ", ".join(_value_text(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_value_text(v)}" for k, v in sorted(value.items(), key=str))
    return str(value)


def _band_part(value: Any, cut: float) -> str:
    """``["gas_gwei", "upper"]`` cut at 31.2 → "gas is above 31.2 gwei" (the distiller's band:
    the metric at or above the cut, or at or below it)."""
    label, unit = metric_label(str(value[0]))
    return f"{label} is {'above' if value[1] == 'upper' else 'below'} {_with_unit(cut, unit)}"


def _condition_part(key: str, value: Any) -> str:
    if key == "hour_window" and isinstance(value, list | tuple) and len(value) == 2:
        start, end = (int(v) for v in value)
        return f"the hour is {start:02d}:00–{end:02d}:00 UTC"
    if key == "regime":
        return f"the market regime is {_value_text(value)}"
    if key == "token_pair":
        return f"trading {_value_text(value)}"
    if key == "tool":
        return f"using {_value_text(value)}"
    if key == "chain":
        return f"on {_value_text(value)}"
    if key == "strategy":
        return f"running {_value_text(value)}"
    if key == "type":
        return f"after a {_value_text(value)} episode"
    label, unit = metric_label(key)
    if isinstance(value, list | tuple) and len(value) == 2 and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return f"{label} is {_with_unit(float(value[0]), unit)}–{_with_unit(float(value[1]), unit)}"
    if isinstance(value, list | tuple) and len(value) == 2 and value[0] in {"<", "<=", ">", ">="}:
        op = {"<": "below", "<=": "at most", ">": "above", ">=": "at least"}[str(value[0])]
        number = value[1]
        shown = _with_unit(float(number), unit) if isinstance(number, int | float) else str(number)
        return f"{label} is {op} {shown}"
    return f"{label} is {_value_text(value)}"


def _condition_text(condition: Mapping[str, Any], band_cut: float | None = None, *,
                    action: bool = False) -> str:
    """The condition in words; the action it names only with ``action`` (a rule states
    its action as its verb, "Avoid swap when …"; an insight has no verb and must name it,
    or "return averages 8.5 bps" of add_liquidity reads as the strategy's whole return)."""
    keys = [k for k in condition if k not in _ACTION_KEYS]
    ordered = [k for k in _KEY_ORDER if k in keys] + sorted(k for k in keys if k not in _KEY_ORDER)
    parts = [_band_part(condition[k], band_cut) if k == "metric_band" and band_cut is not None
             else _condition_part(k, condition[k]) for k in ordered]
    done = [condition[k] for k in _ACTION_KEYS if condition.get(k)] if action else []
    if done:
        what = done[0]
        names = [str(v) for v in what] if isinstance(what, list | tuple) else [str(what)]
        parts.insert(0, f"the action is {' or '.join(names)}")
    return " and ".join(parts)


def _is_band(value: Any) -> bool:
    return (isinstance(value, list | tuple) and len(value) == 2
            and value[1] in ("upper", "lower"))


def _reason_text(claim: Claim) -> str:
    n = f"{claim.support} episodes"
    kind, _, name = claim.target.partition(":")
    if kind == "metric" and name:
        label, unit = metric_label(name)
        return (f"{label} averages {_with_unit(claim.effect, unit)} "
                f"(vs {_with_unit(claim.baseline, unit)} otherwise: "
                f"{effect_words(claim.effect, claim.baseline)}; {n})")
    if kind == "outcome" and name.endswith("_rate"):
        what = name[: -len("_rate")].replace("_", " ")
        return (f"{what} outcomes happen {fmt_percent(claim.effect)} of the time "
                f"(vs {fmt_percent(claim.baseline)} overall: "
                f"{effect_words(claim.effect, claim.baseline, rate=True)}; {n})")
    return (f"{claim.target.replace('_', ' ')} is {claim.direction} "
            f"({fmt_number(claim.effect)} vs {fmt_number(claim.baseline)}; {n})")


_DO_ACTION = re.compile(r"\b(?:do|prefer)\s+(?P<a>.+?)\s+because\b", re.IGNORECASE)
_AVOID_ACTION = re.compile(r"^\s*avoid\s+(?P<a>.+?)(?:\s+(?:when|during|if|while)\b|$)",
                           re.IGNORECASE)


def _action_text(claim: Claim, category: Category, content: str) -> str | None:
    for key in _ACTION_KEYS:
        value = claim.condition.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list | tuple) and value:
            return " or ".join(str(v) for v in value)
    pattern = _AVOID_ACTION if category is Category.WARNING else _DO_ACTION
    match = pattern.search(content)
    return match.group("a").strip() if match else None


def _event_text(claim: Claim) -> str | None:
    """A causal link's sentence from its current totals (refreshed every cycle)."""
    cause = claim.condition.get("event")
    within = claim.condition.get("within_ms")
    if not isinstance(cause, str) or not isinstance(within, int | float) or within <= 0:
        return None
    minutes = fmt_number(float(within) / 60_000)
    follow = claim.target.removeprefix("event:").replace("_", " ")
    hits = round(claim.effect * claim.support)
    if hits <= 0:
        return None  # not seen followed (e.g. only asserted): the entry's own words say so
    return (f"A {cause.replace('_', ' ')} is followed by a {follow} within "
            f"{minutes} min: {hits} of {claim.support} times ({fmt_number(claim.effect * 100)}% "
            f"vs {fmt_number(claim.baseline * 100)}% for any {minutes} min window).")


def render_claim(claim: Claim, category: Category, content: str) -> str | None:
    """The entry's sentence built from its structured claim, or None if the claim lacks parts.

    Heuristic: "When <condition>, do <action> because <reason>." Warning:
    "Avoid <action> when <condition> because <reason>." A strategy's claim names it first
    in the condition ("the strategy is eth-dca and …"). When the claim's current numbers
    run against its direction (the outcome reversed), the reason reads "it held before,
    but no longer: <reason>", so the sentence never gives as its reason numbers that
    contradict it. Insight (and other
    descriptive kinds): "When <condition>, <reason>." The action comes from the
    claim's condition (``action``/``actions``) or, failing that, from the
    entry's own content ("do X because", "Avoid X when"); without one a
    prescriptive sentence cannot be built and the caller shows the content.
    The result is not yet Markdown-safe: pass it through ``clean_inline``.
    """
    if claim.target.startswith("event:"):
        return _event_text(claim)
    band = claim.condition.get("metric_band")
    if band is not None and (claim.band_cut is None or not _is_band(band)):
        return None  # a band stored without its cut: the entry's own words state it
    prescriptive = category in (Category.HEURISTIC, Category.WARNING)
    condition = _condition_text(claim.condition, claim.band_cut, action=not prescriptive)
    if claim.strategy is not None:
        # The scope is part of what the claim says: shown alone (a retrieval, an MCP answer,
        # the entry list) a strategy's rule must not read as everyone's.
        scope = f"the strategy is {claim.strategy}"
        condition = f"{scope} and {condition}" if condition else scope
    reason = _reason_text(claim)
    if prescriptive:
        action = _action_text(claim, category, content)
        if action is None:
            return None
        if _runs_against(claim):
            # The latest numbers contradict the advice: say so instead of giving them as
            # its reason ("do swap because positive outcomes happen 63% (vs 75% overall)").
            reason = f"it held before, but no longer: {reason}"
        if category is Category.WARNING:
            when = f" when {condition}" if condition else ""
            return f"Avoid {action}{when} because {reason}."
        if condition:
            return f"When {condition}, do {action} because {reason}."
        return f"Do {action} because {reason}."
    if condition:
        return f"When {condition}, {reason}."
    return f"{reason[0].upper()}{reason[1:]}."


def _runs_against(claim: Claim) -> bool:
    """Whether the claim's current numbers go the other way than its direction says (a rule
    whose outcome reversed, judged on the newer episodes); no difference at all is not a
    reversal."""
    return claim.effect != claim.baseline and not claim.states_its_direction()


def entry_sentence(entry: GrimoireEntry) -> str:
    """The words an entry is shown with, in every view (PLAYBOOK.md, ``entry.explain``,
    ``entry.list`` / ``entry.get``, the report, retrieval): its structured claim's sentence,
    built from the claim's current numbers (``render_claim``), else its own content.

    The curator stores this as the entry's content whenever the claim's numbers move
    (``curator.cycle.sentences``), so that each view, reading either the claim or the
    content, states the same figures. Not yet Markdown-safe: pass it through
    ``clean_inline`` for PLAYBOOK.md."""
    if entry.claim is not None:
        sentence = render_claim(entry.claim, entry.category, entry.content)
        if sentence is not None:
            return sentence
    return entry.content
