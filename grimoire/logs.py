"""Structured logging, configured once by the entry point, and the recent-events ring.

``configure_logging`` is called by the CLI (never at import). Modules log with
``structlog.get_logger()`` and stable dotted event names. SPEC §12's events
(GrimoireWrite, GrimoireDecay, CuratorCycleComplete, IngestResult) are logged
through ``EventLog.emit``, which also keeps the last few hundred in memory so
``status`` can show them.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from typing import Any

import structlog

__all__ = ["EventLog", "configure_logging"]


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """JSON lines when stdout is not a terminal (systemd, files), readable ones on a terminal."""
    if json is None:
        json = not sys.stdout.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )


class EventLog:
    """SPEC §12 events: logged as structured records and kept queryable in memory."""

    def __init__(self, capacity: int = 200) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._log = structlog.get_logger("grimoire.events")

    def emit(self, name: str, at_ms: int, **fields: Any) -> None:
        record = {"event": name, "at": at_ms, **fields}
        with self._lock:
            self._events.append(record)
        self._log.info(name, at=at_ms, **fields)

    def recent(self, n: int = 20, name: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            events = [e for e in self._events if name is None or e["event"] == name]
        return events[-n:]
