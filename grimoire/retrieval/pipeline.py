"""``retrieve``: the hybrid pipeline of SPEC §9 from the stores to the agent's context.

    embed query ─▶ candidates (vector, BM25, graph; top 20 per backend and kind)
      ─▶ RRF (k=60) ─▶ anchored min-max ─▶ rerank (learned weights; + mood factor)
      ─▶ Mattar–Daw replay multiplier (episodes) ─▶ TCMF causal boost, bloodstain
      ─▶ MMR (λ 0.7) + dedup ─▶ contrarian injection ─▶ token budget ─▶ log

Replay (seed 004, Mattar & Daw): an episode's utility U = gain × need in
[0, 1] (|P&L| over the largest in the pool; need = 1 / time since it was last
served to a decision, capped at 1 within an hour; never served: since it
happened) multiplies its score by ``1 + retrieval.replay_weight · U``
(0.2: at most +20 %). It sits after the rerank so the factor breakdown
shows it as its own line, and before the causal boost, which multiplies too.

The causal event is ``event_id`` when given, else the query's top episode
hit (the best fused, RRF, episode across the backends); its ancestors are
pooled (see ``pipeline_sources``) and boost whatever resembles them. When
the event has causes, the result also carries its causal chain (seed 001),
oldest first.

Modes: ``deciding`` (default) logs the retrieval and queues access
bookkeeping; ``browse`` only logs it (so it can be inspected; its outcome
cannot be reported); ``auto`` first asks ``should_retrieve`` (curiosity =
1 − best entry cosine, coverage = active entries at ≥
``retrieval.auto_coverage_similarity``, the mood's arousal) and retrieves
what it decides, returning the decision beside the items. Contrarian
injection (anti-rumination): the first non-browse retrieval with a mood
after each ``contrarian_every_ticks`` boundary of ``ctx.tick`` forces in the
best pooled item of opposite valence (as the last item).

Reads run on the caller's thread; the only write (log + bookkeeping) is
handed to the writer without waiting (``pipeline_writes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grimoire.causal import chain_for, chain_items
from grimoire.context import Context
from grimoire.embed import embed_one
from grimoire.ids import new_id
from grimoire.mentions import ENTRY_WATERMARK, index_new_entries
from grimoire.records import EntryStatus
from grimoire.retrieval.budget import fit
from grimoire.retrieval.candidates import Breakdown, Candidate
from grimoire.retrieval.causal_boost import apply as apply_causal_boost
from grimoire.retrieval.decide import (
    RetrievalDecision,
    contrarian_pick,
    curiosity_from_similarity,
    replay_rank,
    should_retrieve,
)
from grimoire.retrieval.fusion import rrf_from_candidates
from grimoire.retrieval.mmr import select as mmr_select
from grimoire.retrieval.pipeline_log import LogJob, log_item, submit_log
from grimoire.retrieval.pipeline_params import RetrieveRequest, parse_request
from grimoire.retrieval.pipeline_sources import (
    Pool,
    ancestors,
    candidates,
    fetch_entries,
    fetch_rest,
    require_event,
)
from grimoire.retrieval.pipeline_support import learned_weights, token_counter
from grimoire.retrieval.pipeline_writes import submit
from grimoire.retrieval.render import context_block, narrative
from grimoire.retrieval.rerank import FACTORS, score_all

__all__ = ["retrieve"]

_CONTRARIAN = "retrieval.contrarian_block"


def _decide(ctx: Context, req: RetrieveRequest, pool: Pool) -> RetrievalDecision:
    cfg = ctx.config.retrieval
    best = max((s for _, s in pool.entry_similarity), default=None)
    coverage = sum(1 for e, s in pool.entry_similarity
                   if s >= cfg.auto_coverage_similarity and e.status is EntryStatus.ACTIVE)
    arousal = req.mood.arousal if req.mood is not None else None
    return should_retrieve(curiosity_from_similarity(best), coverage, arousal, req.k, cfg)


def _replay(ctx: Context, cands: Mapping[str, Candidate], scores: dict[str, float],
            factors: dict[str, Breakdown], t: int) -> None:
    """Mattar–Daw: multiply episodes' scores by 1 + w · gain · need (in place)."""
    weight = ctx.config.retrieval.replay_weight
    episodes = [c for c in cands.values() if c.kind == "episode" and c.gain]
    if weight <= 0.0 or not episodes:
        return
    states = ctx.semantic.episode_states([c.id for c in episodes])
    last: dict[str, int] = {}
    for episode_id, state in states.items():
        served = [v for v in (state.last_accessed_at, state.replayed_at)
                  if v is not None and v <= t]
        if served:
            last[episode_id] = max(served)
    floor = ctx.config.retrieval.replay_need_floor_ms
    for episode_id, utility in replay_rank(episodes, last, t, floor):
        if utility <= 0.0:
            continue
        multiplier = 1.0 + weight * utility
        scores[episode_id] *= multiplier
        factors[episode_id] = {**factors[episode_id], "replay": {
            "value": utility, "multiplier": multiplier,
            "last_served": float(last.get(episode_id, cands[episode_id].timestamp))}}


