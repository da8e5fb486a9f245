"""The admission gate: may a candidate entry be written, and at what confidence (SPEC §5).

Owns: the five A-MAC factors (future utility, factual confidence, semantic
novelty, temporal recency, content type prior), their weighted composite, the
duplicate / merge / off-topic rules, the hallucination firewall, and the
decision record that is logged for every candidate.

Must not: touch a store, embed, call an LLM or log. The caller looks up the
nearest entries (with their cosine and their decayed confidence), optionally
asks an LLM for future utility and factual confidence, calls :func:`assess`,
then writes, upvotes, quarantines and logs ``decision.to_dict()``.

Order of the rules, and why:
1. every factor is computed first, so that every decision (even a skip)
   carries its five values for the admission-rate health metric;
2. the firewall comes before the duplicate rules: a contradiction of a
   confident entry must never be merged into (upvote) or skipped as a
   "duplicate" of the entry it contradicts. Negation barely moves an
   embedding: with the bundled MiniLM, "Never swap WETH/USDC when gas exceeds
   80 gwei" is at cosine 0.975 to "Swap WETH/USDC when gas exceeds 80 gwei",
   and "Gas is higher ..." at 0.952 to "Gas is lower ...", above the 0.95
   skip threshold. For the same reason a neighbour the candidate contradicts
   is never a skip or merge target, at any confidence;
3. skip (cosine > 0.95) and merge (> 0.90, or the same structured claim in the
   same direction) before the composite thresholds: restating known
   knowledge is evidence for it, not a new entry;
4. composite < 0.45 rejected, ≤ 0.55 admitted at 0.3, above at standard
   confidence (``confidence=None``: the caller uses
   ``decay.initial_confidence(provenance)``).

Factual confidence starts at ``neutral_factual`` (0.5), rises by the strongest
agreement and falls by the strongest contradiction, each weighted by match
strength × the neighbour's effective confidence. Two structured claims match
exactly (same condition and target, compatible strategy; direction decides);
otherwise, at cosine ≥ ``related_similarity``, the texts are compared by
negation parity (not/never/no/avoid/n't) and antonym swaps (higher/lower,
rise/fall, profit/loss, ...), and a flip only counts as a contradiction when
one text's numbers are a subset of the other's (same statement, not another
window). A structured claim whose valid time ended (``valid_until``: the curator found
it decisively reversed there) weighs nothing against a claim about the time after it (no
firewall), though it is still never that claim's merge target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from grimoire.clock import MS_PER_DAY
from grimoire.config import AdmissionConfig
from grimoire.errors import ConfigError, ValidationError
from grimoire.gate.agreement import Relation, TextSignature, claim_relation, text_relation
from grimoire.gate.quality import QualityScore, text_dimensions
from grimoire.records import Category, Claim, GrimoireEntry, Provenance, parse_enum

__all__ = [
    "FACTORS",
    "AdmissionDecision",
    "Candidate",
    "Decision",
    "Neighbour",
    "assess",
]

FACTORS = (
    "future_utility",
    "factual_confidence",
    "semantic_novelty",
    "temporal_recency",
    "content_type_prior",
)
LLM_FACTORS = frozenset({"future_utility", "factual_confidence"})
Decision = Literal["admitted", "merged", "skipped", "rejected", "quarantined"]

_COSINE_SLACK = 1e-6  # float32 dot products of unit vectors overshoot 1.0 slightly


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """What would be written: category (or ``"observation"``), text and its evidence."""

    category: Category | str
    content: str
    event_time: int  # unix ms of the event the candidate describes
    claim: Claim | None = None
    support: int = 1  # episodes behind it
    provenance: Provenance | str = Provenance.SELF_LEARNED

    def __post_init__(self) -> None:
        category = self.category
        if category != "observation":
            category = parse_enum(Category, category, "category")
        object.__setattr__(self, "category", category)
        object.__setattr__(self, "provenance", parse_enum(Provenance, self.provenance,
                                                          "provenance"))
        if not isinstance(self.content, str) or not self.content.strip():
            raise ValidationError("must be a non-empty string", field="content")
        if self.claim is not None and not isinstance(self.claim, Claim):
            raise ValidationError("must be a Claim or None", field="claim")
        for name in ("support", "event_time"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"must be a non-negative integer, got {value!r}",
                                      field=name)

    @property
    def category_key(self) -> str:
        return self.category.value if isinstance(self.category, Category) else self.category


@dataclass(frozen=True, slots=True)
class Neighbour:
    """An existing entry near the candidate: its cosine and its decayed confidence."""

    entry: GrimoireEntry
    similarity: float
    effective_confidence: float

    def __post_init__(self) -> None:
        if not isinstance(self.entry, GrimoireEntry):
            raise ValidationError("must be a GrimoireEntry", field="neighbours.entry")
        sim = _number(self.similarity, "neighbours.similarity")
        if not -1.0 - _COSINE_SLACK <= sim <= 1.0 + _COSINE_SLACK:
            raise ValidationError(f"must be a cosine in [-1, 1], got {sim}",
                                  field="neighbours.similarity")
        object.__setattr__(self, "similarity", min(1.0, max(-1.0, sim)))
        conf = _number(self.effective_confidence, "neighbours.effective_confidence")
        if not 0.0 <= conf <= 1.0:
            raise ValidationError(f"must be in [0, 1], got {conf}",
                                  field="neighbours.effective_confidence")
        object.__setattr__(self, "effective_confidence", conf)


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """The gate's verdict with everything needed to log and act on it."""

    decision: Decision
    composite: float
    factors: Mapping[str, float]
    confidence: float | None = None  # set for a low-confidence admission; None = standard
    merge_target_id: str | None = None
    conflicting_id: str | None = None
    off_topic: bool = False
    reasons: tuple[str, ...] = ()
    nearest_id: str | None = None
    nearest_similarity: float | None = None
    agreeing_ids: tuple[str, ...] = ()
    contradicting_ids: tuple[str, ...] = ()

    @property
    def low_confidence(self) -> bool:
        return self.decision == "admitted" and self.confidence is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "composite": self.composite,
            "factors": {name: self.factors[name] for name in FACTORS},
            "confidence": self.confidence,
            "low_confidence": self.low_confidence,
            "merge_target_id": self.merge_target_id,
            "conflicting_id": self.conflicting_id,
            "off_topic": self.off_topic,
            "reasons": list(self.reasons),
            "nearest_id": self.nearest_id,
            "nearest_similarity": self.nearest_similarity,
            "agreeing_ids": list(self.agreeing_ids),
            "contradicting_ids": list(self.contradicting_ids),
        }


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"must be a finite number, got {value!r}", field=field)
    return float(value)


