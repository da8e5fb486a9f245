"""The jsonl feed: tailing complete lines, partial lines, bad lines, resuming at an offset."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.feeds import JsonlFeed

NOW = 1_767_225_600_000


def line(text: str, **extra: Any) -> bytes:
    return (json.dumps({"text": text, **extra}) + "\n").encode()


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def texts(eps: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in eps]


def bad_lines(logs: Sequence[Mapping[str, Any]]) -> list[int]:
    return [entry["line"] for entry in logs if entry["event"] == "feed.jsonl.bad_line"]


def test_returns_complete_lines_and_waits_for_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    append(path, line("one") + line("two", type="action", outcome="positive") + b'{"text": "th')
    feed = JsonlFeed(path)
    assert texts(feed.poll(0, NOW)) == ["one", "two"]
    assert feed.offset == len(line("one") + line("two", type="action", outcome="positive"))
    assert feed.poll(1, NOW) == []
    append(path, b'ree"}\n')
    assert texts(feed.poll(2, NOW)) == ["three"]
    assert feed.offset == path.stat().st_size
    assert feed.poll(3, NOW) == []
    assert feed.line == 3


def test_bad_lines_are_logged_with_their_number_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    append(path, line("ok 1") + b"not json\n" + b"[1, 2]\n" + b'{"type": "action"}\n'
           + b'{"text": "x", "regime": "moon"}\n' + b"\xff\xfe\n" + b"\n" + b"   \r\n"
           + line("ok 2") + b'{"text": "x", "metric": {}}\n' + line("ok 3"))
    feed = JsonlFeed(path)
    with capture_logs() as logs:
        got = feed.poll(0, NOW)
    assert texts(got) == ["ok 1", "ok 2", "ok 3"]
    assert bad_lines(logs) == [2, 3, 4, 5, 6, 10]
    reasons = [entry["reason"] for entry in logs]
    assert reasons[0].startswith("not JSON")
    assert "list" in reasons[1]
    assert "text" in reasons[2] and "regime" in reasons[3] and "UTF-8" in reasons[4]
    assert "metric" in reasons[5]
    assert all(entry["log_level"] == "warning" for entry in logs)


def test_resumes_at_a_persisted_offset_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    append(path, line("a") + line("b"))
    first = JsonlFeed(path)
    assert texts(first.poll(0, NOW)) == ["a", "b"]
    first.close()
    with pytest.raises(NotAvailableError):
        first.poll(1, NOW)
    append(path, b"oops\n" + line("c"))
    second = JsonlFeed(path, offset=first.offset)
    with capture_logs() as logs:
        assert texts(second.poll(1, NOW)) == ["c"]
    assert bad_lines(logs) == [3]  # counted from the start of the file
    assert second.line == 4


def test_missing_file_then_created(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    feed = JsonlFeed(path)
    assert feed.poll(0, NOW) == []
    append(path, line("hello"))
    assert texts(feed.poll(1, NOW)) == ["hello"]


def test_truncated_file_restarts_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    append(path, line("a") + line("b") + line("c"))
    feed = JsonlFeed(path)
    feed.poll(0, NOW)
    path.write_bytes(line("new"))
    with capture_logs() as logs:
        assert texts(feed.poll(1, NOW)) == ["new"]
    assert [entry["event"] for entry in logs] == ["feed.jsonl.truncated"]
    assert feed.line == 1


def test_rotated_file_is_read_from_the_top(tmp_path: Path) -> None:
    """A new file moved into place (log rotation) is read from its start, even if longer."""
    path = tmp_path / "agent.jsonl"
    append(path, line("a"))
    feed = JsonlFeed(path)
    assert texts(feed.poll(0, NOW)) == ["a"]
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(line("b") + line("c"))
    fresh.replace(path)
    with capture_logs() as logs:
        assert texts(feed.poll(1, NOW)) == ["b", "c"]
    assert [entry["event"] for entry in logs] == ["feed.jsonl.rotated"]


def test_a_backlog_is_spread_over_polls(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    append(path, b"".join(line(f"e{i}") for i in range(25)))
    feed = JsonlFeed(path, max_lines_per_poll=10)
    got = [texts(feed.poll(t, NOW)) for t in range(4)]
    assert [len(g) for g in got] == [10, 10, 5, 0]
    assert [t for g in got for t in g] == [f"e{i}" for i in range(25)]


def test_over_long_lines_are_skipped_even_across_polls(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    long_text = "x" * 300
    append(path, line("short") + line(long_text) + b'{"text": "' + b"y" * 200)
    feed = JsonlFeed(path, max_line_bytes=100, read_bytes=1)
    with capture_logs() as logs:
        assert texts(feed.poll(0, NOW)) == ["short"]
        append(path, b'y"}\n' + line("after"))
        assert texts(feed.poll(1, NOW)) == ["after"]
    assert bad_lines(logs) == [2, 3]
    assert feed.offset == path.stat().st_size


def test_bad_arguments() -> None:
    with pytest.raises(ValidationError, match="offset"):
        JsonlFeed("x", offset=-1)
    with pytest.raises(ValidationError, match="max_line_bytes"):
        JsonlFeed("x", max_line_bytes=0)


RECORD = st.one_of(
    st.builds(lambda t: json.dumps({"text": t}), st.text(min_size=1, max_size=30).filter(
        lambda t: t.strip() != "")),
    st.sampled_from(["garbage", "[]", '{"type": "nope", "text": "a"}', "{"]),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(RECORD, max_size=20), cuts=st.lists(st.integers(0, 2000), max_size=8),
       max_line=st.integers(8, 64))
def test_any_write_pattern_yields_the_same_lines(tmp_path: Path, records: list[str],
                                                 cuts: list[int], max_line: int) -> None:
    """However the writer splits its bytes, the polls return every valid line once, in
    order, and report every bad line once."""
    path = tmp_path / f"p{abs(hash((tuple(records), tuple(cuts), max_line)))}.jsonl"
    data = "".join(r + "\n" for r in records).encode()
    points = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    feed = JsonlFeed(path, max_line_bytes=max_line, read_bytes=1, max_lines_per_poll=3)
    got: list[str] = []
    prev = 0
    with capture_logs() as logs:
        path.write_bytes(b"")
        for point in points:
            append(path, data[prev:point])
            prev = point
            got.extend(texts(feed.poll(0, NOW)))
        for _ in range(len(records)):  # drain the per-poll limit
            got.extend(texts(feed.poll(0, NOW)))
    expected, bad = [], 0
    for r in records:
        obj = json.loads(r) if r.startswith('{"text"') else None
        if len(r.encode()) > max_line or obj is None:
            bad += 1
        else:
            expected.append(obj["text"])
    assert got == expected
    assert len(bad_lines(logs)) == bad
    assert feed.offset == len(data)
