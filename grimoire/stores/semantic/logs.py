"""The semantic store's side tables: admission log, retrieval log, curator deltas,
episode bookkeeping and the generic ``meta`` key/value table.

Plain functions over an apsw connection that validate their own arguments
(ValidationError naming the field, before any SQL). The store picks the
connection and transaction and wraps apsw errors. Must not touch entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import apsw

from grimoire.errors import NotFoundError, ValidationError
from grimoire.stores.semantic.codec import dumps
from grimoire.stores.semantic.schema import RESERVED_META
from grimoire.stores.semantic.types import (
    AdmissionRecord,
    CuratorDelta,
    EpisodeState,
    RetrievalRecord,
)

__all__ = [
    "ADMISSION_DECISIONS",
    "ADMISSION_FACTORS",
    "RETRIEVAL_MODES",
    "RETRIEVAL_OUTCOMES",
    "add_curator_delta",
    "admission_counts",
    "episode_states",
    "get_meta",
    "get_retrieval",
    "list_admissions",
    "list_curator_deltas",
    "log_admission",
    "log_retrieval",
    "mark_consolidated",
    "prune_logs",
    "retrieval_counts",
    "set_episode_state",
    "set_meta",
    "set_retrieval_outcome",
    "touch_episodes",
]

ADMISSION_FACTORS = ("future_utility", "factual_confidence", "semantic_novelty",
                     "temporal_recency", "content_type_prior")
ADMISSION_DECISIONS = frozenset({"admitted", "merged", "skipped", "rejected", "quarantined"})
RETRIEVAL_MODES = frozenset({"deciding", "browse"})
RETRIEVAL_OUTCOMES = frozenset({"positive", "negative", "neutral"})


def _unit(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number in [0, 1], got {type(value).__name__}",
                              field=field)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{value} is not a number in [0, 1]", field=field)
    return float(value)


def _choice(value: object, allowed: frozenset[str], field: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"{value!r} is not one of: {', '.join(sorted(allowed))}",
                              field=field)
    return value


def _text(value: object, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("must be a non-empty string", field=field)
    if len(value) > limit:
        raise ValidationError(f"longer than {limit} characters", field=field)
    return value


def _opt_text(value: object, field: str, limit: int = 256) -> str | None:
    return None if value is None else _text(value, field, limit)


# --- admission log -------------------------------------------------------------------


def log_admission(
    conn: apsw.Connection, *, decision: str, factors: Mapping[str, float], composite: float,
    candidate: str, category: str | None, entry_id: str | None, now: int,
    off_topic: bool = False, reasons: Sequence[str] = (),
) -> int:
    """Record one gate decision with its five factor values, the off-topic flag and the
    gate's reasons; return the log row id."""
    _choice(decision, ADMISSION_DECISIONS, "decision")
    if not isinstance(off_topic, bool):
        raise ValidationError(f"must be a boolean, got {off_topic!r}", field="off_topic")
    if isinstance(reasons, str) or not all(isinstance(r, str) for r in reasons):
        raise ValidationError("must be a list of strings", field="reasons")
    if not isinstance(factors, Mapping) or set(factors) != set(ADMISSION_FACTORS):
        raise ValidationError(f"must have exactly the keys {', '.join(ADMISSION_FACTORS)}",
                              field="factors")
    values = [_unit(factors[name], f"factors.{name}") for name in ADMISSION_FACTORS]
    conn.execute(
        "INSERT INTO admission_log (decided_at, decision, future_utility, factual_confidence, "
        "semantic_novelty, temporal_recency, content_type_prior, composite, candidate, "
        "category, entry_id, off_topic, reasons) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (now, decision, *values, _unit(composite, "composite"),
         _text(candidate, "candidate", 32_000), _opt_text(category, "category"),
         _opt_text(entry_id, "entry_id"), int(off_topic), json.dumps(list(reasons))),
    )
    return conn.last_insert_rowid()


def list_admissions(
    conn: apsw.Connection, since: int | None, limit: int | None
) -> list[AdmissionRecord]:
    rows = conn.execute(
        "SELECT id, decided_at, decision, future_utility, factual_confidence, semantic_novelty, "
        "temporal_recency, content_type_prior, composite, candidate, category, entry_id, "
        "off_topic, reasons FROM admission_log WHERE decided_at >= ? ORDER BY id DESC LIMIT ?",
        (since or 0, -1 if limit is None else limit),
    )
    return [
        AdmissionRecord(r[0], r[1], r[2], dict(zip(ADMISSION_FACTORS, r[3:8], strict=True)),
                        r[8], r[9], r[10], r[11], bool(r[12]), tuple(json.loads(r[13])))
        for r in rows
    ]