def _weights(weights: Mapping[str, float], keys: Sequence[str], where: str) -> dict[str, float]:
    if set(weights) != set(keys):
        raise ConfigError(f"{where} must have exactly the keys {', '.join(keys)}")
    out = {k: float(weights[k]) for k in keys}
    if any(not math.isfinite(w) or w < 0 for w in out.values()) or sum(out.values()) <= 0:
        raise ConfigError(f"{where} must be non-negative with a positive sum")
    return out


def _relation(
    candidate: Candidate, mine: Callable[[], TextSignature], neighbour: Neighbour,
    cfg: AdmissionConfig,
) -> tuple[Relation | None, float, bool]:
    """(agree | contradict | None, weight in [0, 1], judged from structured claims)."""
    my_claim, their_claim = candidate.claim, neighbour.entry.claim
    if my_claim is not None and their_claim is not None:
        # Both structured: the claims decide; text similarity would only add noise.
        relation = claim_relation(my_claim, their_claim)
        ended = neighbour.entry.valid_until
        if relation == "contradict" and ended is not None and ended <= candidate.event_time:
            # The neighbour's claim held until ``ended`` (the episodes reversed it there):
            # a claim about the time after it weighs nothing against it, and is still
            # never merged into it.
            return relation, 0.0, True
        return relation, 1.0, True
    if neighbour.similarity < cfg.related_similarity:
        return None, 0.0, False
    relation = text_relation(mine(), TextSignature.of(neighbour.entry.content))
    return relation, neighbour.similarity if relation else 0.0, False


_Scored = list[tuple[float, Neighbour, bool]]  # (weight × confidence, neighbour, structured)


