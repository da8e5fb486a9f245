"""The prompts of the optional LLM paths, and the parsers of their answers.

Owns the wording sent to the model and the one place that decides whether an
answer is usable: every parser either returns a validated value or raises
``LLMError`` (the caller then falls back to the rule-based path). Prompts:

- future utility (SPEC §5): "Will this be useful for future decisions in
  similar conditions?" → ``{"future_utility": 0..1}``;
- ExpeL distillation: a compact statistical summary of the episodes plus the
  most recent ones → ``{"claims": [{"condition", "target", "direction"}]}``
  in the distiller's vocabulary (the numbers are recomputed from the data,
  ``verify``);
- causality judgement (seed 001): "did X directly lead to Y?" → ``Yes: …`` /
  ``No.``;
- hierarchical summaries (seed 002): the measured facts of an L1 session (or
  L2 chapter) and a sample of its episode (or L1) texts → a few sentences of
  plain prose. The answer is checked: bounded length, no refusal, markup or
  JSON, and no number the prompt did not contain (the facts are measured, the
  model may only restate them).

Pure: text in, text out. Must not: call the LLM or read stores.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from curator.distiller.features import actions_of
from curator.views.render import format_number
from grimoire.errors import LLMError
from grimoire.guard.instructions import is_marked
from grimoire.models.llm import parse_json_answer
from grimoire.records import Episode, EpisodeType, Outcome

__all__ = [
    "causality_messages",
    "expel_messages",
    "parse_causality",
    "parse_claims",
    "parse_summary",
    "parse_utility",
    "summary_messages",
    "utility_messages",
]

Messages = list[dict[str, str]]
_SYSTEM = ("You help curate the long-term memory of an autonomous on-chain trading agent. "
           "Be literal and brief; never invent numbers.")
_MAX_TEXT = 200
_BLOCK_HOURS = 3


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utility_messages(category: str, content: str) -> Messages:
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": (
                f"Candidate {category} for the agent's memory: \"{_clip(content, 600)}\"\n"
                "Will this be useful for future decisions in similar conditions? Answer with "
                "JSON only: {\"future_utility\": <a number from 0 (useless) to 1 (very "
                "useful)>}.")}]


def parse_utility(text: str) -> float:
    answer = parse_json_answer(text)
    value = answer.get("future_utility") if isinstance(answer, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
            value) or not 0.0 <= value <= 1.0:
        raise LLMError(f"future_utility must be a number in [0, 1], got {value!r}")
    return float(value)


def causality_messages(cause: str, effect: str) -> Messages:
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": (
                f"Based on the preceding event: '{_clip(cause)}', did it directly lead to the "
                f"following event: '{_clip(effect)}'? If yes, answer 'Yes: ' and one sentence "
                "on the relationship. If no, simply respond with 'No.'")}]


def parse_causality(text: str) -> tuple[bool, str | None]:
    """(linked, relationship sentence) from a "Yes: …" / "No." answer."""
    answer = text.strip().strip("*\"' ")
    head = answer[:3].lower()
    if head.startswith("no") and (len(answer) == 2 or not answer[2].isalpha()):
        return False, None
    if head == "yes":
        sentence = answer[3:].lstrip(":.,;- ").strip()
        return True, _clip(sentence) if sentence else None
    raise LLMError(f"unrecognised causality judgement: {_clip(answer, 80)!r}")


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _rates(episodes: Sequence[Episode], min_support: int) -> list[str]:
    """Negative-outcome rates of actions, alone and by regime / token pair / both."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for ep in episodes:
        if ep.type is not EpisodeType.ACTION or ep.outcome is Outcome.DESCRIPTIVE:
            continue
        bad = int(ep.outcome is Outcome.NEGATIVE)
        regime = ep.regime.value if ep.regime else "-"
        pair = ep.token_pair or "-"
        for action in actions_of(ep):
            for key in ((action,), (action, f"regime={regime}"), (action, f"token_pair={pair}"),
                        (action, f"regime={regime}", f"token_pair={pair}")):
                cell = groups.setdefault(key, [0, 0])
                cell[0] += 1
                cell[1] += bad
    return [f"  {' | '.join(key)}: n={n}, negative {round(100 * bad / n)}%"
            for key, (n, bad) in sorted(groups.items()) if n >= min_support]


