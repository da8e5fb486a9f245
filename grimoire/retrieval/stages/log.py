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
(``stages.writes``), and so does the log's own arithmetic: rounding the
breakdowns and the baseline are computed there from the breakdowns the
pipeline hands over (it builds them per retrieval and never changes them
after the hand-off), not on the query's path. Must not rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grimoire.context import Context
from grimoire.guard.redact import redactor
from grimoire.retrieval.candidates import Breakdown, Candidate
from grimoire.retrieval.rerank import FACTORS
from grimoire.retrieval.stages.writes import submit

__all__ = ["LogJob", "baseline", "log_item", "logged", "submit_log", "write_jobs"]

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
    # Every pooled item's breakdown: the baseline (per factor, the pool's mean) comes from them
    pool_factors: Sequence[Breakdown] = field(default=())
    # (cause, effect) of the causal chain served to a decision: one use each
    edges_used: tuple[tuple[str, str], ...] = field(default=())


def _rounded(breakdown: Breakdown) -> dict[str, dict[str, float]]:
    return {name: {key: round(float(value), 6) for key, value in parts.items()}
            for name, parts in breakdown.items()}


def log_item(candidate: Candidate, rank: int, score: float, breakdown: Breakdown,
             context: Mapping[str, Any]) -> dict[str, Any]:
    """One returned item as handed to the log (``logged`` rounds it on the writer thread)."""
    return {
        "id": candidate.id,
        "kind": candidate.kind,
        "rank": rank,
        "score": round(score, 6),
        "factors": breakdown,
        "context": context,
    }


def baseline(pool_factors: Sequence[Breakdown]) -> dict[str, float]:
    """Each rerank factor's mean value over the pool (the Hedge update's reference)."""
    if not pool_factors:
        return {}
    return {name: round(sum(float(f[name]["value"]) for f in pool_factors) / len(pool_factors),
                        6) for name in FACTORS}


def logged(job: LogJob) -> list[dict[str, Any]]:
    """The job's items as the log keeps them: breakdowns rounded, context with the baseline."""
    base = baseline(job.pool_factors)
    return [{**item, "factors": _rounded(item["factors"]),
             "context": {**item["context"], "baseline": base}} for item in job.items]


def write_jobs(ctx: Context, jobs: Sequence[LogJob]) -> list[None]:
    """Writer-thread handler: every job's log row and bookkeeping in one transaction."""
    secrets = redactor(ctx.config.privacy.redact, ctx.config.privacy.phone_region)
    with ctx.semantic.transaction():
        for job in jobs:
            # The query is kept in the log: with privacy.redact its secrets are not.
            query = job.query if secrets is None else secrets.redact(job.query)
            ctx.semantic.log_retrieval(job.retrieval_id, query=query, mode=job.mode,
                                       items=logged(job), now=job.now,
                                       latency_ms=job.latency_ms)
            if job.episode_ids:
                ctx.semantic.touch_episodes(job.episode_ids, now=job.now)
            if job.entry_ids:
                ctx.semantic.bump_entry_access(job.entry_ids)
            if job.edges_used:
                ctx.semantic.mark_edges_used(job.edges_used, now=job.now)
    return [None] * len(jobs)


def submit_log(ctx: Context, job: LogJob) -> None:
    """Hand the job to the writer without waiting (``stages.writes.wait`` to wait)."""
    submit(ctx, job.retrieval_id, _BATCH_KEY, job, lambda jobs: write_jobs(ctx, jobs))