def _relations(
    candidate: Candidate, neighbours: Sequence[Neighbour], cfg: AdmissionConfig
) -> tuple[_Scored, _Scored]:
    """The neighbours the candidate agrees with and contradicts: claims first, then text."""
    agree: _Scored = []
    contradict: _Scored = []
    signature: list[TextSignature] = []

    def mine() -> TextSignature:  # the candidate's, computed once and only if needed
        if not signature:
            signature.append(TextSignature.of(candidate.content))
        return signature[0]

    for n in neighbours:
        relation, weight, structured = _relation(candidate, mine, n, cfg)
        if relation == "agree":
            agree.append((weight * n.effective_confidence, n, structured))
        elif relation == "contradict":
            contradict.append((weight * n.effective_confidence, n, structured))
    return agree, contradict


def _llm_scores(llm_scores: Mapping[str, float] | None) -> dict[str, float]:
    if llm_scores is None:
        return {}
    if not isinstance(llm_scores, Mapping):
        raise ValidationError("must be a mapping of factor name to score", field="llm_scores")
    unknown = set(llm_scores) - LLM_FACTORS
    if unknown:
        raise ValidationError(f"unknown factor(s) {', '.join(sorted(map(str, unknown)))}; "
                              f"allowed: {', '.join(sorted(LLM_FACTORS))}", field="llm_scores")
    out: dict[str, float] = {}
    for name, value in llm_scores.items():
        score = _number(value, f"llm_scores.{name}")
        if not 0.0 <= score <= 1.0:
            raise ValidationError(f"must be in [0, 1], got {score}", field=f"llm_scores.{name}")
        out[name] = score
    return out


def _future_utility(
    candidate: Candidate, quality: QualityScore | None, cfg: AdmissionConfig
) -> float:
    weights = _weights(cfg.utility_weights, ("actionability", "specificity", "support"),
                       "admission.utility_weights")
    if quality is not None:
        try:
            action = float(quality.dimensions["actionability"])
            specific = float(quality.dimensions["specificity"])
        except KeyError as exc:
            raise ValidationError(f"has no {exc.args[0]!r} dimension", field="quality") from None
    else:
        text = text_dimensions(candidate.content)
        action, specific = text["actionability"], text["specificity"]
    if cfg.support_saturation <= 0:
        raise ConfigError("admission.support_saturation must be > 0")
    support = min(1.0, candidate.support / cfg.support_saturation)
    total = (weights["actionability"] * action + weights["specificity"] * specific
             + weights["support"] * support)
    return total / sum(weights.values())


def _recency(event_time: int, now: int, cfg: AdmissionConfig) -> float:
    half_life = cfg.recency_half_life_days * MS_PER_DAY
    if not math.isfinite(half_life) or half_life <= 0:
        raise ConfigError("admission.recency_half_life_days must be > 0")
    return float(2.0 ** (-max(0, now - event_time) / half_life))


