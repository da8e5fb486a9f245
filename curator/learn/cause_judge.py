"""Seed 001's recording ritual with an LLM: a new event's likely causes judged by the model.

Without an LLM, a new episode's causes are the rule-based auto-links (seed 000's window and
weight, ``grimoire.methods.causal.link_new_episodes``). With one configured, the
post-write hook ``judge_causes_hook`` hands each new episode that got auto-linked causes
and names none itself (a ``causal_hint`` is the writer's word) to the LLM worker, off the
writer thread; there the model is asked, strongest candidate first and for at most
``llm.cause_candidates`` of them, "did X directly lead to Y?":

- the first "Yes: …" is the cause: its edge keeps its weight and gets the model's sentence
  as its relationship; the event's other auto-linked causes are dropped (seed 001 records
  one cause per event);
- "No." for every candidate judged: the event is a root, its auto-linked causes are dropped;
- the model fails (network, garbage): logged and counted, the rule-based links stand.

Must not call the network on the writer thread.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from curator.learn.llm_paths import LLMPaths, paths_of
from grimoire.context import Context
from grimoire.errors import GrimoireError
from grimoire.logs import get_logger
from grimoire.records import Episode
from grimoire.stores.semantic.types import CausalEdge, EdgeKind

__all__ = ["judge_causes", "judge_causes_hook"]

log = get_logger(__name__)


def judge_causes_hook(ctx: Context, episodes: Sequence[Episode], _vectors: Any) -> None:
    """Post-write hook: queue the LLM's judgement of each new event's auto-linked causes."""
    paths = paths_of(ctx)
    if paths is None or ctx.config.llm.cause_candidates < 1:
        return
    for episode in episodes:
        if episode.causal_hint or not ctx.semantic.edges_to(episode.id, [EdgeKind.AUTO]):
            continue
        job = functools.partial(_judge_job, ctx, paths, episode)
        if not paths.worker.submit(job):
            log.warning("causal.llm.dropped", episode_id=episode.id, reason="queue full")


def _judge_job(ctx: Context, paths: LLMPaths, episode: Episode) -> None:
    judge_causes(ctx, paths, episode)


def judge_causes(ctx: Context, paths: LLMPaths, episode: Episode) -> str:
    """Judge ``episode``'s auto-linked causes (worker thread); what was decided."""
    candidates = ctx.semantic.edges_to(episode.id, [EdgeKind.AUTO])
    confirmed: tuple[CausalEdge, str | None] | None = None
    for edge in candidates[:ctx.config.llm.cause_candidates]:
        cause = ctx.episodes.get(edge.cause_id)
        if cause is None:
            continue
        verdict = paths.judge_causality(cause.text, episode.text, episode_id=episode.id)
        if verdict is None:
            return "unjudged"  # the LLM failed: the rule-based links stand
        if verdict[0]:
            confirmed = (edge, verdict[1])
            break
    drop = [(e.cause_id, e.effect_id) for e in candidates
            if confirmed is None or e.cause_id != confirmed[0].cause_id]

    def apply() -> None:
        with ctx.semantic.transaction():
            if confirmed is not None and confirmed[1]:
                edge = confirmed[0]
                ctx.semantic.upsert_edge(CausalEdge(
                    edge.cause_id, edge.effect_id, EdgeKind.AUTO, edge.weight, confirmed[1],
                    edge.lag_ms), now=ctx.now())
            ctx.semantic.delete_edges(drop, EdgeKind.AUTO)

    try:
        ctx.writer.call(apply)
    except GrimoireError as exc:  # e.g. BusyError while shutting down: logged, dropped
        log.warning("causal.llm.failed", episode_id=episode.id, error=str(exc))
        return "failed"
    decided = "linked" if confirmed is not None else "root"
    log.info("causal.llm.judged", episode_id=episode.id, decided=decided,
             cause_id=confirmed[0].cause_id if confirmed else None, dropped=len(drop))
    return decided
