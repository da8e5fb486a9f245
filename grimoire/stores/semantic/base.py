"""Connection plumbing and the side tables of the semantic store.

``SemanticBase`` owns what every semantic-store method needs (the
``Connections`` holder, the clock, ``transaction()``, ``close()``) and the
thin, validated API over the tables that are not entries: the causal graph,
the admission / retrieval / curator logs, episode bookkeeping and ``meta``.
``SemanticStore`` (semantic.py) adds the entries. Must not touch entries,
vectors or full text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Self

import apsw

from grimoire.clock import Clock
from grimoire.stores.semantic import causal, evidence, history, logs
from grimoire.stores.semantic.types import (
    AdmissionRecord,
    CausalEdge,
    CausalHop,
    CuratorDelta,
    EdgeKind,
    EpisodeState,
    RetrievalRecord,
)
from grimoire.stores.sqlite import Connections, store_errors

__all__ = ["SemanticBase"]


class SemanticBase:
    """Plumbing plus causal graph, logs, episode state and meta (see SemanticStore)."""

    def __init__(self, db: Connections, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes into one durable commit (BEGIN IMMEDIATE … COMMIT / ROLLBACK).

        Writer thread only. Nested use is a savepoint. A write that fails
        inside rolls back only its own changes and raises; if the exception
        leaves the block, the whole transaction rolls back.
        """
        with store_errors("transaction"), self._db.transaction():
            yield

    @contextmanager
    def _write(self, action: str) -> Iterator[apsw.Connection]:
        with store_errors(action), self._db.transaction() as conn:
            yield conn

    def _now(self, now: int | None) -> int:
        return self._clock() if now is None else now

    # --- causal graph --------------------------------------------------------------------

    def upsert_edge(self, edge: CausalEdge, *, now: int | None = None) -> CausalEdge:
        """Insert or replace the edge (cause, effect, kind); returns the stored edge."""
        at = self._now(now)
        with self._write("upsert_edge") as conn:
            return causal.upsert_edge(conn, edge, at)

    def bound_fan_in(self, effect_ids: Iterable[str], max_fan_in: int) -> int:
        """Keep the ``max_fan_in`` strongest inferred edges into each effect; returns how
        many were deleted (``semantic_causal.bound_fan_in``)."""
        with self._write("bound_fan_in") as conn:
            return causal.bound_fan_in(conn, effect_ids, max_fan_in)

    def delete_edges(self, pairs: Iterable[tuple[str, str]], kind: EdgeKind | str) -> int:
        """Delete the ``kind`` edges between each (cause, effect) pair; how many."""
        with self._write("delete_edges") as conn:
            return causal.delete_edges(conn, pairs, kind)

    def mark_edges_used(self, pairs: Iterable[tuple[str, str]], *, now: int | None = None,
                        ) -> int:
        """One use of the edges between each (cause, effect) pair, at ``now``."""
        at = self._now(now)
        with self._write("mark_edges_used") as conn:
            return causal.mark_used(conn, pairs, at)

    def prune_unused_edges(self, before: int) -> int:
        """Delete inferred edges neither used nor confirmed since ``before``; how many."""
        with self._write("prune_unused_edges") as conn:
            return causal.prune_unused(conn, before)

    def get_edge(self, cause_id: str, effect_id: str,
                 kind: EdgeKind | str = EdgeKind.EXPLICIT) -> CausalEdge | None:
        with store_errors("get_edge"):
            return causal.get_edge(self._db.read(), cause_id, effect_id, kind)

    def edges_from(self, node_id: str, kinds: Collection[EdgeKind | str] | None = None,
                   ) -> list[CausalEdge]:
        """Edges out of ``node_id`` (its effects). ``kinds=None``: all but irrelevant."""
        with store_errors("edges_from"):
            return causal.edges_from(self._db.read(), node_id, kinds)

    def edges_to(self, node_id: str, kinds: Collection[EdgeKind | str] | None = None,
                 ) -> list[CausalEdge]:
        """Edges into ``node_id`` (its causes). ``kinds=None``: all but irrelevant."""
        with store_errors("edges_to"):
            return causal.edges_to(self._db.read(), node_id, kinds)

    def edges_into(self, node_ids: Iterable[str],
                   kinds: Collection[EdgeKind | str] | None = None) -> list[CausalEdge]:
        """Edges into any of ``node_ids`` in one query (``edges_to`` for many effects)."""
        with store_errors("edges_into"):
            return causal.edges_into(self._db.read(), node_ids, kinds)

    def list_edges(self, kinds: Collection[EdgeKind | str] | None = None,
                   limit: int | None = None) -> list[CausalEdge]:
        with store_errors("list_edges"):
            return causal.list_edges(self._db.read(), kinds, limit)

    def causal_bfs(
        self, start: str, *, direction: causal.Direction = "backward", max_depth: int = 4,
        kinds: Collection[EdgeKind | str] | None = None,
    ) -> list[CausalHop]:
        """Nodes within ``max_depth`` edges of ``start`` (backward: its causes), nearest first."""
        with store_errors("causal_bfs"):
            return causal.bfs(self._db.read(), start, direction, max_depth, kinds)

    # --- logs ----------------------------------------------------------------------------

    def log_admission(
        self, *, decision: str, factors: Mapping[str, float], composite: float,
        candidate: str, category: str | None = None, entry_id: str | None = None,
        now: int | None = None, off_topic: bool = False, reasons: Sequence[str] = (),
    ) -> int:
        """Record an admission-gate decision with its five factors, the off-topic flag and
        the gate's reasons; returns the row id."""
        at = self._now(now)
        with self._write("log_admission") as conn:
            return logs.log_admission(conn, decision=decision, factors=factors,
                                      composite=composite, candidate=candidate,
                                      category=category, entry_id=entry_id, now=at,
                                      off_topic=off_topic, reasons=reasons)

    def list_admissions(self, *, since: int | None = None,
                        limit: int | None = 100) -> list[AdmissionRecord]:
        """Admission decisions since ``since`` (unix ms), newest first."""
        with store_errors("list_admissions"):
            return logs.list_admissions(self._db.read(), since, limit)

    def admission_counts(self, *, since: int | None = None) -> dict[str, int]:
        with store_errors("admission_counts"):
            return logs.admission_counts(self._db.read(), since)

    def log_retrieval(self, retrieval_id: str, *, query: str, mode: str,
                      items: Sequence[Mapping[str, Any]], now: int | None = None,
                      latency_ms: float | None = None) -> None:
        """Record a retrieval: ``items`` are objects with an ``id`` and their factors."""
        at = self._now(now)
        with self._write("log_retrieval") as conn:
            logs.log_retrieval(conn, retrieval_id, query=query, mode=mode, items=items, now=at,
                               latency_ms=latency_ms)

    def get_retrieval(self, retrieval_id: str) -> RetrievalRecord | None:
        with store_errors("get_retrieval"):
            return logs.get_retrieval(self._db.read(), retrieval_id)

    def set_retrieval_outcome(self, retrieval_id: str, outcome: str, *,
                              detail: Mapping[str, Any] | None = None,
                              now: int | None = None) -> RetrievalRecord:
        """Attach an outcome report (once: a second report is a ValidationError)."""
        at = self._now(now)
        with self._write("set_retrieval_outcome") as conn:
            return logs.set_retrieval_outcome(conn, retrieval_id, outcome, detail, at)

    def retrieval_counts(self, *, since: int | None = None) -> dict[str, int]:
        with store_errors("retrieval_counts"):
            return logs.retrieval_counts(self._db.read(), since)

    def prune_logs(self, *, before: int) -> dict[str, int]:
        """Delete admission and retrieval log rows older than ``before`` (unix ms)."""
        with self._write("prune_logs") as conn:
            return logs.prune_logs(conn, before)

    def record_playbook_listing(self, cycle: int,
                                rows: Sequence[tuple[str, float, int, int]],
                                now: int | None = None) -> int:
        """Record what one cycle's PLAYBOOK.md listed: (entry_id, confidence, ✓, ✗) each."""
        at = self._now(now)
        with self._write("record_playbook_listing") as conn:
            return history.record_listing(conn, cycle, at, rows)

    def playbook_listings(self, *, since_cycle: int = 0) -> list[history.Listing]:
        with store_errors("playbook_listings"):
            return history.listings(self._db.read(), since_cycle)

    def playbook_cycles(self) -> list[tuple[int, int, int]]:
        """(cycle, recorded_at, entries listed) of every cycle that wrote PLAYBOOK.md."""
        with store_errors("playbook_cycles"):
            return history.cycles(self._db.read())

    def retrieval_series(self, *, since: int = 0) -> list[history.RetrievalPoint]:
        with store_errors("retrieval_series"):
            return history.retrieval_series(self._db.read(), since)

    def add_curator_delta(
        self, *, cycle: int, op: str, entry_id: str | None = None,
        before: Mapping[str, Any] | None = None, after: Mapping[str, Any] | None = None,
        now: int | None = None,
    ) -> int:
        """Record one curator change (before/after JSON) for the audit trail."""
        at = self._now(now)
        with self._write("add_curator_delta") as conn:
            return logs.add_curator_delta(conn, cycle=cycle, op=op, entry_id=entry_id,
                                          before=before, after=after, now=at)

    def list_curator_deltas(self, *, entry_id: str | None = None, cycle: int | None = None,
                            limit: int | None = None) -> list[CuratorDelta]:
        with store_errors("list_curator_deltas"):
            return logs.list_curator_deltas(self._db.read(), entry_id, cycle, limit)

    # --- evidence counted per entry (semantic_evidence) -----------------------------------

    def record_evidence(self, entry_id: str, episode_ids: Iterable[str], verdict: str, *,
                        cycle: int, now: int | None = None) -> list[str]:
        """Count these episodes for ``entry_id`` as ``'confirm'`` or ``'contradict'``; returns
        the ids never counted for this entry before (only those are new evidence)."""
        at = self._now(now)
        with self._write("record_evidence") as conn:
            return evidence.record_evidence(conn, entry_id, episode_ids, verdict, cycle, at)

    def list_evidence(self, entry_id: str) -> list[tuple[str, str, int, int]]:
        """(episode_id, verdict, cycle, recorded_at) counted for ``entry_id``, oldest first."""
        with store_errors("list_evidence"):
            return evidence.list_evidence(self._db.read(), entry_id)

    def last_evidence_at(self, entry_ids: Iterable[str]) -> dict[str, int]:
        """``{entry_id: when its latest evidence was counted}`` (entries with any)."""
        with store_errors("last_evidence_at"):
            return evidence.last_recorded(self._db.read(), entry_ids)

    def count_evidence(self, entry_id: str) -> tuple[int, int]:
        """(confirming, contradicting) episodes counted for ``entry_id``."""
        with store_errors("count_evidence"):
            return evidence.count_evidence(self._db.read(), entry_id)

    # --- episode bookkeeping -------------------------------------------------------------

    def episode_states(self, episode_ids: Iterable[str]) -> dict[str, EpisodeState]:
        """State per id (defaults for ids never touched)."""
        with store_errors("episode_states"):
            return logs.episode_states(self._db.read(), episode_ids)

    def get_episode_state(self, episode_id: str) -> EpisodeState:
        return self.episode_states([episode_id])[episode_id]

    def set_episode_state(self, state: EpisodeState) -> None:
        with self._write("set_episode_state") as conn:
            logs.set_episode_state(conn, state)

    def mark_consolidated(self, episode_ids: Iterable[str]) -> None:
        with self._write("mark_consolidated") as conn:
            logs.mark_consolidated(conn, episode_ids)

    def touch_episodes(self, episode_ids: Iterable[str], now: int | None = None) -> None:
        """Count one access of each episode at ``now``."""
        at = self._now(now)
        with self._write("touch_episodes") as conn:
            logs.touch_episodes(conn, episode_ids, at)

    # --- meta ----------------------------------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A JSON value the daemon keeps here (tick counter, learned weights, …)."""
        with store_errors("get_meta"):
            found, value = logs.get_meta(self._db.read(), key)
        return value if found else default

    def set_meta(self, key: str, value: Any) -> None:
        with self._write("set_meta") as conn:
            logs.set_meta(conn, key, value)