def _contrarian(ctx: Context, req: RetrieveRequest, pool: Sequence[Candidate],
                scores: Mapping[str, float], chosen: list[str]) -> str | None:
    """Force one opposite-valence item in, once per contrarian_every_ticks block of ticks."""
    every = ctx.config.retrieval.contrarian_every_ticks
    if req.mood is None or req.mode == "browse" or every <= 0 or ctx.tick < every:
        return None
    block = ctx.tick // every
    with ctx.state_lock:
        if ctx.extras.get(_CONTRARIAN, 0) >= block:
            return None
        picked = contrarian_pick(pool, scores, req.mood, ctx.config.retrieval.contrarian_items,
                                 exclude=chosen)
        if picked:
            ctx.extras[_CONTRARIAN] = block
    if not picked:
        return None
    if len(chosen) >= req.k:
        chosen[-1:] = picked[:1]
    else:
        chosen.append(picked[0])
    return picked[0]


def _rrf_norm(fused: Mapping[str, float], pooled: Sequence[Candidate], rrf_k: int,
              depth: int) -> dict[str, float]:
    """Fused scores in [0, 1], min-max with the minimum anchored at a last-place vote.

    ``fusion.normalise`` takes the pool's own minimum, which for a small pool
    turns a one-rank difference between equally similar items into 1 vs 0
    (30 % of the score). Anchoring the minimum at ``1 / (k + depth)`` — one
    backend's last rank — keeps the spread of a full pool (whose minimum is
    that anyway) and leaves near-ties near-tied in a small one.
    """
    floor = 1.0 / (rrf_k + depth)
    values = {c.id: fused.get(c.id, 0.0) for c in pooled}
    top = max(values.values(), default=0.0) - floor
    if top <= 0.0:  # every ranked item at (or past) last place: all equally relevant
        return {i: 1.0 if v > 0.0 else 0.0 for i, v in values.items()}
    return {i: max(0.0, v - floor) / top for i, v in values.items()}


def _top_episode(cands: Mapping[str, Candidate], fused: Mapping[str, float]) -> str | None:
    """The query's event when none is given: the episode the backends agree on most (RRF)."""
    episodes = [i for i, c in cands.items() if c.kind == "episode" and fused.get(i, 0.0) > 0.0]
    return min(episodes, key=lambda i: (-fused[i], i)) if episodes else None


def _catch_up_mentions(ctx: Context) -> None:
    """Schedule indexing of new entries' mentions when the watermark is behind (no wait)."""
    seen = ctx.extras.get(ENTRY_WATERMARK)
    if seen is None:
        seen = ctx.extras[ENTRY_WATERMARK] = int(ctx.semantic.get_meta(ENTRY_WATERMARK, 0))
    if ctx.semantic.max_entry_rid() > seen:
        submit(ctx, "mentions.entries", "mentions.entries", None,
               lambda jobs: [index_new_entries(ctx)] + [0] * (len(jobs) - 1))


def _item(c: Candidate, rank: int, score: float, breakdown: Breakdown, text: str,
          tokens: int, truncated: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"id": c.id, "kind": c.kind, "rank": rank, "content": text,
                            "score": round(score, 6), "factors": breakdown,
                            "provenance": {**c.provenance, "ref": c.ref},
                            "timestamp": c.timestamp, "confidence": c.confidence,
                            "regime": c.regime, "strategy": c.strategy, "tokens": tokens}
    if c.ref is not None:
        item["ref"] = c.ref
    if c.category is not None:
        item["category"] = c.category
    if truncated:
        item["truncated"] = True
    return item


