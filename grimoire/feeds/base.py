"""The Feed protocol, the empty feed and ``make_feed``, which parses the feed spec.

A feed produces the episodes of one heartbeat tick as ``episode.write``
parameter dicts; the caller (the daemon's heartbeat) supplies the tick number
and the time, and writes what it gets. Feeds never write episodes and never
read the wall clock. Spec grammar (config ``daemon.feed``): ``sim`` |
``jsonl:PATH`` | ``none``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from grimoire.errors import ConfigError
from grimoire.feeds.jsonl import JsonlFeed
from grimoire.feeds.sim.feed import SimFeed
from grimoire.feeds.sim.scenario import load_scenario

__all__ = ["Feed", "NoneFeed", "make_feed"]


@runtime_checkable
class Feed(Protocol):
    """Where a tick's episodes come from."""

    name: str
    # Simulated seconds per tick the daemon should use as its clock step (None: real time).
    tick_seconds_hint: float | None

    def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        """The episodes of this tick as ``episode.write`` parameter dicts."""
        ...

    def close(self) -> None: ...


class NoneFeed:
    """No feed: the agent writes every episode itself over the socket."""

    name = "none"

    def __init__(self) -> None:
        self.tick_seconds_hint: float | None = None

    def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        pass


def make_feed(spec: str, *, scenario: str | Path | None = None, seed: int = 7,
              offset: int = 0) -> Feed:
    """Build the feed named by ``spec``.

    ``scenario`` (a shipped name or a YAML path) and ``seed`` apply to ``sim``;
    ``offset`` is the persisted byte offset of a ``jsonl`` feed.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"daemon.feed: expected a string, got {spec!r}")
    kind, sep, arg = spec.strip().partition(":")
    if kind == "sim" and not sep:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"daemon.seed: expected an integer >= 0, got {seed!r}")
        return SimFeed(load_scenario(scenario), seed)
    if kind == "none" and not sep:
        return NoneFeed()
    if kind == "jsonl" and sep:
        if not arg.strip():
            raise ConfigError("daemon.feed: jsonl needs a path, as in jsonl:/var/run/agent.jsonl")
        return JsonlFeed(Path(arg.strip()).expanduser(), offset=offset)
    raise ConfigError(f"daemon.feed: {spec!r} is not one of: sim, jsonl:PATH, none")
