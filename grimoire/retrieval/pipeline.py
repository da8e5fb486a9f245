"""``retrieve``: the hybrid pipeline of SPEC §9 from the stores to the agent's context.

    embed query ─▶ candidates (vector, BM25, graph; top 20 per backend and kind)
      ─▶ entity expansion (query-named actors; the second hop from the first hop's
         entities: ``stages.hop``)
      ─▶ fusion (convex by default, RRF k=60 optional) ─▶ relevance in [0, 1]
      ─▶ rerank (learned weights; + mood factor)
      ─▶ Mattar–Daw replay multiplier (episodes) ─▶ TCMF causal boost (on a chain walk,
         or when the query names its event), bloodstain
      ─▶ relevance gate (``relevance``: tier + s / (1 + s)) ─▶ lessons first (a rule
         above the episodes it covers: ``lessons``) ─▶ MMR (λ 0.7, within tiers) + dedup
      ─▶ contrarian injection ─▶ ordered by the gated score
      ─▶ token budget ─▶ log

Relevance first (``relevance``, ``stages.relevance``): every boost above reorders items
within their relevance tier (the query repeats the item's text; the item matches the
query lexically or semantically at least ``retrieval.relevance_floor`` of the query's
best; neither) and never across; on a chain walk (a why question, or an explicit
``event_id``) an item the causal stream boosted counts as relevant. The item's
``score`` is the gated score the answer is sorted by; MMR only chooses which items.

Replay (seed 004, Mattar & Daw): an episode's utility U = gain × need in
[0, 1] (|P&L| over the largest in the pool; need = 1 / time since it was last
served to a decision, capped at 1 within an hour; never served: since it
happened) multiplies its score by ``1 + retrieval.replay_weight · U``
(0.2: at most +20 %). It sits after the rerank so the factor breakdown
shows it as its own line, and before the causal boost, which multiplies too.

The causal event is ``event_id`` when given, else the query's top episode
hit (the best fused, RRF, episode across the backends); its ancestors are
pooled (see ``stages.pool``) and, on a chain walk or when the query repeats the event's
text (it names the event), boost whatever resembles them: the causes of the top hit of any
other question are not what it asked about. On a chain walk (a why
question or an ``event_id``; or for the reranker) the ancestors' witnesses join the pool
too (``causal_additive.witness_ids``): elsewhere the gate would keep them below every
relevant item. When
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

Fusion (``retrieval.fusion``): by default a convex combination of each backend's
own scores, min-max normalised per list, weighted per backend
(``retrieval.fusion_weights``, fitted on data: see ``retrieval.fusion_provenance``);
relevance for the rerank is that sum divided by the pool's best. With ``"rrf"``, the
fused RRF score min-max normalised with the minimum anchored at one backend's last
place (``fusion.normalise_anchored``), so a small pool does not turn a one-rank
difference into 0 vs 1.

Reads run on the caller's thread (the keyword and graph backends in a small
read pool, overlapping the query embedding); the only write (log +
bookkeeping) is handed to the writer without waiting (``stages.writes``).
The result's ``trace`` says which backends found how much, the event and
its ancestors, the weights used, and ``ms``: each stage's wall time.

Rules that apply now (SPEC §13): given an ``Advice`` (the situation the agent described
and the active rules whose structured conditions hold for it, found by
``grimoire.methods.advise``), those rules come first: first in ``items`` (each with a
``rule`` block saying why; they count towards ``k`` and are fitted to the token budget
before the evidence) and as the context block's first part; the ranked evidence fills
what is left and never repeats them.

The stages live in small modules: ``stages.params`` (validation),
``stages.sources`` (backends), ``stages.hop`` (entity expansion),
``stages.records`` (record caches),
``stages.pool`` (candidates, ancestors), ``stages.terms`` (BM25 words),
``stages.log`` / ``stages.writes`` (what is written, and how),
``stages.region`` (the query's region in the curator's region MDP: the
``region`` block and the information-only ``region_p_success`` factor).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grimoire.config import RetrievalConfig
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.ids import new_id
from grimoire.methods.causal import chain_for, chain_items
from grimoire.models.embedders import Vectors, embed_one
from grimoire.records import EntryStatus
from grimoire.retrieval.budget import fit
from grimoire.retrieval.candidates import Breakdown, Candidate
from grimoire.retrieval.causal_additive import apply_additive, asks_why
from grimoire.retrieval.causal_boost import AncestorVector
from grimoire.retrieval.causal_boost import apply as apply_causal_boost
from grimoire.retrieval.decide import (
    RetrievalDecision,
    contrarian_pick,
    curiosity_from_similarity,
    should_retrieve,
)
from grimoire.retrieval.fusion import convex, normalise_anchored, rrf_from_ranks
from grimoire.retrieval.lessons import Coverage, lessons_first
from grimoire.retrieval.mmr import select as mmr_select
from grimoire.retrieval.relevance import gated, idf, repeats
from grimoire.retrieval.render import context_block, narrative
from grimoire.retrieval.rerank import score_all
from grimoire.retrieval.rules import (
    Advice,
    AppliedRule,
    rule_item,
    rule_log_rows,
    rules_section,
)
from grimoire.retrieval.stages.hop import expand
from grimoire.retrieval.stages.learned import (
    FEATURE_SINK,
    nothing_without_reranker,
    reranker_of,
)
from grimoire.retrieval.stages.learned import score as learned_scores
from grimoire.retrieval.stages.log import LogJob, log_item, submit_log
from grimoire.retrieval.stages.mentions import ENTRY_WATERMARK, index_new_entries
from grimoire.retrieval.stages.neighbours import add_neighbours
from grimoire.retrieval.stages.params import RetrieveRequest, parse_request
from grimoire.retrieval.stages.pool import ancestors, backend_ranks, candidates, witnesses
from grimoire.retrieval.stages.records import require_event
from grimoire.retrieval.stages.region import region_agreement, region_for
from grimoire.retrieval.stages.relevance import gate
from grimoire.retrieval.stages.replay import replay
from grimoire.retrieval.stages.sources import (
    Pool,
    finish_keyword,
    start_keyword,
    temporal_episodes,
    vector_entries,
    vector_episodes,
)
from grimoire.retrieval.stages.support import learned_weights, token_counter
from grimoire.retrieval.stages.terms import sample_of, terms_of
from grimoire.retrieval.stages.writes import submit
from grimoire.retrieval.supersede import supersede
from grimoire.retrieval.temporal import Window
from grimoire.retrieval.temporal import resolve as resolve_time

__all__ = ["retrieve"]

_CONTRARIAN = "retrieval.contrarian_block"


def _decide(ctx: Context, req: RetrieveRequest, pool: Pool) -> RetrievalDecision:
    cfg = ctx.config.retrieval
    best = max((s for _, s in pool.entry_similarity), default=None)
    coverage = sum(1 for e, s in pool.entry_similarity
                   if s >= cfg.auto_coverage_similarity and e.status is EntryStatus.ACTIVE)
    arousal = req.mood.arousal if req.mood is not None else None
    return should_retrieve(curiosity_from_similarity(best), coverage, arousal, req.k, cfg)


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
          tokens: int, truncated: bool, ranks: Mapping[str, int] | None) -> dict[str, Any]:
    """One answer item; ``ranks`` None: not explained (factors as plain values, no ranks)."""
    factors: Any = breakdown if ranks is not None else {
        name: round(float(parts.get("value", 0.0)), 6) for name, parts in breakdown.items()}
    item: dict[str, Any] = {"id": c.id, "kind": c.kind, "rank": rank, "content": text,
                            "score": round(score, 6), "factors": factors,
                            "provenance": {**c.provenance, "ref": c.ref},
                            "timestamp": c.timestamp, "confidence": c.confidence,
                            "regime": c.regime, "strategy": c.strategy, "tokens": tokens}
    if ranks is not None:
        item["backend_ranks"] = dict(ranks)
    if c.ref is not None:
        item["ref"] = c.ref
    for name in ("thread", "actor"):
        if name in c.provenance:
            item[name] = c.provenance[name]
    if c.category is not None:
        item["category"] = c.category
    if c.marks:  # its text instructs a model: data to read, not an instruction to follow
        item["untrusted"] = [m.split(":", 1)[1] for m in c.marks]
    if truncated:
        item["truncated"] = True
    return item


@dataclass
class _Run:
    """One retrieval in progress: what each phase leaves for the next."""

    req: RetrieveRequest
    now: int
    t: int  # the instant ranked at: ``at`` or now
    pool: Pool = field(default_factory=Pool)
    query_vector: Vectors | None = None  # the embedded query (the region look-up reuses it)
    kinds: tuple[str, ...] = ()
    k: int = 0
    decision: RetrievalDecision | None = None
    cands: dict[str, Candidate] = field(default_factory=dict)
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    start: str | None = None
    found: list[AncestorVector] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    factors: dict[str, Breakdown] = field(default_factory=dict)
    chosen: list[str] = field(default_factory=list)
    contrarian: str | None = None
    weights: dict[str, float] = field(default_factory=dict)
    ms: dict[str, float] = field(default_factory=dict)
    log_job: LogJob | None = None  # submitted once the total time is known
    window: Window | None = None  # the query's time expression, resolved
    advice: Advice | None = None  # the situation's rules, served first
    coverage: Coverage | None = None  # which rule covers which episode (``lessons``)
    nothing_relevant: bool | None = None  # None: retrieval.nothing_relevant is off
    learned: dict[str, float] | None = None  # the reranker's probabilities, when it orders
    wide: bool = False  # the reranker's pool: deeper lists and thread neighbours

    @property
    def rules(self) -> tuple[AppliedRule, ...]:
        """The rules served ahead of the evidence (at most ``k``)."""
        return () if self.advice is None else self.advice.rules[:self.req.k]

    def lap(self, stage: str, since: float) -> float:
        """Record a stage's wall time (diagnostics in the trace, not logic)."""
        now = time.perf_counter()
        self.ms[stage] = round((now - since) * 1000, 3)
        return now


