"""Structured logging, configured once by the entry point, and the recent-events ring.

A library stays silent unless its host configures logging (the standard library's
convention): every module logs through ``get_logger(__name__)``, a structlog logger
that writes to the stdlib logger of that name, and the ``grimoire`` and ``curator``
loggers carry a ``NullHandler`` (added by each package's ``__init__``), so a
program that opens ``Grimoire`` prints nothing, and one that calls
``logging.basicConfig`` sees Grimoire's records like any other library's.
``configure_logging`` is called by the daemon's entry point (never at import): it
renders records as JSON lines or readable lines on stdout. Events have stable dotted
names. SPEC §12's events
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

__all__ = ["LIBRARY_LOGGERS", "EventLog", "configure_logging", "get_logger"]

LIBRARY_LOGGERS = ("grimoire", "curator")
_HANDLER_FLAG = "_grimoire_handler"


def get_logger(name: str) -> Any:
    """A structlog logger writing through the stdlib logger ``name`` (silent by default)."""
    return structlog.wrap_logger(logging.getLogger(name))


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
    # The modules' loggers write rendered lines to the stdlib loggers of their packages:
    # the daemon prints them on stdout (the level was applied above, by structlog).
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    setattr(handler, _HANDLER_FLAG, True)
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, _HANDLER_FLAG, False)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False


class EventLog:
    """SPEC §12 events: logged as structured records and kept queryable in memory."""

    def __init__(self, capacity: int = 200) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._log = get_logger("grimoire.events")

    def emit(self, name: str, at_ms: int, **fields: Any) -> None:
        record = {"event": name, "at": at_ms, **fields}
        with self._lock:
            self._events.append(record)
        self._log.info(name, at=at_ms, **fields)

    def recent(self, n: int = 20, name: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            events = [e for e in self._events if name is None or e["event"] == name]
        return events[-n:]
