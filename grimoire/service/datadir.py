"""What a data directory holds: simulated or real memory, recorded once and never mixed.

The first daemon started on a data directory writes ``FEED.json`` there: ``kind``
(``simulated`` for the market simulator, ``real`` for any other feed, ``none`` included:
episodes then come from the agent), the feed, and when. Every later start compares: a
simulated directory is refused to a real run and the other way round, so the demo's
synthetic episodes (and its accelerated clock, days ahead of the wall clock) never end
up in the agent's real memory. The check runs before any store is opened.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grimoire.errors import ConfigError, StoreError
from grimoire.grimoire import make_data_dir
from playbook import write_atomic

__all__ = ["MARKER", "check_feed_kind", "feed_kind"]

MARKER = "FEED.json"


def feed_kind(feed: str) -> str:
    return "simulated" if feed.strip().partition(":")[0] == "sim" else "real"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}): it says whether this data "
                          "directory holds simulated or real memory; restore or delete it"
                          ) from exc
    if not isinstance(data, dict) or data.get("kind") not in ("simulated", "real"):
        raise ConfigError(f"{path} does not say kind: simulated or real; restore or delete it")
    return data


def check_feed_kind(data_dir: Path, feed: str, scenario: str | None) -> dict[str, Any]:
    """Refuse a run whose feed is of the other kind than the directory's; record it first."""
    path = data_dir / MARKER
    kind = feed_kind(feed)
    make_data_dir(data_dir)  # or a clear error: a file, an impossible path, no permission
    found = _read(path)
    if found is not None:
        if found["kind"] != kind:
            since = found.get("since", "?")
            raise ConfigError(
                f"{data_dir} holds {found['kind']} memory (feed {found.get('feed', '?')!r}, "
                f"since {since}) and this run's feed {feed!r} is {kind}: Grimoire never mixes "
                "the two. Give this run a data directory of its own (--data DIR), e.g. "
                "data/demo for the simulator")
        return found
    record = {"kind": kind, "feed": feed, "since": datetime.now(UTC).isoformat(
        timespec="seconds")}
    if scenario and kind == "simulated":
        record["scenario"] = scenario
    try:
        write_atomic(path, json.dumps(record, indent=2) + "\n")
    except StoreError as exc:
        raise ConfigError(f"data directory {data_dir} is not writable ({exc}): choose a "
                          "directory you can write (--data DIR), or fix its owner and "
                          "permissions") from None
    return record
