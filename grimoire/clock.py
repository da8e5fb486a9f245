"""Injected time. A clock is a zero-argument callable returning unix milliseconds.

Nothing in Grimoire reads the wall clock directly: the facade, stores and
curator receive a clock, so decay, schedules and bi-temporal queries are
tested without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "FrozenClock", "SystemClock"]

MS_PER_HOUR = 3_600_000
MS_PER_DAY = 86_400_000


class Clock(Protocol):
    def __call__(self) -> int: ...


class SystemClock:
    """Wall-clock unix milliseconds."""

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000


class FrozenClock:
    """A clock for tests and replays: returns ``now`` until moved."""

    def __init__(self, now: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00Z
        self.now = int(now)

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += int(ms)
        return self.now

    def set(self, now: int) -> None:
        self.now = int(now)