def _gather(ctx: Context, run: _Run) -> None:
    """Embed the query and run the backends (keyword and graph ones in the read pool)."""
    req = run.req
    started = time.perf_counter()
    # The keyword and graph backends need no query vector: they run in the read pool while
    # the model embeds (measured: p50 21.5 ms against 24.2 ms when started after it).
    keyword = start_keyword(ctx, req, req.kinds)
    q = run.query_vector = embed_one(ctx.embedder, req.query)
    started = run.lap("embed", started)
    run.kinds, run.k = req.kinds, req.k
    if "entry" in run.kinds or req.mode == "auto":
        vector_entries(ctx, req, q, run.pool)
    started = run.lap("vector_entries", started)
    if req.mode == "auto":
        run.decision = _decide(ctx, req, run.pool)
        run.kinds = tuple(kind for kind in run.decision.kinds if kind in req.kinds)
        run.k = run.decision.k
    if "episode" in run.kinds:
        vector_episodes(ctx, req, q, run.pool)
        if ctx.config.retrieval.temporal:
            run.window = resolve_time(req.query, run.t)
            if run.window is not None:
                temporal_episodes(ctx, req, q, run.pool, run.window)
    started = run.lap("vector_episodes", started)
    finish_keyword(keyword, run.pool, run.kinds)
    if run.pool.graph:
        _catch_up_mentions(ctx)
    started = run.lap("keyword_wait", started)
    if "episode" in run.kinds:
        expand(ctx, req, run.pool)  # entity.episode, hop.episode (stages.hop)
        if run.wide:
            add_neighbours(ctx, req, run.pool)  # neighbour.episode (stages.neighbours)
    run.lap("expand", started)


