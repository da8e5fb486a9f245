"""Curator phases over the episodic hierarchy (SPEC §8 step 8; seeds 002 and 003).

- ``hierarchical_summaries``: L1 session summaries from this cycle's episode
  clusters (grouped by strategy, coherence ≥ ``curator.l1_coherence``); every
  ``l2_every_cycles`` cycles an L2 chapter summary of the L1s written since
  the last chapter; MUS pruning of old summaries (L1 below 0.2, L2 below 0.3).
- ``update_regions``: the region MDP learns from this cycle's episodes
  (incrementally: it keeps its own watermark) and is stored in the semantic
  store's meta under ``regions`` (``RegionModel.to_dict``), where retrieval
  and feedback read P(success | region, action).

Summaries are written directly, not through the admission gate: they are
measurements of episodes, not claims (nothing to fact-check, so the firewall
and the factual factor do not apply), each episode is summarised once (the
window moves on), and the gate would skip a quiet session that reads like the
last one (cosine > 0.95), leaving holes in the chapter a later L2 is built
from. They are retrievable entries (category insight, tags ``summary`` and
``summary:l1`` / ``summary:l2``, tactical decay, self-learned, with their
parent episodes); the quality score is computed as for any entry, and MUS
pruning is their gate.

Rule-based by default (extractive); when an LLM is configured
(``curator.learn.llm_paths.paths_of``) it writes the prose of each L1 and L2
through ``LLMPaths.write_summary``, and any failure or unusable answer keeps
the extractive text. Provenance (parent episodes and L1s), tags, regime,
strategy and period never come from the model.

MUS = 0.4·retrieval frequency + 0.4·relevance + 0.2·recency (seed 002), with
retrieval frequency from ``access_count`` (log-scaled against the most
accessed summary), relevance the cosine between the summary and the centroid
of the most recent episodes (what the agent is living through now), and
recency a half-life of the tactical decay class. Only summaries older than
``mus_old_days`` can be pruned.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.cycle.state import (
    ALL_STATUSES,
    LIVE,
    Change,
    Cycle,
    apply_changes,
    list_all,
    refresh,
    window_vectors,
)
from curator.cycle.transitions import SUMMARY_TAG
from curator.hierarchy.regions import RegionModel
from curator.hierarchy.summaries import (
    SummaryDraft,
    SummaryWriter,
    cluster_episodes,
    l1_summary,
    l2_due,
    l2_summary,
    memory_utility_score,
    recency_score,
    retrieval_frequency_score,
    should_prune,
)
from grimoire.clock import MS_PER_DAY
from grimoire.context import Context
from grimoire.gate.decay import initial_confidence
from grimoire.gate.quality import score_quality
from grimoire.ids import new_id
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance

__all__ = ["REGIONS_KEY", "hierarchical_summaries", "update_regions", "write_summary"]

REGIONS_KEY = "regions"
_MAX_SUMMARY_PARENTS = 1000
_RELEVANCE_EPISODES = 200


def _level(entry: GrimoireEntry) -> int | None:
    if SUMMARY_TAG not in entry.tags:
        return None
    return 2 if "summary:l2" in entry.tags else 1


def write_summary(ctx: Context, draft: SummaryDraft, vector: npt.NDArray[np.float32],
                   cycle: int, now: int) -> str:
    """Writer thread: insert one summary entry and its audit record."""
    hits = ctx.semantic.knn(vector, 1)
    quality = score_quality(draft.content, novelty_similarity=hits[0][1] if hits else None,
                            cfg=ctx.config.quality)
    entry = GrimoireEntry(
        id=new_id(now), category=Category.INSIGHT, content=draft.content,
        confidence=initial_confidence(Provenance.SELF_LEARNED, ctx.config.decay),
        quality_score=quality.total, decay_class=DecayClass.TACTICAL,
        provenance=Provenance.SELF_LEARNED, created_at=now, last_accessed_at=now,
        market_regime=draft.regime, valid_from=draft.valid_from, valid_until=draft.valid_until,
        parent_episode_ids=draft.parent_episode_ids[-_MAX_SUMMARY_PARENTS:],
        parent_entry_ids=draft.parent_summary_ids, tags=draft.tags, strategy=draft.strategy,
        status=EntryStatus.CANDIDATE, updated_at=now)
    with ctx.semantic.transaction():
        ctx.semantic.insert_entry(entry, vector)
        ctx.semantic.add_curator_delta(
            cycle=cycle, op=f"summary_l{draft.level}", entry_id=entry.id, before=None,
            after={"why": f"L{draft.level} summary of {len(draft.parent_episode_ids)} episodes"
                          + (f" and {len(draft.parent_summary_ids)} L1 summaries"
                             if draft.parent_summary_ids else ""),
                   "detail": {"coherence": draft.coherence}}, now=now)
    return entry.id


def _write_all(cy: Cycle, drafts: list[SummaryDraft]) -> int:
    if not drafts:
        return 0
    vectors = cy.ctx.embedder.embed([d.content for d in drafts])
    for draft, vector in zip(drafts, vectors, strict=True):
        made = cy.ctx.writer.call(functools.partial(write_summary, cy.ctx, draft, vector,
                                                    cy.number, cy.now))
        refresh(cy, [made])
    return len(drafts)


def _summary_writer(ctx: Context) -> SummaryWriter | None:
    """The configured LLM's summary writer, or None: extractive only, no network."""
    from curator.learn.llm_paths import paths_of  # the LLM is optional; import only its holder

    return paths_of(ctx)


