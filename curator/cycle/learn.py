"""Curator phases that turn new episodes into knowledge (SPEC §8 step 2).

- ``distil``: the ExpeL distiller and causal discovery, per strategy seen in
  the new episodes, through ``curator.learn.hook.distill(ctx, strategy, now)``
  (it applies its operations through the admission gate itself). That module
  is the learning core's wiring; when it is not installed the phase says so
  (``skipped``) and the cycle goes on.
- ``compress``: the new episodes are clustered within each regime (greedy
  cosine clustering, coherence > ``curator.compress_coherence``, at least
  ``compress_min_episodes`` members); each cluster becomes one insight
  proposed through ``knowledge.admit`` at the cluster's mean episode
  confidence × ``compress_factor`` (SPEC: 0.9 for compression loss), so a
  pattern that recurs cycle after cycle merges into, and upvotes, the insight
  it made the first time instead of piling up copies. The episodes of a
  cluster the gate saw are marked consolidated.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from curator.cycle.state import Cycle, admit_recorded, invalidate, refresh, window_vectors
from curator.hierarchy.summaries import cluster_episodes, l1_summary
from grimoire.gate.admit import Proposal
from grimoire.logs import get_logger
from grimoire.records import Category, Episode, EpisodeType, Provenance

__all__ = ["compress", "distil", "learn_module"]

log = get_logger(__name__)

DistillFn = Callable[[Any, "str | None", int], Mapping[str, Any]]
COMPRESSED_TAG = "compressed"


def learn_module() -> DistillFn | None:
    """``curator.learn.hook.distill`` when the learning core's wiring is installed, else None."""
    try:
        module = importlib.import_module("curator.learn.hook")
    except ModuleNotFoundError as exc:
        if exc.name != "curator.learn.hook":
            raise  # curator.learn.hook exists but one of its imports is broken: say so
        return None
    fn = getattr(module, "distill", None)
    return fn if callable(fn) else None


def distil(cy: Cycle) -> dict[str, Any]:
    """Step 2a: run the distiller and causal discovery for every strategy with new episodes."""
    fn = learn_module()
    if fn is None:
        return {"skipped": "not available: curator.learn.hook is not installed"}
    strategies = sorted({e.strategy for e in cy.window}, key=lambda s: (s is not None, s or ""))
    totals: dict[str, Any] = {"strategies": len(strategies)}
    if strategies:
        invalidate(cy)  # the learners write entries and votes of their own
    for strategy in strategies:
        result = fn(cy.ctx, strategy, cy.now)
        for key, value in result.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    return totals


def _episode_confidence(cy: Cycle, episode: Episode) -> float:
    # Episodes have no confidence of their own; retrieval ranks them with these same values.
    cfg = cy.ctx.config.retrieval
    if episode.type is EpisodeType.SAFETY_INCIDENT:
        return cfg.safety_incident_confidence
    return cfg.episode_confidence


def compress(cy: Cycle) -> dict[str, Any]:
    """Step 2b: 3+ coherent episodes in one regime → one insight at mean confidence × 0.9."""
    cfg = cy.ctx.config.curator
    counts: dict[str, Any] = {"clusters": 0, "proposed": 0, "admitted": 0, "merged": 0,
                              "skipped": 0, "rejected": 0, "quarantined": 0, "consolidated": 0}
    if len(cy.window) < cfg.compress_min_episodes:
        return counts
    states = cy.ctx.semantic.episode_states([e.id for e in cy.window])
    keep = [i for i, e in enumerate(cy.window)
            if e.regime is not None and not states[e.id].consolidated]
    episodes = [cy.window[i] for i in keep]
    if len(episodes) < cfg.compress_min_episodes:
        return counts
    vectors = window_vectors(cy)[keep]
    clusters = cluster_episodes(episodes, vectors, min_size=cfg.compress_min_episodes,
                                coherence=cfg.compress_coherence, group_by=("regime",))
    counts["clusters"] = len(clusters)
    chosen = sorted(clusters, key=lambda c: (-c.size, c.indices[0]))[:cfg.compress_max_per_cycle]
    chosen.sort(key=lambda c: c.indices[0])
    proposals: list[tuple[Proposal, list[str]]] = []
    for cluster in chosen:
        members = [episodes[i] for i in cluster.indices]
        draft = l1_summary(cluster, episodes, examples=1)
        confidence = (sum(_episode_confidence(cy, e) for e in members) / len(members)
                      * cfg.compress_factor)
        tags = (COMPRESSED_TAG, *(t for t in draft.tags if not t.startswith("summary")))
        proposals.append((Proposal(
            category=Category.INSIGHT, content=draft.content,
            provenance=Provenance.SELF_LEARNED, confidence=round(confidence, 6), tags=tags,
            strategy=draft.strategy, regime=draft.regime,
            parent_episode_ids=draft.parent_episode_ids[-200:], support=cluster.size,
            event_time=draft.valid_until), [e.id for e in members]))
    if not proposals:
        return counts
    embedded = cy.ctx.embedder.embed([p.content for p, _ in proposals])
    for (proposal, member_ids), vector in zip(proposals, embedded, strict=True):
        why = (f"{len(member_ids)} coherent episodes in regime "
               f"{proposal.regime.value if proposal.regime else '?'}")
        result = cy.ctx.writer.call(functools.partial(
            admit_recorded, cy, proposal, vector, op="compress", why=why,
            detail={"episodes": len(member_ids), "confidence": proposal.confidence},
            consolidate=member_ids))
        refresh(cy, [result.get("id")])
        counts["proposed"] += 1
        decision = str(result["decision"])
        counts[decision] = counts.get(decision, 0) + 1
        if decision in ("admitted", "merged", "skipped"):
            counts["consolidated"] += len(member_ids)
    log.debug("curator.compress", cycle=cy.number, **counts)
    return counts
