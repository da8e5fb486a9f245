"""The ``jsonl:PATH`` feed: tail a file of one ``episode.write`` params object per line.

Owns the byte offset into the file and the line count. Each poll returns the
complete, valid lines written since the last poll; a partial last line waits
for its newline; a bad line (not UTF-8, not JSON, not an object, not a valid
episode, too long) is logged as ``feed.jsonl.bad_line`` with its line number
and skipped, never raised. It never writes the file and never writes episodes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grimoire.errors import NotAvailableError, ValidationError
from grimoire.logs import get_logger
from grimoire.records.episode import episode_from_params

__all__ = ["JsonlFeed"]

log = get_logger(__name__)

# episode_from_params needs an id; validation does not depend on it.
_VALIDATION_ID = "00000000-0000-7000-8000-000000000000"


class JsonlFeed:
    """Tails ``path``; ``offset`` (bytes) is what the daemon persists to resume."""

    name = "jsonl"

    def __init__(self, path: str | Path, *, offset: int = 0, line: int | None = None,
                 max_lines_per_poll: int = 1000, max_line_bytes: int = 1_048_576,
                 read_bytes: int = 65_536) -> None:
        if offset < 0:
            raise ValidationError(f"must be >= 0, got {offset}", field="offset")
        for name, value in (("max_lines_per_poll", max_lines_per_poll),
                            ("max_line_bytes", max_line_bytes), ("read_bytes", read_bytes)):
            if value < 1:
                raise ValidationError(f"must be >= 1, got {value}", field=name)
        self.path = Path(path)
        self.tick_seconds_hint: float | None = None
        self.max_lines_per_poll = max_lines_per_poll
        self.max_line_bytes = max_line_bytes
        # Larger than any acceptable line, so that every read makes progress.
        self._chunk = max(2 * max_line_bytes, read_bytes)
        self._offset = offset
        self._line = line  # None until counted (resuming at an offset without a line number)
        self._skipping = False  # inside an over-long line: discard up to its newline
        self._last_error: str | None = None
        self._inode: int | None = None  # a new inode at the path means the file was rotated
        self._closed = False
        self.rejected = 0  # bad lines skipped so far (the daemon reports them per tick)

    @property
    def offset(self) -> int:
        """Byte offset of the first line not yet returned (persist it to resume)."""
        return self._offset

    @property
    def line(self) -> int:
        """Number of lines consumed so far (the last one read is line ``line``)."""
        return self._line or 0

    def close(self) -> None:
        self._closed = True

    def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        """Complete new lines since the last poll, as validated episode params dicts."""
        if self._closed:
            raise NotAvailableError("the jsonl feed is closed")
        try:
            with self.path.open("rb") as f:
                self._last_error = None
                return self._read(f, now_ms)
        except FileNotFoundError:
            return []  # the writer has not created it yet
        except OSError as exc:
            # Reported once per distinct error: the daemon keeps ticking, the operator sees why.
            if str(exc) != self._last_error:
                self._last_error = str(exc)
                log.warning("feed.jsonl.unreadable", path=str(self.path), error=str(exc))
            return []

    def _read(self, f: Any, now_ms: int) -> list[dict[str, Any]]:
        stat = os.fstat(f.fileno())
        if self._inode is not None and stat.st_ino != self._inode:
            log.warning("feed.jsonl.rotated", path=str(self.path), offset=self._offset)
            self._offset, self._line, self._skipping = 0, 0, False
        elif stat.st_size < self._offset:
            log.warning("feed.jsonl.truncated", path=str(self.path), offset=self._offset,
                        size=stat.st_size)
            self._offset, self._line, self._skipping = 0, 0, False
        self._inode = stat.st_ino
        if self._line is None:
            self._line = _count_newlines(f, self._offset)
        out: list[dict[str, Any]] = []
        while len(out) < self.max_lines_per_poll:
            f.seek(self._offset)
            buf: bytes = f.read(self._chunk)
            pos = 0
            while len(out) < self.max_lines_per_poll:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                raw, pos = buf[pos:nl], nl + 1
                self._offset += len(raw) + 1
                self._line += 1
                if self._skipping:
                    self._skipping = False
                    continue
                params = self._parse(raw, now_ms)
                if params is not None:
                    out.append(params)
            rest = len(buf) - pos
            if len(out) >= self.max_lines_per_poll:
                break
            if rest and (self._skipping or rest > self.max_line_bytes):
                if not self._skipping:
                    self._bad(self._line + 1, f"line longer than {self.max_line_bytes} bytes")
                    self._skipping = True
                self._offset += rest
            if len(buf) < self._chunk:
                break  # end of file: any rest is a partial line waiting for its newline
        return out

    def _parse(self, raw: bytes, now_ms: int) -> dict[str, Any] | None:
        if len(raw) > self.max_line_bytes:
            self._bad(self.line, f"line longer than {self.max_line_bytes} bytes")
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._bad(self.line, f"not UTF-8: {exc.reason}")
            return None
        if not text.strip():
            return None  # blank lines are harmless padding
        try:
            params = json.loads(text)
        except json.JSONDecodeError as exc:
            self._bad(self.line, f"not JSON: {exc.msg} at column {exc.colno}")
            return None
        if not isinstance(params, dict):
            self._bad(self.line, f"not a JSON object but {type(params).__name__}")
            return None
        try:
            episode_from_params(params, id=_VALIDATION_ID, now_ms=now_ms)
        except ValidationError as exc:
            self._bad(self.line, f"not a valid episode: {exc}")
            return None
        return params

    def _bad(self, line: int, reason: str) -> None:
        self.rejected += 1
        log.warning("feed.jsonl.bad_line", path=str(self.path), line=line, reason=reason)


def _count_newlines(f: Any, upto: int) -> int:
    """Lines before byte ``upto`` (resuming at a persisted offset, for line numbers)."""
    f.seek(0)
    count, left = 0, upto
    while left > 0:
        block = f.read(min(left, 1 << 20))
        if not block:
            break
        count += block.count(b"\n")
        left -= len(block)
    return count
