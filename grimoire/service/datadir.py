"""What a data directory holds: simulated or real memory, recorded once and never mixed.

The first daemon started on a data directory writes ``FEED.json`` there: ``kind``
(``simulated`` for the market simulator, ``real`` for any other feed, ``none`` included:
episodes then come from the agent), the feed, and when. Every later start compares: a
simulated directory is refused to a real run and the other way round, so the demo's
synthetic episodes (and its accelerated clock, days ahead of the wall clock) never end
up in the agent's real memory. The check runs before any store is opened, in two steps:
``refuse_mixed`` only reads (before the settings that may still fail are tried), and
``record_feed_kind`` creates the directory and writes the marker once nothing can fail
any more. The file itself is read by ``grimoire.stores.marker``.

An import (``grimoire import``) follows the same rule with the bundle's kind
(``import_marker``): a fresh directory takes the bundle's kind; a directory of the other
kind (an unmarked store counts as real) is refused unless the owner asks for the mix,
which its marker then records under ``mixed_in``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grimoire.errors import ConfigError, StoreError
from grimoire.grimoire import make_data_dir
from grimoire.stores.marker import MARKER, read_marker
from playbook import write_atomic

__all__ = ["MARKER", "check_feed_kind", "feed_kind", "import_marker", "record_feed_kind",
           "refuse_mixed", "write_marker"]


def feed_kind(feed: str) -> str:
    return "simulated" if feed.strip().partition(":")[0] == "sim" else "real"


def refuse_mixed(data_dir: Path, feed: str) -> dict[str, Any] | None:
    """The directory's marker, or None; a run whose feed is of the other kind is refused.
    Reads only: creates nothing."""
    found = read_marker(data_dir)
    kind = feed_kind(feed)
    if found is not None and found["kind"] != kind:
        since = found.get("since", "?")
        raise ConfigError(
            f"{data_dir} holds {found['kind']} memory (feed {found.get('feed', '?')!r}, "
            f"since {since}) and this run's feed {feed!r} is {kind}: Grimoire never mixes "
            "the two. Give this run a data directory of its own (--data DIR), e.g. "
            "data/demo for the simulator")
    return found


def write_marker(data_dir: Path, record: dict[str, Any]) -> None:
    try:
        write_atomic(data_dir / MARKER, json.dumps(record, indent=2) + "\n")
    except StoreError as exc:
        raise ConfigError(f"data directory {data_dir} is not writable ({exc}): choose a "
                          "directory you can write (--data DIR), or fix its owner and "
                          "permissions") from None


def record_feed_kind(data_dir: Path, feed: str, scenario: str | None) -> dict[str, Any]:
    """Create the directory and record the run's kind there, unless it is recorded already."""
    make_data_dir(data_dir)  # or a clear error: a file, an impossible path, no permission
    found = refuse_mixed(data_dir, feed)
    if found is not None:
        return found
    kind = feed_kind(feed)
    record = {"kind": kind, "feed": feed, "since": _now_iso()}
    if scenario and kind == "simulated":
        record["scenario"] = scenario
    write_marker(data_dir, record)
    return record


def check_feed_kind(data_dir: Path, feed: str, scenario: str | None) -> dict[str, Any]:
    """Refuse a run whose feed is of the other kind than the directory's; record it first."""
    refuse_mixed(data_dir, feed)
    return record_feed_kind(data_dir, feed, scenario)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def import_marker(data_dir: Path, kind: str, source: str, allow_mixed: bool
                  ) -> dict[str, Any] | None:
    """The marker ``data_dir`` should carry after importing ``kind`` memory from ``source``
    (None: leave it as it is). Refuses a mix of simulated and real memory unless
    ``allow_mixed``. Reads only: the caller writes it (``write_marker``) once the import
    can no longer fail on a setting."""
    found = read_marker(data_dir)
    if found is None and not (data_dir / "semantic.sqlite").exists():
        return {"kind": kind, "feed": "import", "since": _now_iso(), "source": source}
    have = found["kind"] if found is not None else "real"
    if have == kind:
        return None
    if not allow_mixed:
        raise ConfigError(
            f"{data_dir} holds {have} memory and {source} was exported from {kind} memory: "
            "Grimoire never mixes the two unless asked. Import it into a directory of its "
            "own (--data NEWDIR), or pass --allow-mixed to mix it in anyway (the directory's "
            f"{MARKER} then records it)")
    if found is None:
        return None
    mixed = [*found.get("mixed_in", []), {"kind": kind, "source": source, "at": _now_iso()}]
    return {**found, "mixed_in": mixed}
