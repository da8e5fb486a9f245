"""The configuration's sections: one frozen dataclass per section, each field declared once
with its default and one line of help (``opt``). ``grimoire.config`` assembles them into
``Config`` and owns loading, checking and listing; nothing here reads a file or the
environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AccessConfig", "AdmissionConfig", "CladeConfig", "CuratorConfig", "DaemonConfig",
           "DecayConfig",
           "DistillerConfig", "DreamConfig", "EmbeddingConfig", "EpisodesConfig", "LLMConfig",
           "PlaybookConfig", "PrivacyConfig", "QualityConfig", "RetrievalConfig",
           "SuccessionConfig", "opt"]


def opt(default: Any, help: str, *, positive: bool = False,
        choices: tuple[str, ...] | None = None) -> Any:
    """A config field with its default and one line of help.

    Every number in the configuration (nested ones too) must be finite and >= 0;
    ``positive`` asks for > 0 (a speed, a size, a timeout); ``choices`` lists the only
    values a string may take."""
    meta = {"help": help, "positive": positive, "choices": choices}
    if isinstance(default, dict | list):
        factory: Any = (lambda d=default: dict(d)) if isinstance(default, dict) else (
            lambda d=default: list(d)
        )
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = opt("all-MiniLM-L6-v2-int8", "embedding model: the bundled int8 ONNX MiniLM, "
                     "or a fastembed model name present on this machine")
    model_dir: str | None = opt(None, "directory holding another fastembed model's files "
                                "(None = the bundled model)")
    dim: int = opt(384, "embedding dimension (must match the model)", positive=True)
    max_tokens: int = opt(256, "tokenizer truncation (256 matches the reference model)",
                          positive=True)
    batch_size: int = opt(64, "texts per embedding batch", positive=True)
    threads: int = opt(2, "onnxruntime intra-op threads", positive=True)


@dataclass(frozen=True)
class DecayConfig:
    half_life_days: dict[str, float | None] = opt(
        {"structural": None, "regime_conditional": 14.0, "tactical": 7.0, "ephemeral": 1.0},
        "half-life per decay class in days (None = never decays; 0 is refused: it would "
        "decay to the floor at once)", positive=True)
    warning_multiplier: float = opt(2.0, "half-life multiplier for warnings", positive=True)
    bloodstain_multiplier: float = opt(3.0, "half-life multiplier for bloodstain entries",
                                       positive=True)
    dream_multiplier: float = opt(2.0, "half-life multiplier for dream-validated entries",
                                  positive=True)
    low_quality_threshold: float = opt(0.3, "quality below this halves the half-life")
    low_quality_multiplier: float = opt(0.5, "half-life multiplier for low-quality entries",
                                        positive=True)
    floor: float = opt(0.05, "effective confidence never falls below this")
    upvote: float = opt(0.10, "decay.apply_vote only (SPEC §4's UPVOTE); no stored "
                        "confidence moves by it: see decay.prior_strength")
    downvote: float = opt(0.15, "decay.apply_vote only (SPEC §4's DOWNVOTE); no stored "
                          "confidence moves by it: see decay.prior_strength")
    prediction_right: float = opt(
        0.05, "decay.prediction_vote only; no stored confidence moves by it. Confidence "
        "follows evidence (SPEC §13): an entry starts at its provenance's prior "
        "(self-learned 0.5) and is then the function of the episodes the curator counted "
        "for and against it (decay.prior_strength); learners re-finding it, merges and "
        "restatements move nothing; a derived rule starts from its parent's counted "
        "episodes")
    prediction_wrong: float = opt(0.10, "decay.prediction_vote only; no stored confidence "
                                  "moves by it")
    min_confidence: float = opt(0.05, "confidence clamp, lower bound")
    max_confidence: float = opt(0.99, "confidence clamp, upper bound")
    dream_strength: float = opt(0.5, "strength added by a dream validation")
    episode_half_life_hours: float = opt(48.0, "half-life of an episode's recency in retrieval",
                                         positive=True)
    provenance_weight: dict[str, float] = opt(
        {"self_learned": 1.0, "agent": 1.0, "owner": 1.0, "replicant": 1.0, "clade": 0.8,
         "predecessor": 0.6,
         "death_reflection": 0.6, "styx_query": 0.5, "lethe": 0.5, "marketplace": 0.5,
         "dream": 0.6},
        "initial confidence = base_confidence x this weight (agent / owner: knowledge told "
        "with entry.add, shown apart in PLAYBOOK.md until outcomes confirm it)")
    base_confidence: float = opt(0.5, "initial confidence before the provenance weight")
    prior_strength: float = opt(
        10.0, "confidence from evidence: the initial confidence counts as this many episodes "
        "((✓ + k x initial) / (✓ + ✗ + k)); 0.99 needs about 100 x k x (0.99 - initial) "
        "confirming episodes and none against")


@dataclass(frozen=True)
class AdmissionConfig:
    weights: dict[str, float] = opt(
        {"future_utility": 0.25, "factual_confidence": 0.25, "semantic_novelty": 0.20,
         "temporal_recency": 0.15, "content_type_prior": 0.15},
        "weights of the five admission factors")
    reject_below: float = opt(0.45, "composite below this is rejected")
    low_confidence_below: float = opt(0.55, "composite below this is admitted at low confidence")
    low_confidence: float = opt(0.3, "confidence of a low-composite admission")
    skip_similarity: float = opt(0.95, "nearest-neighbour cosine above this: SKIP (duplicate)")
    merge_similarity: float = opt(0.90, "nearest-neighbour cosine above this: MERGE (upvote)")
    off_topic_similarity: float = opt(0.5, "nearest-neighbour cosine below this: off-topic flag")
    firewall_factual: float = opt(0.3, "firewall: factual confidence below this ...")
    firewall_contradicted: float = opt(
        0.7, "... contradicting an entry at or above this: quarantine"
    )
    recency_half_life_days: float = opt(7.0, "temporal recency factor half-life",
                                        positive=True)
    type_prior: dict[str, float] = opt(
        {"warning": 0.9, "causal_link": 0.7, "heuristic": 0.6, "insight": 0.5,
         "strategy_fragment": 0.4, "dream_journal": 0.3, "observation": 0.2},
        "content type prior per category")
    utility_weights: dict[str, float] = opt(
        {"actionability": 0.4, "specificity": 0.3, "support": 0.3},
        "rule-based future utility: weights of the text's actionability, specificity and "
        "support size")
    support_saturation: int = opt(10, "episodes behind a candidate at which support counts fully")
    neutral_factual: float = opt(0.5, "factual confidence with no agreeing or contradicting entry")
    related_similarity: float = opt(
        0.75, "text heuristic: cosine at or above which a neighbour without a structured claim "
        "is judged as agreeing or contradicting (by negation)")


@dataclass(frozen=True)
class QualityConfig:
    weights: dict[str, float] = opt(
        {"specificity": 0.25, "actionability": 0.25, "novelty": 0.20, "verifiability": 0.15,
         "consistency": 0.15},
        "weights of the five quality dimensions")
    red_flag_penalty: float = opt(0.1, "penalty per red flag")
    neutral_consistency: float = opt(0.5, "consistency score without an LLM")


@dataclass(frozen=True)
class DistillerConfig:
    every_episodes: int = opt(10, "distil after this many new episodes within a strategy",
                              positive=True)
    window_episodes: int = opt(2000, "recent episodes considered per distillation")
    min_support: int = opt(3, "episodes a finding needs at least")
    alpha: float = opt(0.01, "family-wise significance level (Holm-corrected over conditions)")
    min_effect: float = opt(0.25, "minimum relative effect size of a metric finding")
    min_rate_gap: float = opt(0.2, "outcome-rate gap to learn (and judge a borne-out) rate rule")
    hour_windows: list[int] = opt([2, 3, 4, 6], "hour-of-day window widths tried")
    causal_lag_ms: int = opt(600_000, "window in which event B must follow A for a causal link")
    causal_min_support: int = opt(3, "A→B occurrences a causal link needs at least")
    cost_metrics: list[str] = opt(["gas_gwei", "slippage_bps", "fees"],
                                  "metrics that are costs (lower is better)")
    gain_metrics: list[str] = opt(["pnl"], "metrics that are gains (higher is better)")
    metric_actions: dict[str, list[str]] = opt(
        {"gas_gwei": ["swap", "rebalance", "bridge"], "slippage_bps": ["swap"],
         "fees": ["swap", "rebalance"], "pnl": ["swap", "rebalance"]},
        "actions a metric affects, for derived heuristics")
    window_scan_weight: float = opt(6.0, "an hour-of-day scan (every width and start for one "
                                    "metric or action) counts as this many hypotheses "
                                    "in the family-wise correction")
    band_quantiles: list[float] = opt(
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "cut points tried on a measured metric as an outcome's condition (\"when size_usd is "
        "above X\"): these quantiles of the metric among the action's episodes, each side "
        "of each cut; the most significant cut of a side is kept")
    band_scan_weight: float = opt(2.0, "a metric's cut scan (every cut of band_quantiles, "
                                  "both sides, for one action) counts as this many hypotheses "
                                  "in the family-wise correction, shared equally by its cuts "
                                  "(Bonferroni within the scan: K cuts are each tested at "
                                  "1/K of the scan's share of alpha)")
    hour_strata: list[str] = opt(
        ["regime"], "a metric's hour-of-day windows are tested (and judged by the curator) "
        "within strata of these episode attributes (the metric less its mean per stratum): a "
        "slow market state moves levels for hours, variance no clock time explains. [] tests "
        "the raw levels")
    edit_change: float = opt(0.25, "a confirmed claim whose effect-vs-baseline gap moved by more "
                             "than this fraction is EDITed with the new numbers, else UPVOTEd")
    max_parent_episodes: int = opt(50, "supporting episode ids kept on one distilled operation")
    causal_min_lift: float = opt(2.0, "a causal link needs P(B follows A) >= this x B's base rate")
    reflexion_invariants: dict[str, float] = opt(
        {"max_slippage_bps": 100.0, "max_gas_gwei": 300.0, "max_loss_bps": 500.0,
         "promise_tolerance_bps": 100.0},
        "Reflexion invariants: a breach writes a safety_incident (max slippage, gas ceiling, "
        "largest loss, shortfall of a promised positive return)")
    outcome_metrics: list[str] = opt(
        ["pnl", "return_bps"], "metrics that measure an action's own result: never a finding's "
        "condition (that swaps lose when their P&L is below zero restates the outcome)")
    coupled_metrics: list[list[str]] = opt(
        [["pnl", "return_bps"], ["pnl", "size_usd"]],
        "metric pairs computed from one another (pnl = size x return): a finding that "
        "conditions one on the other is arithmetic, not experience, and is dropped")
    derived_metrics: list[str] = opt(
        [], "metrics a deployment knows its data source computes from other fields: never in "
        "a finding. None by default: the general rule is distiller.echo_correlation")
    echo_correlation: float = opt(
        0.9, "two metrics whose ranks agree this closely (|Spearman rho| over the episodes "
        "carrying both) are coupled: of their findings under one condition only the larger "
        "relative effect is kept (the other is its echo), and neither is a condition on the "
        "other")
    min_days_for_hours: float = opt(
        2.0, "an hour-of-day finding needs each hour of its window seen on this many days (it "
        "came round again): before, a stretch of time that differed looks like a time of day")
    regime_context_ms: int = opt(3_600_000, "an action is learned in the regime its own and its "
                                 "market's labels name, none older than this (0: off)")
    regime_votes: int = opt(5, "the newest this many labels (its own first, back to a regime "
                            "shift) vote; most wins, a tie the newest (1: its own)", positive=True)
    causal_edge_pairs: int = opt(20, "episode pairs written as causal edges per discovered "
                                 "link and run (the most recent ones)")
    causal_regime_targets: bool = opt(True, "causal discovery tells regime shifts apart by "
                                      "the regime they switch to (regime_shift_to_high_vol)")


@dataclass(frozen=True)
class CuratorConfig:
    every_ticks: int = opt(50, "curator cycle every this many ticks", positive=True)
    insight_promote: float = opt(0.6, "insight at or above: active")
    heuristic_promote: float = opt(0.7, "heuristic at or above: PLAYBOOK.md")
    demote_below: float = opt(0.4, "active below: candidate (out of PLAYBOOK.md)")
    prune_below: float = opt(0.1, "below this for prune_cycles consecutive cycles: archived")
    prune_cycles: int = opt(3, "consecutive low cycles before archiving")
    prune_quality: float = opt(0.05, "quality below this and few accesses: archived")
    prune_min_access: int = opt(2, "access count under which low quality prunes")
    compress_min_episodes: int = opt(3, "episodes a compressed insight needs")
    compress_coherence: float = opt(0.7, "cluster coherence a compressed insight needs")
    compress_factor: float = opt(0.9, "compressed insight confidence = cluster mean x this")
    l2_every_cycles: int = opt(10, "L2 chapter summaries every this many cycles")
    mus_prune_l1: float = opt(0.2, "prune an old L1 summary below this MUS")
    mus_prune_l2: float = opt(0.3, "prune an old L2 summary below this MUS")
    mus_old_days: float = opt(7.0, "a summary is old after this many days")
    regions: int = opt(16, "region MDP: number of embedding regions")
    mus_weights: dict[str, float] = opt(
        {"retrieval_frequency": 0.4, "relevance": 0.4, "recency": 0.2},
        "Memory Utility Score weights (seed 002)")
    summary_examples: int = opt(3, "representative episodes quoted in an L1 summary")
    regions_seed: int = opt(0, "region MDP: k-means seed (same data + seed = same regions)")
    regions_refit_drift: float = opt(
        0.1, "region MDP: refit when mean assignment cosine falls this far below the fit's")
    regions_min_drift_points: int = opt(
        32, "region MDP: episodes assigned since the last fit before drift is judged")
    validate_min_support: int = opt(
        3, "new episodes matching a claim's condition per prediction the cycle judges")
    validate_max_votes: int = opt(
        10, "predictions one claim's verdict counts for in one cycle at most (the verdict's "
        "weight in the learners' statistics; confidence follows the episodes counted)")
    window_episodes: int = opt(2000, "newest unprocessed episodes one cycle reads at most")
    causal_lookback_ms: int = opt(
        86_400_000, "a causal link is judged on the cause occurrences whose lag window closed "
        "in this span (pooled, so a rare cause is judged at all); only occurrences never "
        "counted for the link are new evidence")
    causal_verdict_level: float = opt(
        0.05, "a link's occurrences (a rate rule's actions) decide right only when at most this "
        "probability puts that many at or above its side of the midpoint under the baseline "
        "(wrong: below, under the claimed rate; a rate rule: 1/this times likelier at its "
        "baseline, or past it, than at its claimed rate); else undecided, pooled, then counted")
    reversal_alpha: float = opt(
        0.05, "family-wise level of the cycle's reversals: a claim the new episodes contradict "
        "is turned round only when its condition's episodes lie on the other side of the rest "
        "of the same window (one-sided Welch t for a metric, Fisher's exact for an outcome "
        "rate), Holm-corrected over every claim the cycle decided, so that a few noisily "
        "labelled episodes among many judged claims never write the opposite rule")
    write_batch: int = opt(64, "entry changes per write transaction (keeps the writer responsive)",
                           positive=True)
    compress_max_per_cycle: int = opt(8, "compressed insights proposed per cycle at most")
    l1_coherence: float = opt(0.6, "cluster coherence of an L1 session summary")
    l1_max_per_cycle: int = opt(8, "L1 summaries written per cycle at most")
    quarantine_max_cycles: int = opt(
        3, "reviews a quarantined entry waits for its conflict to clear before it is rejected")
    compact_min_fragments: int = opt(
        64, "the cycle compacts the episodic store when it has at least this many fragments (the "
        "store compacts itself every episodes.compact_every_appends flushes: a backstop)")
    graph_fill: bool = opt(
        True, "the curator writes the knowledge graph from the episodes: a pair's tokens, the "
        "venue (protocol, chain, pool) an action used, an oracle feed a text names, and the "
        "entities whose episodes keep occurring together (predicates: curator/graph/facts.py)")
    graph_cooccur_window_ms: int = opt(
        120_000, "co-occurrence: two entities' episodes within this long of each other occur "
        "together (seed 004's 3-block window, read as 3 default ticks)", positive=True)
    graph_cooccur_min_support: int = opt(
        3, "co-occurrence: a relation needs this many co-occurrences in one cycle's episodes "
        "(and to be judged as stopped, this many episodes of each entity)", positive=True)
    graph_cooccur_min_lift: float = opt(
        2.0, "co-occurrence: together at least this many times as often as chance (the share "
        "of the window the other's episodes cover); below 1 an existing relation is closed",
        positive=True)


@dataclass(frozen=True)
class RetrievalConfig:
    candidates: int = opt(20, "top-k per backend before fusion", positive=True)
    rrf_k: int = opt(60, "reciprocal rank fusion constant")
    neighbour_context_chars: int = opt(
        200, "an episode with a thread is embedded with at most this many characters of the "
        "previous turn in its thread (0: its own text only); its stored text is unchanged")
    temporal: bool = opt(
        True, "resolve a time expression in the query ('in May 2023', 'last week') against "
        "episode timestamps and search that window as one more fused list (temporal.episode)")
    fusion: str = opt(
        "convex", "how the backends' lists are fused: 'convex' (a weighted sum of each "
        "backend's min-max normalised scores, weights from retrieval.fusion_weights) or 'rrf' "
        "(equal-weight reciprocal rank fusion, k = retrieval.rrf_k)")
    fusion_weights: dict[str, float] = opt(
        {"vector": 0.5, "bm25": 0.4, "graph": 0.1, "temporal": 0.25, "entity": 0.3, "hop": 0.1},
        "convex fusion: weight of each backend's normalised score (see fusion_provenance)")
    fusion_weights_entities: dict[str, float] = opt(
        {"vector": 1 / 3, "bm25": 1 / 3, "graph": 1 / 3, "temporal": 1 / 3, "entity": 0.3,
         "hop": 0.1},
        "convex fusion weights for a query that names its entities explicitly (the agent's "
        "own pointer into the knowledge graph): equal shares, as RRF gave them; not fitted "
        "(the public data names no entities; entity and hop as in fusion_weights)")
    fusion_provenance: str = opt(
        "fitted 2026-11-25 on LoCoMo dev's fit half only (conv-26, conv-41, conv-43; 480 "
        "questions; checked on the other half) with `scripts/bench_recall.py --fit`: the "
        "full pipeline's R@10 over a grid (vector 0.1-0.8, graph 0-0.2, bm25 the rest) is "
        "flat at 0.64-0.656 for vector 0.3-0.6; best 0.5/0.4/0.1, R@10 0.656 (RRF 0.580, "
        "BM25 alone 0.584); then the temporal list's weight, the others fixed, over "
        "0-1.5 (`--fit temporal`, with neighbour context): 0.25, R@10 0.692 (0: 0.687); "
        "then the entity (query-named actor) and second-hop lists' weights, the others "
        "fixed, entity 0-0.4 x hop 0-0.3 (`--fit hop`, same fit half): best entity 0.3, "
        "hop 0.1, R@10 0.746, multi-hop 0.423 (both 0: 0.692, 0.362; hop alone adds "
        "< 0.005 at any weight there)",
        "where retrieval.fusion_weights come from (data, split, command)")
    hop_first: int = opt(
        5, "second hop (hop.episode): the first hop is this many of the pool's best episodes "
        "(0: no second hop; hop_first, hop_terms, hop_max_share are set by hand, not fitted)")
    hop_terms: int = opt(
        8, "second hop: at most this many of the first hop's distinctive terms link it on")
    hop_max_share: float = opt(
        0.05, "second hop: a term in more than this share of the episodes links nothing")
    weights: dict[str, float] = opt(
        {"rrf": 0.30, "confidence": 0.25, "quality": 0.20, "recency": 0.15, "regime": 0.10},
        "rerank weights (learned online unless frozen)")
    mood_weight: float = opt(0.15, "weight of the PAD mood factor when a mood is given")
    learn_weights: bool = opt(True, "learn rerank weights from outcome reports (Hedge)")
    hedge_eta: float = opt(0.1, "Hedge learning rate")
    weight_min: float = opt(0.02, "a learned weight never falls below this")
    causal_max_depth: int = opt(4, "TCMF: backward BFS depth")
    causal_similarity: float = opt(0.45, "TCMF: ancestor similarity threshold")
    causal_lambda: float = opt(0.6, "TCMF: score x (1 + lambda x boost)")
    causal_fusion: str = opt(
        "additive", "how the causal stream joins the score, on a chain walk (why, event_id), "
        "a query repeating the event's text or under the reranker only: 'additive' (score + "
        "causal_additive_lambda x boost, witnesses pooled; 'why' puts the root first) or "
        "'multiplicative' (seed 000's score x (1 + causal_lambda x boost), pooled only)")
    causal_additive_lambda: float = opt(
        1.0, "additive causal fusion: weight of the causal boost added to the score")
    causal_witness_window_ms: int = opt(
        43_200_000, "additive causal fusion: a witness of an ancestor was recorded within "
        "this long of it (either side)")
    causal_witness_similarity: float = opt(
        0.3, "additive causal fusion: a witness is at least this close (cosine) to the "
        "ancestor, and closer to it than to the event")
    bloodstain_boost: float = opt(1.2, "score multiplier for bloodstain entries")
    mmr_lambda: float = opt(0.7, "MMR relevance/diversity balance")
    mmr_top: int = opt(10, "MMR re-orders this many")
    max_tokens: int = opt(500, "default token budget of a retrieve", positive=True)
    default_k: int = opt(10, "default number of items", positive=True)
    contrarian_every_ticks: int = opt(100, "contrarian injection every this many ticks",
                                      positive=True)
    graph_hops: int = opt(2, "graph candidates within this many KG hops")
    auto_link_window_ms: int = opt(3_600_000, "auto-link predecessors within this window")
    auto_link_threshold: float = opt(0.3, "auto-link weight threshold")
    auto_link_types: list[str] = opt(
        ["observation", "action", "regime_shift", "clade_alert", "replicant_report",
         "coordination_intent", "safety_incident"],
        "episode types auto-linked to their likely predecessors on write (seed 000 links every "
        "new event, seed 001's add_event searches every effect's causes: every type; each "
        "effect keeps its causal_max_fan_in strongest, unused ones go after "
        "causal_edge_ttl_hours; remove observation to link only the other events)")
    causal_max_fan_in: int = opt(
        5, "at most this many inferred causal edges (auto, discovered, kg) into one effect: "
        "the strongest are kept, weaker ones deleted (explicit edges are never dropped); seed "
        "000 linked every similar recent event, which gave an alert ~30 'causes' that lifted "
        "unrelated trades in retrieval", positive=True)
    causal_edge_ttl_hours: float = opt(
        48.0, "an inferred causal edge (auto, discovered, kg) that no retrieval has served "
        "(on its causal chain) and no discovery has confirmed for this long (the injected "
        "clock: data time) is pruned by the curator; 48 = the episodes' recency half-life",
        positive=True)
    auto_link_min_similarity: float = opt(
        0.3, "auto-link: a predecessor needs at least this cosine (0 = seed 000's ungated form, "
        "which links every event close in time whatever it says)")
    episode_confidence: float = opt(
        0.5, "rerank confidence of an episode (episodes have none; 0.5 = a fresh self-learned "
        "entry)")
    safety_incident_confidence: float = opt(1.0, "rerank confidence of a safety_incident episode")
    episode_quality: dict[str, float] = opt(
        {"routine": 0.25, "notable": 0.5, "critical": 0.75, "emergency": 1.0},
        "rerank quality of an episode by importance")
    mmr_duplicate: float = opt(0.98, "MMR: cosine at or above which an item is a near-duplicate")
    relevance_floor: float = opt(
        0.5, "relevance first: an item is relevant when its lexical or semantic match to the "
        "query is at least this share of the query's best match (each relative to the best, "
        "the semantic one above the query's mean cosine to stored episodes); boosts reorder "
        "relevant items but never lift another above them (except a 'why' question's or an "
        "event_id's causal chain)")
    region_rank: bool = opt(
        False, "deciding mode: scale an entry whose claim names an action by 0.5 + how far "
        "the query region's outcomes agree with it (1 - P(success) for a warning, "
        "P(success) for a recommendation), within its relevance tier. Off: on "
        "scripts/bench_decision.py (4 scenarios, 1,500 ticks) every quality column was the "
        "same on and off (README, 'Region P(success) in deciding mode')")
    supersede: bool = opt(
        True, "newer facts first: a later statement (not an action) by the same actor that "
        "restates an earlier one with a changed value ranks just above it; off for "
        "questions with `at` or a time window (they ask about the past)")
    reranker: str = opt(
        "off", "the learned reranker (grimoire/retrieval/learned/): 'off' (the fused, gated "
        "order), 'on' (the weights shipped in the package) or the path of a weights file "
        "made by scripts/train_reranker.py; it orders every query but a causal chain walk "
        "(a why question or an event_id keeps the root-first order)")
    rerank_candidates: int = opt(
        40, "with the reranker on: top-k per backend (in place of retrieval.candidates), so "
        "the reranker has more of the answers to rank; the order without it is unchanged",
        positive=True)
    rerank_seeds: int = opt(
        10, "with the reranker on: the pool's best this many episodes (a first convex "
        "fusion) bring their thread neighbours into the pool (0: none)")
    rerank_neighbours: int = opt(
        2, "with the reranker on: this many turns each side of a seed in its thread join "
        "the pool (neighbour.episode; 0: none)")
    rerank_mmr_lambda: float = opt(
        1.0, "with the reranker ordering: the MMR relevance/diversity balance in place of "
        "retrieval.mmr_lambda (1: its probability order, near-duplicates still dropped; "
        "the reranker scores each item on its own evidence, and the turns answering one "
        "question read alike, so a diversity penalty drops answers)")
    nothing_relevant: bool = opt(
        False, "answer a query nothing in memory matches with no items and "
        "'nothing_relevant': true: with the reranker, when its best probability is under "
        "the floor calibrated with its weights (or retrieval.nothing_relevant_floor); "
        "without it, when no pooled item reaches the shipped floors of absolute term "
        "coverage and cosine above the query's background")
    nothing_relevant_floor: float | None = opt(
        None, "override the reranker's calibrated 'nothing relevant' floor (a probability; "
        "None: the one shipped with the weights)")
    auto_curiosity_full: float = opt(0.8, "mode=auto: curiosity above this → full retrieval")
    auto_curiosity_low: float = opt(0.4, "mode=auto: curiosity below this with coverage → "
                                    "semantic only")
    auto_coverage: int = opt(5, "mode=auto: more known entries than this counts as covered")
    auto_arousal: float = opt(0.7, "mode=auto: arousal above this → full retrieval")
    auto_light_k: int = opt(3, "mode=auto: items of a light retrieval")
    replay_need_floor_ms: int = opt(
        3_600_000, "replay utility: need = 1 / time since replayed, capped at 1 within this")
    contrarian_items: int = opt(1, "entries of opposite valence forced in on a contrarian tick")
    replay_weight: float = opt(
        0.2, "Mattar-Daw replay: an episode's score x (1 + this x gain x need), after the rerank")
    auto_coverage_similarity: float = opt(
        0.5, "mode=auto: an active entry at or above this cosine to the query covers it")
    bm25_max_matches: int = opt(
        200, "BM25 keeps a query's rarest words while their expected matching episodes (or "
        "entries) add up to at most this; common words weigh little and every match costs µs")


@dataclass(frozen=True)
class EpisodesConfig:
    flush_rows: int = opt(256, "LanceDB append batch: rows buffered before a flush", positive=True)
    flush_ms: int = opt(1000, "LanceDB append batch: max age of buffered rows")
    compact_every_appends: int = opt(50, "compact the table after this many appends")
    cleanup_older_than_s: int = opt(60, "versions older than this are removed at compaction")
    max_files: int = opt(
        24, "compact and keep only the newest version as soon as the LanceDB table holds this "
        "many data files or versions (counted at every flush: bounded whatever the clock speed)")
    index_save_rows: int = opt(
        20_000, "save the episode index beside the table (episodes.index/) every this many "
        "flushed rows and on close: an open reads only the rows after the save", positive=True)
    fts_threshold: int = opt(
        250_000, "rows past which full-text search uses LanceDB's FTS index, built in the "
        "background (0: never; an open past it does not build the in-memory BM25)")
    fts_min_overlap: float = opt(0.5, "overlap@10 with the in-memory BM25 below which "
                                 "LanceDB's FTS index is not used")
    ann_threshold: int = opt(
        250_000, "rows past which vector search uses LanceDB's IVF-PQ index, built in the "
        "background (0: never; below it, and whenever the index's measured recall@10 is under "
        "ann_min_recall, the exact int8 search answers)")
    ann_nprobes: int = opt(20, "IVF partitions probed per indexed query", positive=True)
    ann_max_refine: int = opt(
        100, "most indexed candidates per result (rescored in memory) the recall check may "
        "choose: it uses the fewest whose recall@10 reaches ann_min_recall", positive=True)
    ann_min_recall: float = opt(0.95, "recall@10 against exact search below which the index "
                                "is not used")
    ann_recall_queries: int = opt(100, "queries (midpoints of two stored rows) measuring "
                                  "that recall", positive=True)
    ann_refresh_fraction: float = opt(0.2, "rebuild the index once this fraction of rows is "
                                      "newer than it", positive=True)


@dataclass(frozen=True)
class DaemonConfig:
    tick_seconds: float | None = opt(None, "heartbeat tick length in seconds; None = the "
                                     "feed's own (the simulator scenario's), else 40",
                                     positive=True)
    speed: float = opt(1.0, "time acceleration for demos (ticks run this many times faster)",
                       positive=True)
    feed: str = opt("none", "tick feed: none (the agent writes over the socket) | jsonl:PATH | "
                            "sim (the market simulator, for demos: never in real memory)")
    scenario: str | None = opt(None, "simulator scenario YAML (None = the built-in default)")
    seed: int = opt(7, "simulator random seed")
    max_request_bytes: int = opt(1_048_576, "largest accepted request line", positive=True)
    max_connections: int = opt(64, "simultaneous socket connections", positive=True)
    idle_timeout_s: float = opt(300.0, "close a connection idle this long", positive=True)
    write_queue: int = opt(10_000, "pending writes before BusyError", positive=True)
    max_ticks: int | None = opt(None, "stop after this many ticks (None = run until signalled)",
                                positive=True)


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = opt(None, "OpenAI-compatible endpoint; None = rule-based only, "
                               "no network")
    model: str = opt("local", "chat model name")
    api_key_env: str = opt("GRIMOIRE_LLM_API_KEY", "environment variable holding the API key")
    timeout_s: float = opt(30.0, "request timeout", positive=True)
    retries: int = opt(2, "bounded retries on timeout / 5xx")
    max_tokens: int = opt(400, "completion tokens per LLM request", positive=True)
    max_pending: int = opt(32, "Reflexion LLM steps waiting at most; more are dropped (the LLM "
                           "view is advisory, the deterministic record is always kept)")
    reflexion_verdicts: list[str] = opt(
        ["invariant_broken", "worse_than_predicted", "better_than_predicted"],
        "Reflexion verdicts whose episodes get the LLM steps (an action that went as predicted "
        "has no deviation to interpret)")
    expel_every: int = opt(10, "ExpeL prompt distillation on every Nth distillation of a "
                           "strategy (the rule-based extractor runs every time)")
    expel_max_claims: int = opt(8, "claims one ExpeL prompt may propose")
    expel_sample_episodes: int = opt(30, "recent episodes quoted in the ExpeL prompt")
    cause_candidates: int = opt(
        3, "a new event's auto-linked causes the LLM judges, strongest first (seed 001's "
        "add_event: the first 'Yes' is its cause, the others are dropped; all 'No': a root "
        "event); 0 = keep the rule-based links as they are")


@dataclass(frozen=True)
class PlaybookConfig:
    path: str | None = opt(None, "PLAYBOOK.md path (None = <data_dir>/PLAYBOOK.md)")
    max_lines: int = opt(400, "PLAYBOOK.md never grows past this many lines", positive=True)


@dataclass(frozen=True)
class PrivacyConfig:
    redact: list[str] = opt([], "kinds removed from episodes (text, ref, actor, thread) and "
                            "told entries before they are embedded or stored, each replaced by "
                            "[redacted:KIND]: email, phone, api_key, private_key, seed_phrase, "
                            "iban, or all; empty = off")
    phone_region: str = opt("US", "region (ISO 3166 code) of phone numbers written without "
                            "a country code, for privacy.redact's phone kind")


@dataclass(frozen=True)
class AccessConfig:
    scopes: dict[str, list[str]] = opt(
        {}, "which scopes each socket peer's uid may use, e.g. {1001: [agent], 1002: "
        "[user-42, project-x]} ('*' = every scope); empty: only the daemon's own uid "
        "connects, to every scope. A uid not listed is refused; the daemon's own uid, when "
        "not listed, keeps every scope. Granting another uid needs socket_path outside "
        "the data directory (the socket is then 0666, the peer check is the gate)")


@dataclass(frozen=True)
class CladeConfig:
    uri: str | None = opt(None, "the shared Clade table (a path or an object-store URI such as "
                          "s3://bucket/prefix); set, every curator cycle exchanges with it: "
                          "publishes this agent's new warnings, active heuristics and validated "
                          "insights, pulls the siblings' through the admission gate at the "
                          "clade weight, and writes each incoming alert as a clade_alert "
                          "episode. None = only by hand (grimoire clade publish|pull)")
    agent: str | None = opt(None, "this agent's name in the Clade (None = the data "
                            "directory's name)")
    every_cycles: int = opt(1, "exchange with the Clade every this many curator cycles "
                            "(rate limit)", positive=True)
    max_publish: int = opt(50, "items one exchange publishes at most (the rest wait for the "
                           "next one)", positive=True)
    max_pull: int = opt(50, "foreign items one exchange pulls at most (the rest wait for the "
                        "next one)", positive=True)
    publish_attempts: int = opt(4, "tries of one publish whose commit loses the race to "
                                "other agents' (LanceDB's own retries included in each; "
                                "jittered pauses between)", positive=True)
    compact_every: int = opt(20, "the agent whose publish makes a table version that is a "
                             "multiple of this compacts the table (merges small files, "
                             "removes old versions' files)", positive=True)
    keep_versions_s: float = opt(600.0, "a compaction removes the files of table versions "
                                 "older than this many seconds (a sibling still reading one "
                                 "retries at its next exchange)")


@dataclass(frozen=True)
class SuccessionConfig:
    lessons: int = opt(10, "a testament's lessons: this many of the costliest failures (the "
                       "largest losses, then critical incidents), each with the warnings it "
                       "produced; those warnings are the successor's bloodstains", positive=True)


@dataclass(frozen=True)
class DreamConfig:
    enabled: bool = opt(False, "dream when the heartbeat is idle: replay older episodes "
                        "against candidate and active rules (off by default: on "
                        "scripts/bench_learning.py, default / reversal / slippage_evening seed "
                        "1, the first correct line came at the same tick (1000 / 1000 / 1250) "
                        "with no spurious line either way; dreams change decay, not what "
                        "reaches PLAYBOOK.md first, and cost a slot of work per idle gap)")
    rules_per_slot: int = opt(8, "rules one idle slot replays at most (bounded work: a slot "
                              "never delays a tick)", positive=True)
    episodes_per_rule: int = opt(2000, "older episodes one rule is replayed on at most",
                                 positive=True)