def _start_vector(run: _Run) -> Vectors | None:
    """The causal event's vector when it is pooled (it is, unless filtered out)."""
    start = run.cands.get(run.start) if run.start else None
    return None if start is None else start.vector


def _fuse(cfg: RetrievalConfig, run: _Run) -> dict[str, float]:
    """The backends' lists fused into one relevance per pooled id (``retrieval.fusion``)."""
    if cfg.fusion == "rrf":  # SPEC §9.2's equal-weight RRF
        return rrf_from_ranks({i: run.ranks[i] for i in run.cands if i in run.ranks},
                              cfg.rrf_k)
    if cfg.fusion != "convex":
        raise ValidationError(f"must be 'convex' or 'rrf', got {cfg.fusion!r}",
                              field="retrieval.fusion")
    lists = {name: ids for name, ids in run.pool.lists.items() if not name.startswith("_")}
    weights = cfg.fusion_weights_entities if run.req.entities else cfg.fusion_weights
    fused = convex(lists, run.pool.scores, weights, cfg.candidates)
    return {i: fused[i] for i in run.cands if i in fused}


def _newer_first(ctx: Context, query: str | None, pooled: Sequence[Candidate],
                 scores: Mapping[str, float], tiers: Mapping[str, int],
                 factors: Mapping[str, Breakdown],
                 ) -> tuple[dict[str, float], dict[str, int], dict[str, Breakdown]]:
    """``supersede`` with the episode sample's IDF: each update lifted above what it updates."""
    sample = sample_of(ctx, "episode")
    return supersede(pooled, scores, tiers, factors, terms_of,
                     lambda t: idf(sample.term_share(t), sample.size),
                     terms_of(query) if query else frozenset())