def _metric_lines(episodes: Sequence[Episode], skip: set[str]) -> list[str]:
    sums: dict[str, dict[str, list[float]]] = {}
    for ep in episodes:
        regime = f"regime {ep.regime.value}" if ep.regime else None
        block = (ep.timestamp // 3_600_000) % 24 // _BLOCK_HOURS * _BLOCK_HOURS
        hours = f"{block:02d}-{block + _BLOCK_HOURS:02d} UTC"
        for name, value in ep.metrics.items():
            if name in skip:
                continue
            for key in ("overall", regime, hours):
                if key:
                    cell = sums.setdefault(name, {}).setdefault(key, [0.0, 0.0])
                    cell[0] += value
                    cell[1] += 1
    lines = []
    for name, cells in sorted(sums.items()):
        parts = [f"{key} {format_number(total / n)}" for key, (total, n) in
                 sorted(cells.items(), key=lambda kv: (kv[0] != "overall", kv[0]))]
        lines.append(f"  {name}: " + "; ".join(parts))
    return lines


def expel_messages(episodes: Sequence[Episode], strategy: str | None, *, max_claims: int,
                   sample: int, min_support: int, skip_metrics: set[str]) -> Messages:
    """The ExpeL distillation prompt: statistics of the batch and its latest episodes."""
    types = Counter(ep.type.value for ep in episodes)
    who = f"strategy {strategy}" if strategy else "global (episodes without a strategy)"
    lines = [f"Episodes of {who}: {len(episodes)}"
             + (f", {_time(episodes[0].timestamp)} to {_time(episodes[-1].timestamp)} UTC"
                if episodes else ""),
             "Types: " + ", ".join(f"{k} {n}" for k, n in sorted(types.items()))]
    rates = _rates(episodes, min_support)
    if rates:
        lines += ["Action outcomes (n, share negative):", *rates]
    metrics = _metric_lines(episodes, skip_metrics)
    if metrics:
        lines += ["Metric means (overall; by regime; by time of day):", *metrics]
    # Text marked as instructing a model never reaches the model that proposes rules.
    quoted = [ep for ep in episodes if not is_marked(ep.marks)][-sample:]
    lines += ["Most recent episodes:",
              *(f"  [{_time(ep.timestamp)}] {_clip(ep.text)}" for ep in quoted)]
    task = (
        f"Propose at most {max_claims} regularities the agent could act on. Conditions use only "
        "these keys: regime, token_pair, chain, tool, action (strings), hour_window "
        "([start, end] UTC hours, end exclusive), metric_band ([metric, \"lower\" | \"upper\"]: "
        "its bottom or top third). Targets: \"metric:<name>\" (its mean, direction \"higher\" "
        "or \"lower\" than overall) or \"outcome:negative_rate\" / \"outcome:positive_rate\" "
        "(share of action episodes, direction \"higher\"; include \"action\" in the "
        "condition). Answer with JSON only: {\"claims\": [{\"condition\": {...}, \"target\": "
        "\"...\", \"direction\": \"higher\"}]}. Propose nothing the numbers do not show; an "
        "empty list is a good answer.")
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "\n".join(lines) + "\n\n" + task}]


def parse_claims(text: str, max_claims: int) -> list[Any]:
    """The proposed claims (unvalidated beyond their container; ``verify`` checks each)."""
    answer = parse_json_answer(text)
    claims = answer.get("claims") if isinstance(answer, Mapping) else None
    if not isinstance(claims, list):
        raise LLMError("the ExpeL answer has no \"claims\" list")
    return claims[:max_claims]


# -- hierarchical summaries (seed 002) ------------------------------------------------------

