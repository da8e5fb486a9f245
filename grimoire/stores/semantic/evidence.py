"""Per-entry evidence: which episodes were counted as confirming or contradicting a claim.

One definition of evidence (issue 11): a confirmation of an entry is a set of
episodes, none counted before for that entry, on which its claim holds; a
contradiction likewise. The table ``entry_evidence`` keys rows by (entry,
episode), so recording an episode a second time for the same entry adds
nothing, whatever the verdict: re-finding, merging, re-summarising and
restating cannot inflate ✓ / ✗. Plain functions over an apsw connection; the
store picks the connection and transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from grimoire.errors import ValidationError

__all__ = ["DECISION_PREFIX", "VERDICTS", "count_evidence", "decision_unit", "last_recorded",
           "list_evidence", "record_evidence"]

VERDICTS = frozenset({"confirm", "contradict"})
# A reported decision (``outcome.report``) is counted under this unit name instead of an
# episode id, so that ``explain`` can tell the two kinds of evidence apart.
DECISION_PREFIX = "retrieval:"


def decision_unit(rid: str) -> str:
    """The ledger's name for one reported decision (the retrieval it followed)."""
    return f"{DECISION_PREFIX}{rid}"


def record_evidence(conn: apsw.Connection, entry_id: str, episode_ids: Iterable[str],
                    verdict: str, cycle: int, now: int) -> list[str]:
    """Count ``episode_ids`` for ``entry_id`` as ``verdict``; returns the ids that were new
    (never counted for this entry before), in the given order."""
    if verdict not in VERDICTS:
        raise ValidationError("must be 'confirm' or 'contradict'", field="verdict")
    if not isinstance(entry_id, str) or not entry_id:
        raise ValidationError("must be a non-empty id", field="entry_id")
    ids = [i for i in dict.fromkeys(episode_ids) if isinstance(i, str) and i]
    if not ids:
        return []
    new: list[str] = []
    for episode_id in ids:
        conn.execute(
            "INSERT INTO entry_evidence (entry_id, episode_id, verdict, cycle, recorded_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (entry_id, episode_id) DO NOTHING",
            (entry_id, episode_id, verdict, int(cycle), int(now)))
        if conn.changes():
            new.append(episode_id)
    return new


def list_evidence(conn: apsw.Connection, entry_id: str) -> list[tuple[str, str, int, int]]:
    """(episode_id, verdict, cycle, recorded_at) counted for ``entry_id``, oldest first."""
    rows = conn.execute(
        "SELECT episode_id, verdict, cycle, recorded_at FROM entry_evidence WHERE entry_id = ? "
        "ORDER BY recorded_at, episode_id", (entry_id,))
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]


def count_evidence(conn: apsw.Connection, entry_id: str) -> tuple[int, int]:
    """(confirming, contradicting) episodes counted for ``entry_id``."""
    row = conn.execute(
        "SELECT coalesce(sum(verdict = 'confirm'), 0), coalesce(sum(verdict = 'contradict'), 0)"
        " FROM entry_evidence WHERE entry_id = ?", (entry_id,)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def last_recorded(conn: apsw.Connection, entry_ids: Iterable[str]) -> dict[str, int]:
    """``{entry_id: the time its latest evidence was counted}`` for those of ``entry_ids``
    with any (the curator's time when it decided: every matching episode it had seen up to
    then was counted, so the episodes after it are the entry's pending evidence)."""
    ids = list(dict.fromkeys(i for i in entry_ids if isinstance(i, str) and i))
    out: dict[str, int] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
                f"SELECT entry_id, max(recorded_at) FROM entry_evidence WHERE entry_id IN "
                f"({marks}) GROUP BY entry_id", chunk):
            out[str(row[0])] = int(row[1])
    return out
