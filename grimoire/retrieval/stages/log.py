"""What a retrieval writes: its log row and, in deciding mode, access bookkeeping.

The log row (semantic ``retrieval_log``) holds every returned item with its
rank, score and factor breakdown, so that ``outcome.report`` can credit the
factors that put the used items there. Each logged item also carries the
retrieval's context (query regime and strategy, and ``baseline``: each
rerank factor's mean over the whole candidate pool — the Hedge update's
reference for "was this factor higher on what was used than on what was
offered"). It is repeated per item rather than kept apart because the log
table has no column for it and the bytes are few.

Bookkeeping (deciding and auto modes only; browse changes nothing):
episodes served get ``access_count + 1`` and ``last_accessed_at = now``
(``episode_state``: Mattar–Daw need reads it); entries served get
``access_count + 1`` (MUS retrieval frequency). An entry's decay clock and
strength are NOT touched here: SPEC §4 moves them only on a positive outcome.

Everything runs on the writer thread, batched across concurrent retrievals
(``stages.writes``). Must not rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grimoire.context import Context
from grimoire.retrieval.candidates import Breakdown, Candidate
from grimoire.retrieval.stages.writes import submit

__all__ = ["LogJob", "log_item", "submit_log", "write_jobs"]

_BATCH_KEY = "retrieval.log"


@dataclass(frozen=True, slots=True)
class LogJob:
    retrieval_id: str
    query: str
    mode: str  # "deciding" | "browse" (auto retrievals are decision-time: deciding)
    items: Sequence[Mapping[str, Any]]
    now: int
    episode_ids: tuple[str, ...] = field(default=())
    entry_ids: tuple[str, ...] = field(default=())
    latency_ms: float | None = None  # the retrieval's wall time, as its trace reports it


def _rounded(breakdown: Breakdown) -> dict[str, dict[str, float]]:
    return {name: {key: round(float(value), 6) for key, value in parts.items()}
            for name, parts in breakdown.items()}


def log_item(candidate: Candidate, rank: int, score: float, breakdown: Breakdown,
             context: Mapping[str, Any]) -> dict[str, Any]:
    """One returned item as the log keeps it."""
    return {
        "id": candidate.id,
        "kind": candidate.kind,
        "rank": rank,
        "score": round(score, 6),
        "factors": _rounded(breakdown),
        "context": dict(context),
    }


def write_jobs(ctx: Context, jobs: Sequence[LogJob]) -> list[None]:
    """Writer-thread handler: every job's log row and bookkeeping in one transaction."""
    with ctx.semantic.transaction():
        for job in jobs:
            ctx.semantic.log_retrieval(job.retrieval_id, query=job.query, mode=job.mode,
                                       items=job.items, now=job.now, latency_ms=job.latency_ms)
            if job.episode_ids:
                ctx.semantic.touch_episodes(job.episode_ids, now=job.now)
            if job.entry_ids:
                ctx.semantic.bump_entry_access(job.entry_ids)
    return [None] * len(jobs)


def submit_log(ctx: Context, job: LogJob) -> None:
    """Hand the job to the writer without waiting (``stages.writes.wait`` to wait)."""
    submit(ctx, job.retrieval_id, _BATCH_KEY, job, lambda jobs: write_jobs(ctx, jobs))