def _learned(ctx: Context, run: _Run, pooled: Sequence[Candidate], walk: bool) -> None:
    """The learned reranker's probabilities (``stages.learned``) and the "nothing relevant"
    verdict. A causal chain walk keeps the gated root-first order (the reranker was not
    trained on chains); the probabilities still join the breakdown."""
    cfg = ctx.config.retrieval
    assert run.query_vector is not None
    p = learned_scores(ctx, run.req.query, run.query_vector, run.window, pooled, run.ranks,
                       run.pool.scores, run.factors)
    model = reranker_of(ctx) if p is not None else None
    if p is None or model is None:
        if cfg.nothing_relevant:
            run.nothing_relevant = nothing_without_reranker(ctx, run.req.query,
                                                            run.query_vector, pooled)
        return
    for item, value in p.items():
        run.factors[item] = {**run.factors.get(item, {}), "reranker": {"value": value}}
    if not walk:
        run.learned = p
    if cfg.nothing_relevant:
        floor = (model.floor if cfg.nothing_relevant_floor is None
                 else cfg.nothing_relevant_floor)
        run.nothing_relevant = max(p.values(), default=0.0) < floor


def _rank(ctx: Context, run: _Run) -> None:
    """Candidates → RRF → rerank → replay → causal boost → MMR → contrarian."""
    cfg, req = ctx.config.retrieval, run.req
    started = time.perf_counter()
    run.cands = candidates(ctx, req, run.pool, run.t, run.kinds) if run.kinds else {}
    run.ranks = backend_ranks(run.pool)
    fused = _fuse(cfg, run)
    # A chain walk (a why question or an explicit event_id): the causal stream is what the
    # caller asked for, relevance as much as the query's words are.
    why = asks_why(req.query)
    walk = why or req.event_id is not None
    run.start = req.event_id or _top_episode(run.cands, fused)
    if run.start and run.kinds:
        run.found = ancestors(ctx, req, run.start, run.cands, run.t, run.kinds)
        # Witnesses join "whatever the query says": the gate ranks by the causal stream
        # only on a chain walk and elsewhere keeps them below every relevant item, as
        # filler; the reranker's pool (``run.wide``: served or collected for training)
        # scores each on its own features, causal ones among them.
        if (run.found and (walk or run.wide) and cfg.causal_fusion == "additive"
                and "episode" in run.kinds):
            run.cands.update(witnesses(ctx, req, run.found, _start_vector(run), run.cands,
                                       run.t))
    started = run.lap("candidates", started)
    pooled = list(run.cands.values())
    run.weights = dict(learned_weights(ctx).weights)
    if cfg.fusion == "rrf":
        rrf_norm = normalise_anchored(fused, (c.id for c in pooled), cfg.rrf_k,
                                      cfg.candidates)
    else:
        top = max((fused.get(c.id, 0.0) for c in pooled), default=0.0)
        rrf_norm = {c.id: fused.get(c.id, 0.0) / top if top > 0.0 else 0.0 for c in pooled}
    scores, factors = score_all(pooled, rrf_norm, run.t, None if req.regime is None
                                else req.regime.value, run.weights, req.mood, cfg)
    # The reranker orders every query but a chain walk (``_learned``): then the replay
    # multiplier would move scores nobody ranks by (the features do not read it), so it is
    # skipped; the newer-facts lift moves the reranker's probabilities instead.
    orders = not walk and reranker_of(ctx) is not None
    if not orders:
        replay(ctx, run.cands, scores, factors, run.t)
    # A question anchored on an event (``event_id``) is about that event's causes, however
    # it is worded: root first too, on a gentler slope than a why question's.
    anchored = req.event_id is not None and not why
    # The causal stream is about the causes of the query's event: on a chain walk, when the
    # query names the event (it repeats the event's text), or for the reranker's features
    # (the same whether it serves or its features are collected for training).
    # Anchored on the top hit of any other question it lifted whatever resembled that hit's
    # causes inside the query's relevance tier: rules matching one word of a question about
    # the hour of lowest slippage went above the rule that answers it.
    event = run.cands.get(run.start) if run.start else None
    named = event is not None and repeats(req.query, event.content)
    causes = run.found if walk or named or run.wide else []
    if cfg.causal_fusion == "additive":
        scores, factors = apply_additive(scores, pooled, causes, cfg, factors, why,
                                         _start_vector(run), anchored=anchored)
        boosted, factors = apply_causal_boost(scores, pooled, [], cfg, factors)
    elif cfg.causal_fusion == "multiplicative":
        boosted, factors = apply_causal_boost(scores, pooled, causes, cfg, factors)
    else:
        raise ValidationError(f"must be 'additive' or 'multiplicative', got "
                              f"{cfg.causal_fusion!r}", field="retrieval.causal_fusion")
    # Relevance first: the causal stream is relevance only on a chain walk.
    chain = {i for i, parts in factors.items() if "causal" in parts} if walk else set()
    assert run.query_vector is not None
    run.scores, tiers, run.factors = gate(ctx, req.query, run.query_vector, pooled, boosted,
                                          factors, chain=chain, why=why or anchored)
    if cfg.region_rank and req.mode == "deciding":
        boosted, run.scores, run.factors = _by_region(ctx, run, boosted, tiers)
    # Newer facts first, for questions about the current state (not with ``at`` or a time
    # window: those ask about the past); with the reranker, on its probabilities below.
    newer = cfg.supersede and req.at is None and run.window is None
    if newer and not orders:
        boosted, tiers, run.factors = _newer_first(ctx, req.query, pooled, boosted,
                                                   tiers, run.factors)
        run.scores = gated({i: boosted[i] for i in run.scores}, tiers)
    _learned(ctx, run, pooled, walk)
    picking: dict[str, int] | None = tiers
    if run.learned is not None:  # the reranker orders (and MMR picks by) its probability
        boosted = run.learned
        if newer:  # the features cannot tell which of two restatements is the later
            boosted, _, run.factors = _newer_first(ctx, req.query, pooled, boosted,
                                                   tiers, run.factors)
        picking, run.scores = None, dict(boosted)
    # Lessons first: a rule the query found ranks above the episodes it covers (not on a
    # chain walk, where the causes are what was asked for).
    if run.coverage is not None and not walk:
        boosted, run.factors = lessons_first(run.coverage, pooled, boosted, tiers,
                                             run.factors)
        run.scores = (dict(boosted) if run.learned is not None
                      else gated({i: boosted[i] for i in run.scores}, tiers))
    # The situation's rules are served ahead of the evidence (``run.rules``): the rest of
    # the k comes from the evidence without them.
    served = {a.entry.id for r in run.rules for a in (r, *r.also)}
    evidence = [c for c in pooled if c.id not in served] if served else pooled
    balance = cfg.mmr_lambda if run.learned is None else cfg.rerank_mmr_lambda
    run.chosen = mmr_select(evidence, boosted, balance, max(0, run.k - len(run.rules)),
                            cfg.mmr_duplicate, tiers=picking)
    if run.nothing_relevant:
        run.chosen = []
    run.contrarian = _contrarian(ctx, req, pooled, run.scores, run.chosen)
    if run.contrarian is not None:
        run.factors[run.contrarian] = {**run.factors[run.contrarian],
                                       "contrarian": {"value": 1.0}}
    # MMR chose the items; the score that ranks orders them (and is the one printed).
    run.chosen.sort(key=lambda i: (-run.scores[i], i))
    run.lap("rank", started)