def assess(
    candidate: Candidate,
    neighbours: Sequence[Neighbour],
    *,
    now: int,
    cfg: AdmissionConfig,
    quality: QualityScore | None = None,
    llm_scores: Mapping[str, float] | None = None,
) -> AdmissionDecision:
    """Decide whether ``candidate`` is admitted, merged, skipped, rejected or quarantined.

    ``neighbours`` are the nearest existing entries (any order) with their
    cosine to the candidate and their effective (decayed) confidence.
    ``quality`` reuses an already computed score's actionability and
    specificity; ``llm_scores`` may override ``future_utility`` and
    ``factual_confidence``.
    """
    if not isinstance(candidate, Candidate):
        raise ValidationError("must be a Candidate", field="candidate")
    if any(not isinstance(n, Neighbour) for n in neighbours):
        raise ValidationError("must be a sequence of Neighbour", field="neighbours")
    if isinstance(now, bool) or not isinstance(now, int):
        raise ValidationError(f"must be unix ms as an integer, got {now!r}", field="now")
    overrides = _llm_scores(llm_scores)
    factor_weights = _weights(cfg.weights, FACTORS, "admission.weights")
    reasons: list[str] = []

    agree, contradict = _relations(candidate, neighbours, cfg)
    # The strongest agreement pulls up from the neutral value, the strongest
    # contradiction pulls down, each weighted by match strength × confidence.
    support_for = max((s for s, _, _ in agree), default=0.0)
    support_against = max((s for s, _, _ in contradict), default=0.0)
    neutral = cfg.neutral_factual
    factual = min(1.0, max(0.0, neutral + (1.0 - neutral) * support_for
                           - neutral * support_against))

    ranked = sorted(neighbours, key=lambda n: n.similarity, reverse=True)
    nearest = ranked[0] if ranked else None
    c = max(0.0, nearest.similarity) if nearest else 0.0

    category = candidate.category_key
    if category not in cfg.type_prior:
        raise ConfigError(f"admission.type_prior has no entry for {category!r}")
    factors = {
        "future_utility": _future_utility(candidate, quality, cfg),
        "factual_confidence": factual,
        "semantic_novelty": 1.0 - c,
        "temporal_recency": _recency(candidate.event_time, now, cfg),
        "content_type_prior": float(cfg.type_prior[category]),
    }
    for name, value in overrides.items():
        factors[name] = value
        reasons.append(f"{name} from the LLM path: {value:.2f}")
    composite = sum(factor_weights[k] * factors[k] for k in FACTORS) / sum(
        factor_weights.values()
    )
    composite = min(1.0, max(0.0, composite))

    off_topic = nearest is not None and c < cfg.off_topic_similarity
    if off_topic:
        reasons.append(f"off-topic: nearest cosine {c:.2f} < {cfg.off_topic_similarity}")
    contradicted_ids = {n.entry.id for _, n, _ in contradict}
    base = AdmissionDecision(
        "rejected",
        composite,
        factors,
        off_topic=off_topic,
        nearest_id=nearest.entry.id if nearest else None,
        nearest_similarity=nearest.similarity if nearest else None,
        agreeing_ids=tuple(n.entry.id for _, n, _ in agree),
        contradicting_ids=tuple(n.entry.id for _, n, _ in contradict),
    )

    # Hallucination firewall.
    confident = [t for t in contradict
                 if t[0] > 0.0 and t[1].effective_confidence >= cfg.firewall_contradicted]
    if factors["factual_confidence"] < cfg.firewall_factual and confident:
        worst = max(confident, key=lambda t: (t[1].effective_confidence, t[1].similarity))[1]
        reasons.append(f"contradicts {worst.entry.id} (confidence "
                       f"{worst.effective_confidence:.2f}) with factual confidence "
                       f"{factors['factual_confidence']:.2f} < {cfg.firewall_factual}")
        return replace(base, decision="quarantined", conflicting_id=worst.entry.id,
                       reasons=tuple(reasons))

    # Duplicates and restatements, never of an entry the candidate contradicts.
    for n in ranked:
        if n.similarity <= cfg.merge_similarity:
            break  # ranked by similarity: nothing further is above the thresholds
        if n.entry.id in contradicted_ids:
            reasons.append(f"{n.entry.id} (cosine {n.similarity:.2f}) is contradicted: "
                           "not a duplicate")
            continue
        if n.similarity > cfg.skip_similarity:
            reasons.append(f"duplicate of {n.entry.id} (cosine {n.similarity:.2f} > "
                           f"{cfg.skip_similarity})")
            return replace(base, decision="skipped", reasons=tuple(reasons))
        reasons.append(f"near-duplicate of {n.entry.id} (cosine {n.similarity:.2f} > "
                       f"{cfg.merge_similarity}): upvote it")
        return replace(base, decision="merged", merge_target_id=n.entry.id,
                       reasons=tuple(reasons))
    same_claim = [n for _, n, structured in agree if structured]
    if same_claim:
        target = max(same_claim, key=lambda n: n.similarity)
        reasons.append(f"same structured claim as {target.entry.id}: upvote it")
        return replace(base, decision="merged", merge_target_id=target.entry.id,
                       reasons=tuple(reasons))

    if composite < cfg.reject_below:
        reasons.append(f"composite {composite:.3f} < {cfg.reject_below}")
        return replace(base, reasons=tuple(reasons))
    if composite <= cfg.low_confidence_below:
        reasons.append(f"composite {composite:.3f} in [{cfg.reject_below}, "
                       f"{cfg.low_confidence_below}]: low confidence")
        return replace(base, decision="admitted", confidence=cfg.low_confidence,
                       reasons=tuple(reasons))
    reasons.append(f"composite {composite:.3f} > {cfg.low_confidence_below}")
    return replace(base, decision="admitted", reasons=tuple(reasons))