SUMMARY_TASK = "Write a short factual summary"  # how the prompt asks (tests find it by this)
SUMMARY_MAX_CHARS = 900  # a longer answer is not a short summary: the extractive text stands
_SUMMARY_MIN_WORDS = 4
_SUMMARY_FACTS_CHARS = 2_000
_SUMMARY_EXCERPT_CHARS = {1: _MAX_TEXT, 2: 400}
_REFUSALS = ("i cannot", "i can't", "i can not", "i am unable", "i'm unable", "i'm sorry",
             "i am sorry", "sorry", "as an ai", "as a language model")
_LABEL = re.compile(r"^(?:(?:l[12]\s+)?(?:session|chapter)?\s*summary|here is[^:]*)\s*:\s*",
                    re.IGNORECASE)
# A number on its own (not the "3" of "uniswap_v3"), with optional thousands separators.
_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")


def _spread(items: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` distinct texts, evenly spread over ``items`` (first and last kept)."""
    distinct = list(dict.fromkeys(" ".join(t.split()) for t in items if t.strip()))
    if len(distinct) <= limit:
        return distinct
    if limit <= 1:
        return distinct[:limit]
    step = (len(distinct) - 1) / (limit - 1)
    return [distinct[round(i * step)] for i in range(limit)]


def summary_messages(level: int, facts: str, excerpts: Sequence[str], *,
                     max_excerpts: int) -> Messages:
    """The summary prompt: measured facts plus a sample of the sources (episodes or L1s).

    No digit appears in the instructions, so every number in the prompt comes from the
    data (``parse_summary`` checks the answer against it).
    """
    if level not in (1, 2):
        raise LLMError(f"summary level must be 1 or 2, got {level!r}")
    what = "session" if level == 1 else "chapter"
    sources = "Episodes of the session" if level == 1 else "Session summaries of the chapter"
    limit = _SUMMARY_EXCERPT_CHARS[level]
    lines = [f"Measured facts of one {what} of the agent's memory (computed from the data):",
             _clip(facts, _SUMMARY_FACTS_CHARS), "",
             f"{sources}, oldest first (a sample):",
             *(f"- {_clip(text, limit)}" for text in _spread(excerpts, max_excerpts))]
    task = (f"{SUMMARY_TASK} of this {what} for the agent's long-term memory, in at most "
            "three plain sentences: what happened, under which conditions, and how it turned "
            "out. Use only numbers that appear above and do not contradict the measured facts; "
            "no advice, no speculation, no lists, no preamble.")
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "\n".join(lines) + "\n\n" + task}]


def _numbers(text: str) -> list[str]:
    return [m.replace(",", "") for m in _NUMBER.findall(text)]


def _stated(number: str, known: set[float]) -> bool:
    """Whether ``number`` is one of ``known`` as written or rounded to its decimals."""
    value = float(number)
    decimals = len(number.partition(".")[2])
    return value in known or any(round(k, decimals) == value for k in known)


def parse_summary(text: str, prompt: str) -> str:
    """The model's summary on one line, or ``LLMError`` when it is not a usable one."""
    answer = " ".join(text.replace("```", " ").split()).strip("*_\"'“” ")
    answer = _LABEL.sub("", answer, count=1).strip("*_\"'“” ")
    if not answer:
        raise LLMError("the summary is empty")
    if len(answer) > SUMMARY_MAX_CHARS:
        raise LLMError(f"the summary is {len(answer)} characters long (at most "
                       f"{SUMMARY_MAX_CHARS})")
    words = re.findall(r"[^\W\d_]{2,}", answer)
    if len(words) < _SUMMARY_MIN_WORDS or any(c in answer for c in "{}[]"):
        raise LLMError(f"the summary is not prose: {_clip(answer, 80)!r}")
    if answer.lower().startswith(_REFUSALS):
        raise LLMError(f"the model declined: {_clip(answer, 80)!r}")
    known = {float(n) for n in _numbers(prompt)}
    invented = [n for n in _numbers(answer) if not _stated(n, known)]
    if invented:
        raise LLMError(f"the summary states numbers the data does not: {invented[:5]}")
    return answer