def _by_region(ctx: Context, run: _Run, boosted: Mapping[str, float],
               tiers: Mapping[str, int]) -> tuple[dict[str, float], dict[str, float],
                                                  dict[str, Breakdown]]:
    """``retrieval.region_rank``: each advising entry's boosted score × (0.5 + agreement),
    then the ranking scores again (the tier is kept, so relevance still comes first)."""
    agreement = region_agreement(ctx, run.query_vector, run.pool.entries)
    out, factors = dict(boosted), dict(run.factors)
    for item, value in agreement.items():
        if item in out:
            out[item] *= 0.5 + value
            factors[item] = {**factors.get(item, {}), "region_rank": {
                "value": value, "multiplier": 0.5 + value}}
    return out, gated({i: out[i] for i in run.scores}, tiers), factors


def _respond(ctx: Context, run: _Run) -> dict[str, Any]:
    """Budget, items, the log hand-off, chain and context block."""
    req, scores, factors = run.req, run.scores, run.factors
    started = time.perf_counter()
    count = token_counter(ctx)
    rules = fit(list(run.rules), req.max_tokens, count, lambda r: "\n".join(r.lines()))
    left = req.max_tokens - sum(f.tokens for f in rules)
    fitted = fit([run.cands[i] for i in run.chosen], left, count) if left > 0 else []
    region = region_for(ctx, run.query_vector,
                        [f.item.id for f in fitted if f.item.kind == "entry"],
                        run.pool.entries, factors)
    # The log's baseline (each factor's mean over the pool) is computed on the writer
    # thread from these breakdowns (``stages.log``): not on the query's path.
    context = {"regime": None if req.regime is None else req.regime.value,
               "strategy": req.strategy}
    retrieval_id = new_id(run.now)
    items, logged = [], []
    for rank, r in enumerate(rules, start=1):
        items.append(rule_item(r.item, rank, r.tokens, r.text))
        logged.extend(rule_log_rows(r.item, rank, context))
    served = [row["id"] for row in logged]  # every entry served, a folded rule's too
    for rank, f in enumerate(fitted, start=len(rules) + 1):
        c = f.item
        items.append(_item(c, rank, scores[c.id], factors[c.id], f.text, f.tokens, f.truncated,
                           run.ranks.get(c.id, {}) if req.explain else None))
        logged.append(log_item(c, rank, scores[c.id], factors[c.id], context))
    deciding = req.mode != "browse"
    run.log_job = LogJob(
        retrieval_id, req.query, "deciding" if deciding else "browse", logged, run.now,
        tuple(i["id"] for i in items if i["kind"] == "episode") if deciding else (),
        (*served, *(i["id"] for i in items[len(rules):] if i["kind"] == "entry"))
        if deciding else (),
        pool_factors=tuple(factors.values()))
    result: dict[str, Any] = {
        "retrieval_id": retrieval_id, "mode": req.mode, "items": items,
        "tokens": sum(f.tokens for f in fitted) + sum(f.tokens for f in rules),
        "max_tokens": req.max_tokens,
    }
    if run.advice is not None:
        result["situation"] = run.advice.situation
    if run.nothing_relevant is not None:
        result["nothing_relevant"] = run.nothing_relevant
    if req.explain:
        result["trace"] = {
            "backends": {name: len(ids) for name, ids in run.pool.lists.items()
                         if not name.startswith("_")},
            "pool": len(run.cands), "event_id": run.start, "ancestors": len(run.found),
            "weights": run.weights, "graph": run.pool.graph, "hop": run.pool.hop,
            "contrarian": run.contrarian, "at": req.at, "ms": run.ms,
            "time_window": None if run.window is None else {
                "start": run.window.start, "end": run.window.end, "text": run.window.text}}
    if region is not None:
        result["region"] = region
    if run.decision is not None:
        result["decision"] = {"mode": run.decision.mode.value, "k": run.decision.k,
                              "kinds": list(run.decision.kinds), "reason": run.decision.reason}
    links, nodes = chain_for(ctx, run.start, req.at) if run.start and run.found else ([], {})
    if len(links) > 1 and deciding:  # the chain served to a decision: its edges were used
        run.log_job = dataclasses.replace(run.log_job, edges_used=tuple(
            (cause.id, effect.id) for cause, effect in itertools.pairwise(links)))
    if len(links) > 1:
        result["causal_chain"] = {
            "event_id": run.start, "chain": chain_items(links, nodes),
            "narrative": narrative(links, lambda i: nodes[i].text if i in nodes else i)}
    if req.format == "context":
        result["context"] = context_block(
            req.query, [f.item for f in fitted], links if len(links) > 1 else (),
            lambda i: nodes[i].text if i in nodes else i,
            lambda i: nodes[i].time if i in nodes else None,
            {f.item.id: scores[f.item.id] for f in fitted},
            {f.item.id: f.text for f in fitted},
            preface=() if run.advice is None else rules_section(
                run.advice.situation, [f.item for f in rules],
                {f.item.entry.id: f.text for f in rules}))
    run.lap("respond", started)
    return result