def admission_counts(conn: apsw.Connection, since: int | None) -> dict[str, int]:
    """Decisions since ``since`` (admission rate is a health metric, SPEC §12)."""
    rows = conn.execute(
        "SELECT decision, count(*) FROM admission_log WHERE decided_at >= ? GROUP BY decision",
        (since or 0,),
    )
    return {decision: int(n) for decision, n in rows}


# --- retrieval log -------------------------------------------------------------------


def log_retrieval(
    conn: apsw.Connection, retrieval_id: str, *, query: str, mode: str,
    items: Sequence[Mapping[str, Any]], now: int, latency_ms: float | None = None,
) -> None:
    """Record what a retrieval returned: item ids with their factor breakdowns, and its
    wall time (``latency_ms``) when the caller measured it."""
    _text(retrieval_id, "retrieval_id", 256)
    if not isinstance(query, str):
        raise ValidationError("must be a string", field="query")
    _choice(mode, RETRIEVAL_MODES, "mode")
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise ValidationError("must be a list of objects", field="items")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise ValidationError("must be an object with a string 'id'", field=f"items[{i}]")
    if latency_ms is not None and (isinstance(latency_ms, bool)
                                   or not isinstance(latency_ms, int | float)
                                   or not 0 <= latency_ms < float("inf")):
        raise ValidationError("must be a finite number >= 0 or None", field="latency_ms")
    payload = dumps([dict(item) for item in items], "items")
    exists = conn.execute("SELECT 1 FROM retrieval_log WHERE retrieval_id = ?",
                          (retrieval_id,)).fetchone()
    if exists:
        raise ValidationError(f"{retrieval_id!r} is already logged", field="retrieval_id")
    conn.execute(
        "INSERT INTO retrieval_log (retrieval_id, created_at, query, mode, items, latency_ms) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (retrieval_id, now, query, mode, payload,
         None if latency_ms is None else float(latency_ms)),
    )


def get_retrieval(conn: apsw.Connection, retrieval_id: str) -> RetrievalRecord | None:
    row = conn.execute(
        "SELECT retrieval_id, query, mode, items, created_at, outcome, outcome_detail, "
        "outcome_at FROM retrieval_log WHERE retrieval_id = ?", (retrieval_id,),
    ).fetchone()
    if row is None:
        return None
    detail = json.loads(row[6]) if row[6] is not None else None
    return RetrievalRecord(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4], row[5],
                           detail, row[7])


def set_retrieval_outcome(
    conn: apsw.Connection, retrieval_id: str, outcome: str,
    detail: Mapping[str, Any] | None, now: int,
) -> RetrievalRecord:
    """Attach the reported outcome. A second report for the same retrieval is refused,
    so feedback (strength, votes, learned weights) is never counted twice."""
    _choice(outcome, RETRIEVAL_OUTCOMES, "outcome")
    if detail is not None and not isinstance(detail, Mapping):
        raise ValidationError("must be an object or None", field="detail")
    payload = None if detail is None else dumps(dict(detail), "detail")
    current = get_retrieval(conn, retrieval_id)
    if current is None:
        raise NotFoundError(f"no retrieval {retrieval_id!r}")
    if current.outcome is not None:
        raise ValidationError(f"retrieval {retrieval_id!r} already has outcome "
                              f"{current.outcome!r}", field="retrieval_id")
    conn.execute(
        "UPDATE retrieval_log SET outcome = ?, outcome_detail = ?, outcome_at = ? "
        "WHERE retrieval_id = ?", (outcome, payload, now, retrieval_id),
    )
    updated = get_retrieval(conn, retrieval_id)
    if updated is None:  # pragma: no cover - same transaction
        raise NotFoundError(f"no retrieval {retrieval_id!r}")
    return updated


def retrieval_counts(conn: apsw.Connection, since: int | None) -> dict[str, int]:
    """Retrievals since ``since``: total, with an outcome, and per outcome (hit rate)."""
    out = {"total": 0, "reported": 0, **{o: 0 for o in sorted(RETRIEVAL_OUTCOMES)}}
    for outcome, n in conn.execute(
        "SELECT outcome, count(*) FROM retrieval_log WHERE created_at >= ? GROUP BY outcome",
        (since or 0,),
    ):
        out["total"] += n
        if outcome is not None:
            out["reported"] += n
            out[outcome] = out.get(outcome, 0) + n
    return out


def prune_logs(conn: apsw.Connection, before: int) -> dict[str, int]:
    """Delete admission and retrieval log rows older than ``before`` (they grow per call).
    Curator deltas are the audit trail of the knowledge itself and are kept."""
    conn.execute("DELETE FROM admission_log WHERE decided_at < ?", (before,))
    admissions = conn.changes()
    conn.execute("DELETE FROM retrieval_log WHERE created_at < ?", (before,))
    return {"admission_log": admissions, "retrieval_log": conn.changes()}


