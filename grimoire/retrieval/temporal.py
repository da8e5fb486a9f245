"""Temporal expressions in a query resolved to a window of episode timestamps (no LLM).

"in May 2023", "on 13 October, 2023", "in June", "in 2023", "yesterday", "last week",
"last month", "last year", "3 days ago" become a ``[start, end)`` window in unix ms,
resolved against the instant the retrieval ranks at (``at``, else now). The pipeline then
searches the window by vector as one more candidate list (``temporal.episode``, fused like
the others), so an episode from the named time enters the pool and is preferred, and the
trace reports the window.

Conversations talk about an event after it happened ("last week I went…"), so a month or
a year is extended by ``SLACK_MS`` (a week) after its end; a day keeps a day either side
(time zones). A month named without a year is its latest occurrence that has started by
the reference instant. Dates are UTC. Must not read a store.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["SLACK_MS", "Window", "resolve"]

DAY_MS = 86_400_000
SLACK_MS = 7 * DAY_MS

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b",
                        re.I)
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I)
# A month without a year only after a preposition: "May I…" is not a date.
_MONTH_ALONE = re.compile(rf"\b(?:in|during|since|of|early|late|mid)\s+{_MONTH}\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b", re.I)
_AGO = re.compile(r"\b(\d{1,3}|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+"
                  r"ago\b", re.I)
_RELATIVE = re.compile(r"\b(yesterday|today|last\s+(?:week(?:end)?|month|year|night)|"
                       r"this\s+(?:week(?:end)?|month|year)|recently)\b", re.I)
_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_MS = {"day": DAY_MS, "week": 7 * DAY_MS, "month": 30 * DAY_MS, "year": 365 * DAY_MS}


@dataclass(frozen=True, slots=True)
class Window:
    """``[start, end)`` in unix ms, and the words of the query it was read from."""

    start: int
    end: int
    text: str


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _day(year: int, month: int, day: int, text: str) -> Window | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return Window(_ms(start) - DAY_MS, _ms(start) + 2 * DAY_MS, text)


def _month(year: int, month: int, text: str) -> Window:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return Window(_ms(start), _ms(end) + SLACK_MS, text)


def _relative(word: str, ref: datetime) -> Window:
    word = " ".join(word.lower().split())
    today = ref.replace(hour=0, minute=0, second=0, microsecond=0)
    ref_ms = _ms(ref)
    if word in ("today", "this week", "this weekend"):
        days = 0 if word == "today" else 7
        return Window(_ms(today - timedelta(days=days)), ref_ms + DAY_MS, word)
    if word in ("yesterday", "last night"):
        return Window(_ms(today - timedelta(days=1)) - DAY_MS, _ms(today) + DAY_MS, word)
    if word in ("last week", "last weekend"):
        return Window(_ms(today - timedelta(days=14)), ref_ms + DAY_MS, word)
    if word in ("this month", "recently"):
        return Window(_ms(today - timedelta(days=31)), ref_ms + DAY_MS, word)
    if word == "last month":
        return Window(_ms(today - timedelta(days=62)), ref_ms + DAY_MS, word)
    if word == "this year":
        return Window(_ms(today.replace(month=1, day=1)), ref_ms + DAY_MS, word)
    # last year: the previous calendar year
    start = today.replace(year=today.year - 1, month=1, day=1)
    return Window(_ms(start), _ms(start.replace(year=today.year)) + SLACK_MS, word)


def resolve(query: str, ref_ms: int) -> Window | None:
    """The first (most specific) temporal expression of ``query`` as a window, or None."""
    ref = datetime.fromtimestamp(ref_ms / 1000, tz=UTC)
    if (m := _DAY_FIRST.search(query)) is not None:
        return _day(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)), m.group(0))
    if (m := _MONTH_FIRST.search(query)) is not None:
        return _day(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)), m.group(0))
    if (m := _MONTH_YEAR.search(query)) is not None:
        return _month(int(m.group(2)), _MONTHS[m.group(1).lower()], m.group(0))
    if (m := _MONTH_ALONE.search(query)) is not None:
        month = _MONTHS[m.group(1).lower()]
        year = ref.year if month <= ref.month else ref.year - 1
        return _month(year, month, m.group(0))
    if (m := _YEAR.search(query)) is not None:
        year = int(m.group(1))
        return Window(_ms(datetime(year, 1, 1, tzinfo=UTC)),
                      _ms(datetime(year + 1, 1, 1, tzinfo=UTC)) + SLACK_MS, m.group(0))
    if (m := _AGO.search(query)) is not None:
        count = _WORDS.get(m.group(1).lower()) or int(m.group(1))
        unit = _UNIT_MS[m.group(2).lower()]
        centre = ref_ms - count * unit
        return Window(centre - unit, centre + unit, m.group(0))
    if (m := _RELATIVE.search(query)) is not None:
        return _relative(m.group(1), ref)
    return None
