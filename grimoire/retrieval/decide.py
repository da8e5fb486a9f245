"""Decisions around a retrieval: whether to retrieve, what to replay, when to be contrarian.

- ``should_retrieve``: seed 004's Self-RAG approximation for ``mode="auto"``.
  Curiosity above 0.8 → full retrieval; a well-covered subject (more than 5
  known entries) with curiosity below 0.4 → entries only; arousal above 0.7
  → full; otherwise a light retrieval (3 items). The seed's enum has a
  "none" mode that its heuristic never returns; neither does this one
  (skipping is the agent's call, not a guess of ours).
- ``replay_utility``: Mattar–Daw ``U = gain × need`` with gain = |P&L|
  normalised to [0, 1] and need = 1 / time since last replayed, capped at 1
  within ``need_floor_ms``. This follows the seed's formula; its prose
  ("episodes … that haven't been retrieved recently score highest") says
  the opposite of the formula. The formula is the closer reading of Mattar
  & Daw, where need is the expected near-future visit of a state, for which
  recency is the proxy; pass an episode's own timestamp as
  ``last_replayed_ms`` if it was never replayed.
- ``contrarian_due`` / ``contrarian_pick``: every 100 ticks, force in the
  best entries whose emotional valence is opposite to the current mood
  (anti-rumination, seed 004).

Owns: these pure decisions. Must not run the retrieval or read a store.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError
from grimoire.records import PAD
from grimoire.retrieval.candidates import Candidate

__all__ = [
    "RetrievalDecision",
    "RetrievalMode",
    "contrarian_due",
    "contrarian_pick",
    "curiosity_from_similarity",
    "replay_rank",
    "replay_utility",
    "should_retrieve",
    "valence",
]


class RetrievalMode(StrEnum):
    FULL = "full"  # vector + keyword + graph, episodes and entries, the caller's k
    SEMANTIC_ONLY = "semantic_only"  # entries only: distilled knowledge covers it
    LIGHT = "light"  # reduced k
    NONE = "none"  # skip (never chosen by the heuristic; kept for the agent's own call)


@dataclass(frozen=True, slots=True)
class RetrievalDecision:
    mode: RetrievalMode
    k: int
    kinds: tuple[str, ...]
    reason: str


def _unit(value: float, name: str, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"must be a finite number, got {value!r}", field=name)
    if not low <= value <= 1.0:
        raise ValidationError(f"must be in [{low:g}, 1], got {value!r}", field=name)
    return float(value)


def curiosity_from_similarity(top_similarity: float | None) -> float:
    """Curiosity as novelty: 1 − the best cosine of the query to known entries (1.0 if none)."""
    if top_similarity is None:
        return 1.0
    return 1.0 - max(0.0, min(1.0, float(top_similarity)))


def should_retrieve(
    curiosity: float,
    coverage: int,
    arousal: float | None = None,
    k: int = 10,
    cfg: RetrievalConfig | None = None,
) -> RetrievalDecision:
    """Seed 004's ``should_retrieve``: the mode, the k and kinds to use, and why.

    ``curiosity`` in [0, 1] (see :func:`curiosity_from_similarity`);
    ``coverage`` = how many active entries already speak to the subject;
    ``arousal`` = the mood's arousal in [−1, 1], None without a mood.
    """
    cfg = cfg or RetrievalConfig()
    curiosity = _unit(curiosity, "curiosity")
    if isinstance(coverage, bool) or not isinstance(coverage, int) or coverage < 0:
        raise ValidationError(f"must be an integer >= 0, got {coverage!r}", field="coverage")
    both = ("episode", "entry")
    if curiosity > cfg.auto_curiosity_full:
        return RetrievalDecision(RetrievalMode.FULL, k, both,
                                 f"curiosity {curiosity:.2f} > {cfg.auto_curiosity_full:g}: "
                                 "unfamiliar, full retrieval")
    if coverage > cfg.auto_coverage and curiosity < cfg.auto_curiosity_low:
        return RetrievalDecision(RetrievalMode.SEMANTIC_ONLY, k, ("entry",),
                                 f"{coverage} known entries cover it and curiosity "
                                 f"{curiosity:.2f} < {cfg.auto_curiosity_low:g}: entries only")
    if arousal is not None and _unit(arousal, "arousal", -1.0) > cfg.auto_arousal:
        return RetrievalDecision(RetrievalMode.FULL, k, both,
                                 f"arousal {arousal:.2f} > {cfg.auto_arousal:g}: "
                                 "under stress, check past experience")
    return RetrievalDecision(RetrievalMode.LIGHT, min(k, cfg.auto_light_k), both,
                             "routine: light retrieval")


def replay_utility(
    gain: float | None,
    last_replayed_ms: int,
    now: int,
    gain_scale: float,
    need_floor_ms: int = 3_600_000,
) -> float:
    """Mattar–Daw ``U = gain × need`` in [0, 1].

    gain = min(1, |gain| / gain_scale) (0 without a P&L or a scale);
    need = need_floor_ms / max(now − last_replayed_ms, need_floor_ms).
    """
    if need_floor_ms < 1:
        raise ValidationError("must be >= 1", field="need_floor_ms")
    if gain is None or gain_scale <= 0.0 or not math.isfinite(gain):
        return 0.0
    normalised = min(1.0, abs(gain) / gain_scale)
    need = need_floor_ms / max(now - last_replayed_ms, need_floor_ms)
    return normalised * need


def replay_rank(
    candidates: Iterable[Candidate],
    last_replayed: Mapping[str, int],
    now: int,
    need_floor_ms: int = 3_600_000,
) -> list[tuple[str, float]]:
    """Episodes by replay utility (desc, then id); gain normalised by the largest |gain| here.

    An episode missing from ``last_replayed`` counts from its own timestamp.
    """
    episodes = [c for c in candidates if c.kind == "episode"]
    scale = max((abs(c.gain) for c in episodes if c.gain is not None), default=0.0)
    ranked = [
        (c.id, replay_utility(c.gain, last_replayed.get(c.id, c.timestamp), now, scale,
                              need_floor_ms))
        for c in episodes
    ]
    return sorted(ranked, key=lambda pair: (-pair[1], pair[0]))


def contrarian_due(tick: int, every: int = 100) -> bool:
    """True on every ``every``-th tick (not tick 0); ``every`` ≤ 0 turns injection off."""
    return every > 0 and tick > 0 and tick % every == 0


def valence(candidate: Candidate) -> float | None:
    """An item's emotional valence: its PAD pleasure; else −1 for a warning, sign(P&L)
    for an episode with a gain; None when nothing says."""
    if candidate.emotion is not None:
        return candidate.emotion.pleasure
    if candidate.category == "warning":
        return -1.0
    if candidate.kind == "episode" and candidate.gain:
        return math.copysign(1.0, candidate.gain)
    return None


def contrarian_pick(
    candidates: Iterable[Candidate],
    scores: Mapping[str, float],
    mood: PAD,
    n: int = 1,
    exclude: Collection[str] = (),
) -> list[str]:
    """The ``n`` best-scored items whose valence is opposite in sign to the mood's pleasure.

    An anxious mood (pleasure < 0) gets items from confident moments; an
    overconfident one (pleasure > 0) gets warnings and losses. A neutral
    mood (pleasure 0) has no opposite: nothing is picked. ``exclude`` holds
    the ids already selected.
    """
    if mood.pleasure == 0.0 or n <= 0:
        return []
    wanted = -math.copysign(1.0, mood.pleasure)
    pool = {
        c.id for c in candidates
        if c.id in scores and c.id not in exclude
        and (v := valence(c)) is not None and v != 0.0 and math.copysign(1.0, v) == wanted
    }
    return sorted(pool, key=lambda item: (-scores[item], item))[:n]