# --- curator deltas ------------------------------------------------------------------


def add_curator_delta(
    conn: apsw.Connection, *, cycle: int, op: str, entry_id: str | None,
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, now: int,
) -> int:
    if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 0:
        raise ValidationError("must be an integer >= 0", field="cycle")
    _text(op, "op", 64)
    for name, value in (("before", before), ("after", after)):
        if value is not None and not isinstance(value, Mapping):
            raise ValidationError("must be an object or None", field=name)
    conn.execute(
        "INSERT INTO curator_deltas (cycle, op, entry_id, before_json, after_json, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (cycle, op, _opt_text(entry_id, "entry_id"),
         None if before is None else dumps(dict(before), "before"),
         None if after is None else dumps(dict(after), "after"), now),
    )
    return conn.last_insert_rowid()


def list_curator_deltas(
    conn: apsw.Connection, entry_id: str | None, cycle: int | None, limit: int | None
) -> list[CuratorDelta]:
    clauses: list[str] = []
    params: list[Any] = []
    if entry_id is not None:
        clauses.append("entry_id = ?")
        params.append(entry_id)
    if cycle is not None:
        clauses.append("cycle = ?")
        params.append(cycle)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        "SELECT id, cycle, op, entry_id, before_json, after_json, created_at "
        f"FROM curator_deltas {where} ORDER BY id LIMIT ?",
        (*params, -1 if limit is None else limit),
    )
    return [
        CuratorDelta(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else None,
                     json.loads(r[5]) if r[5] else None, r[6])
        for r in rows
    ]


# --- episode state -------------------------------------------------------------------


def _ids(ids: Iterable[str], field: str = "episode_ids") -> list[str]:
    if isinstance(ids, str):
        raise ValidationError("must be a list of ids, not one string", field=field)
    out = list(dict.fromkeys(ids))
    for value in out:
        _text(value, field, 256)
    return out


def episode_states(conn: apsw.Connection, ids: Iterable[str]) -> dict[str, EpisodeState]:
    """State of each id; ids never touched get the default (unconsolidated, 0 accesses)."""
    wanted = _ids(ids)
    states = {i: EpisodeState(i) for i in wanted}
    if wanted:
        for row in conn.execute(
            "SELECT episode_id, consolidated, access_count, last_accessed_at, replayed_at "
            "FROM episode_state WHERE episode_id IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
        ):
            states[row[0]] = EpisodeState(row[0], bool(row[1]), row[2], row[3], row[4])
    return states


def set_episode_state(conn: apsw.Connection, state: EpisodeState) -> None:
    _text(state.episode_id, "episode_id", 256)
    if isinstance(state.access_count, bool) or not isinstance(state.access_count, int) or (
        state.access_count < 0
    ):
        raise ValidationError("must be an integer >= 0", field="access_count")
    for name in ("last_accessed_at", "replayed_at"):
        value = getattr(state, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValidationError("must be unix ms or None", field=name)
    conn.execute(
        "INSERT INTO episode_state (episode_id, consolidated, access_count, last_accessed_at, "
        "replayed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (episode_id) DO UPDATE SET "
        "consolidated = excluded.consolidated, access_count = excluded.access_count, "
        "last_accessed_at = excluded.last_accessed_at, replayed_at = excluded.replayed_at",
        (state.episode_id, int(bool(state.consolidated)), state.access_count,
         state.last_accessed_at, state.replayed_at),
    )


def mark_consolidated(conn: apsw.Connection, ids: Iterable[str]) -> None:
    conn.execute(
        "INSERT INTO episode_state (episode_id, consolidated) SELECT value, 1 FROM json_each(?) "
        "WHERE true ON CONFLICT (episode_id) DO UPDATE SET consolidated = 1",
        (json.dumps(_ids(ids)),),
    )


def touch_episodes(conn: apsw.Connection, ids: Iterable[str], now: int) -> None:
    """One more access for each episode, at ``now``."""
    conn.execute(
        "INSERT INTO episode_state (episode_id, access_count, last_accessed_at) "
        "SELECT value, 1, ? FROM json_each(?) WHERE true ON CONFLICT (episode_id) DO UPDATE SET "
        "access_count = access_count + 1, last_accessed_at = excluded.last_accessed_at",
        (now, json.dumps(_ids(ids))),
    )


# --- meta ----------------------------------------------------------------------------


def get_meta(conn: apsw.Connection, key: str) -> tuple[bool, Any]:
    """(found, value) of ``key``; values are JSON."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return (False, None) if row is None else (True, json.loads(row[0]))


def set_meta(conn: apsw.Connection, key: str, value: Any) -> None:
    _text(key, "key", 256)
    if key in RESERVED_META:
        raise ValidationError(f"{key!r} is set by the store itself", field="key")
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, dumps(value, f"meta.{key}")),
    )
