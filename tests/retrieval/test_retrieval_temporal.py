"""Temporal expressions resolved against episode timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from grimoire.clock import FrozenClock
from grimoire.retrieval.temporal import DAY_MS, SLACK_MS, resolve
from tests.retrieval.retrieve_support import ids, open_grimoire


def ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


REF = ms(2023, 11, 1)


def test_explicit_dates_months_and_years() -> None:
    day = resolve("What did she show on October 13, 2023?", REF)
    assert day is not None and (day.start, day.end) == (ms(2023, 10, 12), ms(2023, 10, 15))
    assert resolve("found on 1 February, 2023", REF).start == ms(2023, 1, 31)  # type: ignore[union-attr]
    month = resolve("What setback did she face in October 2023?", REF)
    assert month is not None and (month.start, month.end) == (
        ms(2023, 10, 1), ms(2023, 11, 1) + SLACK_MS)
    year = resolve("the beach in 2022", REF)
    assert year is not None and year.start == ms(2022, 1, 1)


def test_month_without_year_is_its_latest_occurrence() -> None:
    june = resolve("When did Melanie go camping in June?", REF)
    assert june is not None and june.start == ms(2023, 6, 1)
    december = resolve("camping in December", REF)
    assert december is not None and december.start == ms(2022, 12, 1)


def test_relative_expressions_and_non_dates() -> None:
    week = resolve("what happened last week", REF)
    assert week is not None and week.start <= REF - 7 * DAY_MS and week.end > REF
    ago = resolve("the swap 3 days ago", REF)
    assert ago is not None and ago.start < REF - 3 * DAY_MS < ago.end
    assert resolve("May I ask what you ate?", REF) is None
    assert resolve("gas is cheap", REF) is None


def _first(tmp_path: Path, temporal: bool) -> tuple[str, str]:
    clock = FrozenClock(ms(2023, 12, 1))
    with open_grimoire(tmp_path, clock, **{"retrieval.temporal": temporal}) as g:
        march = g.episode_write(text="we had dinner at the harbour restaurant with Ann",
                                timestamp=ms(2023, 3, 10))["id"]
        for month, name in ((5, "Bob"), (7, "Cy"), (9, "Dee"), (11, "Eve")):
            g.episode_write(text=f"we had dinner at the harbour restaurant with {name}",
                            timestamp=ms(2023, month, 10))
        found = g.retrieve(query="dinner at the harbour restaurant in March 2023",
                           kinds=["episode"], k=3, mode="browse")
        return ids(found)[0], march


def test_only_the_time_window_puts_the_march_dinner_first(tmp_path: Path) -> None:
    first, march = _first(tmp_path / "on", True)
    assert first == march
    first, march = _first(tmp_path / "off", False)
    assert first != march