def retrieve(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run the pipeline for untrusted ``params`` (API.md ``retrieve``); see the module doc."""
    cfg = ctx.config.retrieval
    req = parse_request(params, cfg)
    now = ctx.now()
    t = now if req.at is None else req.at
    if req.event_id is not None:
        require_event(ctx, req.event_id, req.at)
    q = embed_one(ctx.embedder, req.query)
    pool = Pool()
    kinds, k = req.kinds, req.k
    if "entry" in kinds or req.mode == "auto":
        fetch_entries(ctx, req, q, pool)
    decision: RetrievalDecision | None = None
    if req.mode == "auto":
        decision = _decide(ctx, req, pool)
        kinds = tuple(kind for kind in decision.kinds if kind in req.kinds)
        k = decision.k
    if kinds:
        fetch_rest(ctx, req, q, pool, kinds)
        if pool.graph:
            _catch_up_mentions(ctx)
    cands = candidates(ctx, req, pool, t, kinds) if kinds else {}
    fused = rrf_from_candidates(cands.values(), cfg.rrf_k)
    start = req.event_id or _top_episode(cands, fused)
    found = ancestors(ctx, req, start, cands, t, kinds) if start and kinds else []

    pooled = list(cands.values())
    weights = learned_weights(ctx)
    rrf_norm = _rrf_norm(fused, pooled, cfg.rrf_k, cfg.candidates)
    scores, factors = score_all(pooled, rrf_norm, t, None if req.regime is None
                                else req.regime.value, weights.weights, req.mood, cfg)
    _replay(ctx, cands, scores, factors, t)
    scores, factors = apply_causal_boost(scores, pooled, found, cfg, factors)
    chosen = mmr_select(pooled, scores, cfg.mmr_lambda, k, cfg.mmr_duplicate)
    contrarian = _contrarian(ctx, req, pooled, scores, chosen)
    if contrarian is not None:
        factors[contrarian] = {**factors[contrarian], "contrarian": {"value": 1.0}}
    fitted = fit([cands[i] for i in chosen], req.max_tokens, token_counter(ctx))

    baseline = {name: round(sum(f[name]["value"] for f in factors.values()) / len(factors), 6)
                for name in FACTORS} if factors else {}
    context = {"regime": None if req.regime is None else req.regime.value,
               "strategy": req.strategy, "baseline": baseline}
    retrieval_id = new_id(now)
    items, logged = [], []
    for rank, f in enumerate(fitted, start=1):
        c = f.item
        items.append(_item(c, rank, scores[c.id], factors[c.id], f.text, f.tokens, f.truncated))
        logged.append(log_item(c, rank, scores[c.id], factors[c.id], context))
    deciding = req.mode != "browse"
    submit_log(ctx, LogJob(
        retrieval_id, req.query, "deciding" if deciding else "browse", logged, now,
        tuple(i["id"] for i in items if i["kind"] == "episode") if deciding else (),
        tuple(i["id"] for i in items if i["kind"] == "entry") if deciding else ()))

    result: dict[str, Any] = {
        "retrieval_id": retrieval_id, "mode": req.mode, "items": items,
        "tokens": sum(f.tokens for f in fitted), "max_tokens": req.max_tokens,
        "trace": {"backends": {name: len(ids) for name, ids in pool.lists.items()
                               if not name.startswith("_")},
                  "pool": len(pooled), "event_id": start, "ancestors": len(found),
                  "weights": dict(weights.weights), "graph": pool.graph,
                  "contrarian": contrarian, "at": req.at},
    }
    if decision is not None:
        result["decision"] = {"mode": decision.mode.value, "k": decision.k,
                              "kinds": list(decision.kinds), "reason": decision.reason}
    links, nodes = chain_for(ctx, start, req.at) if start and found else ([], {})
    if len(links) > 1:
        result["causal_chain"] = {
            "event_id": start, "chain": chain_items(links, nodes),
            "narrative": narrative(links, lambda i: nodes[i].text if i in nodes else i)}
    if req.format == "context":
        result["context"] = context_block(
            req.query, [f.item for f in fitted], links if len(links) > 1 else (),
            lambda i: nodes[i].text if i in nodes else i,
            lambda i: nodes[i].time if i in nodes else None,
            {f.item.id: scores[f.item.id] for f in fitted},
            {f.item.id: f.text for f in fitted})
    return result
