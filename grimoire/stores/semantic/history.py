"""The semantic store's history tables, read for ``grimoire report``.

- ``playbook_history``: per curator cycle, every entry PLAYBOOK.md listed, with the
  confidence and ✓ / ✗ it was printed with (``record_listing``, once per cycle), and
  ``playbook_cycles``: every cycle that wrote the file, with how many entries it listed
  (a cycle that listed nothing is a row too);
- the retrieval log's time series: when each retrieval ran, how long it took, and the
  outcome reported for it (``retrieval_series``).

Validated inputs, plain rows out; must not touch entries, vectors or full text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from grimoire.errors import ValidationError

__all__ = ["Listing", "RetrievalPoint", "cycles", "listings", "record_listing",
           "retrieval_series"]


@dataclass(frozen=True, slots=True)
class Listing:
    """One entry as one cycle's PLAYBOOK.md showed it."""

    cycle: int
    entry_id: str
    recorded_at: int
    confidence: float
    validated: int
    contradicted: int


@dataclass(frozen=True, slots=True)
class RetrievalPoint:
    created_at: int
    latency_ms: float | None  # None for retrievals logged before latencies were kept
    mode: str
    outcome: str | None


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError("must be an integer >= 0", field=field)
    return value


def record_listing(conn: apsw.Connection, cycle: int, now: int,
                   rows: Sequence[tuple[str, float, int, int]]) -> int:
    """Record (entry_id, confidence, validated, contradicted) for each listed entry.

    Recording a cycle again replaces that cycle's rows (a cycle retried after a failure)."""
    _count(cycle, "cycle")
    checked = []
    for i, (entry_id, confidence, validated, contradicted) in enumerate(rows):
        if not isinstance(entry_id, str) or not entry_id:
            raise ValidationError("must be a non-empty string", field=f"rows[{i}].entry_id")
        conf = float(confidence)
        if not 0.0 <= conf <= 1.0:
            raise ValidationError("must be in [0, 1]", field=f"rows[{i}].confidence")
        checked.append((cycle, entry_id, now, conf, _count(validated, f"rows[{i}].validated"),
                        _count(contradicted, f"rows[{i}].contradicted")))
    conn.execute("DELETE FROM playbook_history WHERE cycle = ?", (cycle,))
    conn.execute("INSERT OR REPLACE INTO playbook_cycles (cycle, recorded_at, listed) "
                 "VALUES (?, ?, ?)", (cycle, now, len(checked)))
    conn.executemany(
        "INSERT INTO playbook_history (cycle, entry_id, recorded_at, confidence, validated, "
        "contradicted) VALUES (?, ?, ?, ?, ?, ?)", checked)
    return len(checked)


def listings(conn: apsw.Connection, since_cycle: int = 0) -> list[Listing]:
    """Every recorded listing from ``since_cycle`` on, by cycle then entry."""
    return [Listing(*row) for row in conn.execute(
        "SELECT cycle, entry_id, recorded_at, confidence, validated, contradicted "
        "FROM playbook_history WHERE cycle >= ? ORDER BY cycle, entry_id", (since_cycle,))]


def cycles(conn: apsw.Connection) -> list[tuple[int, int, int]]:
    """(cycle, recorded_at, entries listed) of every cycle that wrote PLAYBOOK.md."""
    return [(int(c), int(t), int(n)) for c, t, n in conn.execute(
        "SELECT cycle, recorded_at, listed FROM playbook_cycles ORDER BY cycle")]


def retrieval_series(conn: apsw.Connection, since: int = 0) -> list[RetrievalPoint]:
    """Every logged retrieval since ``since`` (unix ms), oldest first."""
    return [RetrievalPoint(*row) for row in conn.execute(
        "SELECT created_at, latency_ms, mode, outcome FROM retrieval_log "
        "WHERE created_at >= ? ORDER BY created_at", (since,))]