_WIDE = "retrieval.wide_config"


def _widened(ctx: Context) -> Context | None:
    """The context the reranker's pool is gathered with (``retrieval.candidates`` =
    ``retrieval.rerank_candidates``), or None when the reranker is off and no feature sink
    asks for its pool (``stages.learned.FEATURE_SINK``): then the pool is today's."""
    cfg = ctx.config.retrieval
    if cfg.reranker == "off" and not isinstance(ctx.extras.get(FEATURE_SINK), list):
        return None
    held = ctx.extras.get(_WIDE)
    if held is None or held[0] is not ctx.config:
        held = ctx.extras[_WIDE] = (ctx.config, ctx.config.replace(
            **{"retrieval.candidates": cfg.rerank_candidates}))
    return dataclasses.replace(ctx, config=held[1])


def retrieve(ctx: Context, params: Mapping[str, Any], advice: Advice | None = None,
             coverage: Coverage | None = None) -> dict[str, Any]:
    """Run the pipeline for untrusted ``params`` (API.md ``retrieve``); see the module doc.
    ``advice``: the rules that apply to the caller's situation, served first;
    ``coverage``: which rules cover which episodes, for lessons first (None: not done)."""
    started = time.perf_counter()
    req = parse_request(params, ctx.config.retrieval)
    now = ctx.now()
    if req.event_id is not None:
        require_event(ctx, req.event_id, req.at)
    wide = _widened(ctx)
    ctx = wide or ctx
    run = _Run(req, now, now if req.at is None else req.at, advice=advice,
               coverage=coverage, wide=wide is not None)
    _gather(ctx, run)
    _rank(ctx, run)
    result = _respond(ctx, run)
    run.lap("total", started)
    if run.log_job is not None:
        submit_log(ctx, dataclasses.replace(run.log_job, latency_ms=run.ms["total"]))
    return result