def _l1_drafts(cy: Cycle) -> list[SummaryDraft]:
    cfg = cy.ctx.config.curator
    if len(cy.window) < cfg.compress_min_episodes:
        return []
    clusters = cluster_episodes(cy.window, window_vectors(cy), min_size=cfg.compress_min_episodes,
                                coherence=cfg.l1_coherence, group_by=("strategy",))
    chosen = sorted(clusters, key=lambda c: (-c.size, c.indices[0]))[:cfg.l1_max_per_cycle]
    chosen.sort(key=lambda c: c.indices[0])
    llm = _summary_writer(cy.ctx)
    return [l1_summary(c, cy.window, examples=cfg.summary_examples, llm=llm) for c in chosen]


def _l2_draft(cy: Cycle, summaries: list[GrimoireEntry]) -> SummaryDraft | None:
    since = cy.previous.last_l2_at
    l1s = [e for e in summaries if _level(e) == 1 and e.status is not EntryStatus.ARCHIVED
           and (since is None or e.created_at > since)]
    if not l1s:
        return None
    covered = set(i for e in l1s for i in e.parent_episode_ids)
    # One snapshot scan of the chapter's period decodes rows in batches; a look-up per id
    # cost ~1 ms each (1.2-1.6 s for a 10-cycle chapter in the simulator).
    start = min((e.valid_from for e in l1s if e.valid_from is not None), default=None)
    episodes = [ep for ep in cy.ctx.episodes.scan(since_ms=start) if ep.id in covered]
    return l2_summary(l1s, episodes[-_MAX_SUMMARY_PARENTS:],
                      examples=cy.ctx.config.curator.summary_examples,
                      llm=_summary_writer(cy.ctx))


def _recent_centroid(cy: Cycle) -> npt.NDArray[np.float64] | None:
    recent = cy.ctx.episodes.recent(_RELEVANCE_EPISODES)
    if not recent:
        return None
    rows = cy.ctx.episodes.vectors_for([e.id for e in recent]).astype(np.float64)
    total = rows.sum(axis=0)
    norm = float(np.linalg.norm(total))
    return total / norm if norm > 0 else None


def _mus_prune(cy: Cycle, summaries: list[GrimoireEntry]) -> tuple[int, list[Change]]:
    cfg = cy.ctx.config.curator
    old_ms = cfg.mus_old_days * MS_PER_DAY
    old = [e for e in summaries if e.status is not EntryStatus.ARCHIVED
           and cy.now - e.created_at >= old_ms]
    if not old:
        return 0, []
    centroid = _recent_centroid(cy)
    most = max(e.access_count for e in summaries)
    half_life = int((cy.ctx.config.decay.half_life_days.get("tactical") or 7.0) * MS_PER_DAY)
    changes: list[Change] = []
    for entry in old:
        level = _level(entry) or 1
        vector = cy.ctx.semantic.get_embedding(entry.id)
        relevance = 0.0
        if centroid is not None and vector is not None:
            relevance = min(1.0, max(0.0, float(vector.astype(np.float64) @ centroid)))
        age = cy.now - entry.created_at
        mus = memory_utility_score(retrieval_frequency_score(entry.access_count, most),
                                   relevance, recency_score(age, half_life),
                                   weights=cfg.mus_weights)
        if should_prune(level, mus, age, cfg):
            threshold = cfg.mus_prune_l1 if level == 1 else cfg.mus_prune_l2
            changes.append(Change(
                entry.id, "prune_summary", _archive,
                why=f"L{level} summary {age / MS_PER_DAY:.1f} days old with MUS {mus:.3f} < "
                    f"{threshold}",
                detail={"mus": round(mus, 4), "relevance": round(relevance, 4),
                        "access_count": entry.access_count}))
    return len(old), changes


def _archive(cur: GrimoireEntry) -> GrimoireEntry | None:
    if cur.status is EntryStatus.ARCHIVED:
        return None
    return dataclasses.replace(cur, status=EntryStatus.ARCHIVED)


def hierarchical_summaries(cy: Cycle) -> dict[str, Any]:
    """Step 8a: L1 summaries of this cycle, an L2 chapter when due, MUS pruning."""
    l1 = _write_all(cy, _l1_drafts(cy))
    summaries = [e for e in list_all(cy, ALL_STATUSES, (Category.INSIGHT,))
                 if _level(e) is not None]
    l2 = 0
    if l2_due(cy.number, cy.ctx.config.curator):
        draft = _l2_draft(cy, summaries)
        if draft is not None:
            l2 = _write_all(cy, [draft])
        cy.notes["last_l2_at"] = cy.now
    live = [e for e in summaries if e.status in LIVE]
    considered, changes = _mus_prune(cy, live)
    pruned = len(apply_changes(cy, changes))
    return {"l1": l1, "l2": l2, "old_summaries": considered, "mus_pruned": pruned}


def update_regions(cy: Cycle) -> dict[str, Any]:
    """Step 8b: learn the region MDP from the new episodes; persist it in meta."""
    stored = cy.ctx.semantic.get_meta(REGIONS_KEY, None)
    model = (RegionModel.from_dict(stored) if stored is not None
             else RegionModel.from_config(cy.ctx.config.curator))
    used = model.update_from_episodes(cy.window, window_vectors(cy)) if cy.window else 0
    if used:
        cy.ctx.writer.call(functools.partial(cy.ctx.semantic.set_meta, REGIONS_KEY,
                                             model.to_dict()))
    return {"episodes": used, "regions": model.n_regions, "refits": model.refits}
