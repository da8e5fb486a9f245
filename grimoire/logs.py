"""Logging: silent as a library, readable as a daemon; and the recent-events ring.

A library stays silent unless its host configures logging (the standard library's
convention): every module logs through ``get_logger(__name__)``, a structlog logger
that writes to the stdlib logger of that name, and the ``grimoire``, ``curator`` and
``playbook`` loggers carry a ``NullHandler`` (added by the packages' ``__init__``), so
a program that opens ``Grimoire`` prints nothing, and one that calls
``logging.basicConfig`` sees Grimoire's records like any other library's.

``configure_logging`` is called by the daemon's entry point only (never at import):
JSON lines when stdout is not a terminal (systemd, files), readable lines on a
terminal. Events are named ``area.thing.what`` (``daemon.ready``, ``curator.cycle``).
At ``info`` the daemon says: starting, ready, one line per curator cycle, warnings and
errors; per-tick records are ``debug``.

SPEC §12's events (GrimoireWrite, GrimoireDecay, CuratorCycleComplete, IngestResult)
go through ``EventLog.emit``, which keeps the last few hundred in memory (``status``
shows them) and logs them at ``debug`` under the names SPEC §12 gives them, their time
as ISO-8601 (``sim_time`` when the daemon's clock is accelerated, so simulated time is
never mistaken for real).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from datetime import UTC, datetime
from typing import Any

import structlog

__all__ = ["LEVELS", "LIBRARY_LOGGERS", "EventLog", "configure_logging", "get_logger",
           "iso_ms"]

LIBRARY_LOGGERS = ("grimoire", "curator", "playbook")
LEVELS = ("debug", "info", "warning", "error")
# What the daemon says at info (issue 13): its own life (start, ready, stop), the socket,
# the stores it opened and closed, the feed, one line per curator cycle. Every other info
# record (the work of each tick: distillations, admissions, auto-links, compactions) is
# debug in the daemon's output; warnings and errors always show.
INFO_EVENTS = ("daemon.", "server.listening", "server.stopped", "grimoire.open",
               "grimoire.close", "feed.", "curator.cycle", "heartbeat.")
_HANDLER_FLAG = "_grimoire_handler"


def get_logger(name: str) -> Any:
    """A structlog logger writing through the stdlib logger ``name`` (silent by default)."""
    return structlog.wrap_logger(logging.getLogger(name))


def iso_ms(ms: int | float) -> str:
    """Unix milliseconds as ISO-8601 UTC (``2026-11-25T06:14:11.123Z``)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _routine_is_debug(threshold: int) -> Any:
    """A processor: an info record whose event is not in ``INFO_EVENTS`` counts as debug."""

    def processor(logger: Any, method: str, event_dict: Any) -> Any:
        if method == "info" and threshold > logging.DEBUG:
            event = str(event_dict.get("event", ""))
            if not event.startswith(INFO_EVENTS):
                raise structlog.DropEvent
        return event_dict

    return processor


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """The daemon's own logging (never called by the library): JSON lines when stdout is
    not a terminal (systemd, files), readable ones on a terminal."""
    threshold = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    if json is None:
        json = not sys.stdout.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty(), pad_event_to=28,
                                           sort_keys=False)
    )
    structlog.configure(
        processors=[
            _routine_is_debug(threshold),
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
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
    """SPEC §12 events: kept queryable in memory, logged at debug as structured records."""

    def __init__(self, capacity: int = 200) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._log = get_logger("grimoire.events")
        self.simulated = False  # the daemon sets it when its clock is accelerated

    def emit(self, name: str, at_ms: int, **fields: Any) -> None:
        record = {"event": name, "at": at_ms, **fields}
        with self._lock:
            self._events.append(record)
        when = {"sim_time" if self.simulated else "at": iso_ms(at_ms)}
        self._log.debug(name, **when, **fields)

    def recent(self, n: int = 20, name: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            events = [e for e in self._events if name is None or e["event"] == name]
        return events[-n:]
