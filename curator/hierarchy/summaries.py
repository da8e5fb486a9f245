"""Hierarchical summaries and Memory Utility Score pruning (SPEC §8 step 8, seed 002).

Owns: the extractive L1 session summary of one episode cluster
(``l1_summary``; clusters come from ``curator.hierarchy.episode_clusters``, re-exported
here), the L2 chapter summary of several L1s (``l2_summary``), the Memory
Utility Score and the prune rule. Wording lives in ``curator.hierarchy.summary_text``.
Everything is pure: callers pass episodes, vectors and entries in, and get
drafts back; this module never reads a store or a clock.

Without an LLM the summaries are extractive: the episodes closest to the
cluster's centroid are quoted, fields every member shares are named, and
metric ranges are measured. An LLM (``llm=``) may rewrite the prose; the
structured parts (provenance, regime, strategy, period) are always computed
here, and a failing LLM falls back to the extractive text.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from curator.hierarchy import summary_text as txt
from curator.hierarchy.episode_clusters import Cluster, cluster_episodes
from grimoire.clock import MS_PER_DAY
from grimoire.config import CuratorConfig
from grimoire.errors import LLMError, ValidationError
from grimoire.guard.instructions import is_marked
from grimoire.logs import get_logger
from grimoire.records import Episode, GrimoireEntry, Regime

__all__ = [
    "Cluster",
    "SummaryDraft",
    "SummaryWriter",
    "cluster_episodes",
    "l1_summary",
    "l2_due",
    "l2_summary",
    "memory_utility_score",
    "recency_score",
    "retrieval_frequency_score",
    "should_prune",
]

log = get_logger(__name__)

_DEFAULT_MUS = {"retrieval_frequency": 0.4, "relevance": 0.4, "recency": 0.2}


class SummaryWriter(Protocol):
    """Where an LLM-written summary plugs in (``llm=`` on ``l1_summary``/``l2_summary``).

    ``facts`` is the extractive summary (numbers this module measured; the
    writer must not contradict them) and ``excerpts`` the source texts. Return
    the prose; raise ``LLMError`` to fall back to the extractive text.
    """

    def write_summary(self, level: int, facts: str, excerpts: Sequence[str]) -> str: ...


@dataclass(frozen=True, slots=True)
class SummaryDraft:
    """A summary ready to be admitted as an entry (level 1 = session, level 2 = chapter)."""

    content: str
    level: int
    parent_episode_ids: tuple[str, ...]
    parent_summary_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    regime: Regime | None = None
    strategy: str | None = None
    valid_from: int | None = None  # first episode covered (unix ms)
    valid_until: int | None = None  # last episode covered (unix ms)
    coherence: float | None = None


# ---------------------------------------------------------------- L1 and L2


def l1_summary(
    cluster: Cluster,
    episodes: Sequence[Episode],
    *,
    examples: int = 3,
    llm: SummaryWriter | None = None,
) -> SummaryDraft:
    """Session summary of one cluster: shared fields, outcomes, metric ranges, quoted examples.

    ``episodes`` is the list the cluster was made from. The quoted examples
    are the members closest to the centroid (ties by time). ``llm=None``
    keeps the extractive text; an LLM only rewrites the prose.
    """
    if any(not 0 <= i < len(episodes) for i in cluster.indices) or not cluster.indices:
        raise ValidationError("cluster does not index into these episodes", field="cluster")
    members = [episodes[i] for i in cluster.indices]
    closest = sorted(range(cluster.size), key=lambda j: (-cluster.similarities[j], j))
    # Text marked as instructing a model is counted, never quoted (it would come back as
    # the summary's own words): grimoire.guard.instructions.
    quotes = [members[j].text for j in closest
              if not is_marked(members[j].marks)][: max(0, examples)]
    shared = txt.shared_fields(members)
    facts = " ".join(part for part in (
        f"{len(members)} episodes, {txt.period(members)}:",
        txt.fields_text(members),
        txt.outcomes_text(members),
        txt.metrics_text(members),
    ) if part)
    extractive = facts + (txt.GIST_MARK + " " + "; ".join(f"“{txt.quote(q)}”" for q in quotes) + "."
                          if quotes else "")
    content = _with_llm(llm, 1, extractive, [m.text for m in members if not is_marked(m.marks)])
    return SummaryDraft(
        content=content,
        level=1,
        parent_episode_ids=tuple(m.id for m in members),
        tags=txt.tags(1, shared),
        regime=txt.as_regime(shared.get("regime")),
        strategy=shared.get("strategy"),
        valid_from=members[0].timestamp,
        valid_until=members[-1].timestamp,
        coherence=cluster.coherence,
    )


def l2_summary(
    l1s: Sequence[GrimoireEntry | tuple[str, SummaryDraft]],
    episodes: Sequence[Episode] = (),
    *,
    examples: int = 3,
    llm: SummaryWriter | None = None,
) -> SummaryDraft:
    """Chapter summary of L1 summaries (stored entries, or ``(id, draft)`` pairs).

    Names the period, the number of episodes covered, the regimes and
    strategies seen, and quotes the most representative episode of each of
    the L1s that cover the most episodes. Pass the parent ``episodes`` too
    and it also measures outcomes and metric ranges over the whole chapter.
    """
    views = sorted((_l1_view(x) for x in l1s), key=lambda v: (v.start, v.id))
    if not views:
        raise ValidationError("needs at least one L1 summary", field="l1s")
    if len({v.id for v in views}) != len(views):
        raise ValidationError("the same L1 summary is given twice", field="l1s")
    episode_ids = tuple(dict.fromkeys(e for v in views for e in v.episode_ids))
    covered = set(episode_ids)
    chapter = sorted((e for e in episodes if e.id in covered), key=lambda e: (e.timestamp, e.id))
    start, end = min(v.start for v in views), max(v.end for v in views)
    regimes = Counter(v.regime.value for v in views if v.regime is not None)
    strategies = Counter(v.strategy for v in views if v.strategy is not None)
    biggest = sorted(views, key=lambda v: (-len(v.episode_ids), v.start, v.id))
    highlights = [txt.highlight(v.content) for v in biggest[: max(0, examples)]]
    parts = [f"Chapter of {len(views)} session summaries covering {len(episode_ids)} episodes, "
             f"{txt.span(start, end)}."]
    for label, counts in (("Regime", regimes), ("Strategy", strategies)):
        if counts:
            ranked = ", ".join(f"{k} in {n} session{'s' * (n != 1)}" for k, n in txt.ranked(counts))
            parts.append(f"{label}{'s:' if len(counts) > 1 else ''} {ranked}.")
    if chapter:
        parts += [txt.outcomes_text(chapter), txt.metrics_text(chapter)]
    extractive = " ".join(p for p in parts if p)
    if highlights:
        extractive += " Highlights: " + "; ".join(f"“{h}”" for h in highlights) + "."
    content = _with_llm(llm, 2, extractive, [v.content for v in views])
    regime = views[0].regime if len({v.regime for v in views}) == 1 else None
    strategy = views[0].strategy if len({v.strategy for v in views}) == 1 else None
    shared = {k: v for k, v in (("regime", regime.value if regime else None),
                                ("strategy", strategy)) if v is not None}
    return SummaryDraft(
        content=content,
        level=2,
        parent_episode_ids=episode_ids,
        parent_summary_ids=tuple(v.id for v in views),
        tags=txt.tags(2, shared),
        regime=regime,
        strategy=strategy,
        valid_from=start,
        valid_until=end,
    )


def l2_due(cycle: int, cfg: CuratorConfig) -> bool:
    """Whether curator cycle number ``cycle`` (1-based) writes L2 chapter summaries."""
    return cycle > 0 and cycle % max(1, cfg.l2_every_cycles) == 0


@dataclass(frozen=True, slots=True)
class _L1View:
    id: str
    content: str
    episode_ids: tuple[str, ...]
    regime: Regime | None
    strategy: str | None
    start: int
    end: int


def _l1_view(value: GrimoireEntry | tuple[str, SummaryDraft]) -> _L1View:
    if isinstance(value, GrimoireEntry):
        if "summary:l2" in value.tags:
            raise ValidationError(f"{value.id} is an L2 summary, not an L1", field="l1s")
        start = value.valid_from if value.valid_from is not None else value.created_at
        end = value.valid_until if value.valid_until is not None else start
        return _L1View(value.id, value.content, value.parent_episode_ids, value.market_regime,
                       value.strategy, start, end)
    if (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], SummaryDraft)):
        id_, draft = value
        if draft.level != 1:
            raise ValidationError(f"{id_} is a level-{draft.level} summary", field="l1s")
        start = draft.valid_from if draft.valid_from is not None else 0
        end = draft.valid_until if draft.valid_until is not None else start
        return _L1View(id_, draft.content, draft.parent_episode_ids, draft.regime,
                       draft.strategy, start, end)
    raise ValidationError("items must be entries or (id, SummaryDraft) pairs", field="l1s")


def _with_llm(llm: SummaryWriter | None, level: int, facts: str, excerpts: list[str]) -> str:
    if llm is None:
        return facts
    try:
        text = llm.write_summary(level, facts, excerpts)
    except LLMError as exc:
        log.warning("curator.summary.llm_failed", level=level, error=str(exc))
        return facts
    if not isinstance(text, str) or not text.strip():
        log.warning("curator.summary.llm_empty", level=level)
        return facts
    return " ".join(text.split())


# ---------------------------------------------------------------- utility and pruning


def retrieval_frequency_score(count: int, max_count: int) -> float:
    """Retrievals normalised to [0, 1] on a log scale against the most-retrieved summary."""
    if count < 0 or max_count < 0:
        raise ValidationError("retrieval counts must be >= 0", field="retrieval_frequency")
    if max_count == 0:
        return 0.0
    return min(1.0, math.log1p(count) / math.log1p(max_count))


def recency_score(age_ms: int, half_life_ms: int) -> float:
    """2^(−age/half-life): 1.0 for a fresh summary, 0.5 after one half-life."""
    if half_life_ms <= 0:
        raise ValidationError("must be > 0", field="half_life_ms")
    return float(2.0 ** (-max(0, age_ms) / half_life_ms))


def memory_utility_score(
    retrieval_frequency: float,
    relevance: float,
    recency: float,
    *,
    weights: Mapping[str, float] | None = None,
) -> float:
    """MUS = 0.4·retrieval frequency + 0.4·relevance + 0.2·recency (seed 002), inputs in [0, 1]."""
    w = dict(_DEFAULT_MUS if weights is None else weights)
    if set(w) != set(_DEFAULT_MUS):
        raise ValidationError(f"must have exactly the keys {sorted(_DEFAULT_MUS)}",
                              field="mus_weights")
    values = {"retrieval_frequency": retrieval_frequency, "relevance": relevance,
              "recency": recency}
    for name, value in values.items():
        if isinstance(value, bool) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValidationError(f"must be in [0, 1], got {value!r}", field=name)
    total = sum(w.values())
    if total <= 0 or any(x < 0 for x in w.values()):
        raise ValidationError("must be non-negative with a positive sum", field="mus_weights")
    return sum(w[k] * values[k] for k in values) / total


def should_prune(level: int, mus: float, age_ms: int, cfg: CuratorConfig) -> bool:
    """Prune an old summary with low utility: L1 below 0.2, L2 below 0.3 (config)."""
    if level not in (1, 2):
        raise ValidationError(f"must be 1 or 2, got {level!r}", field="level")
    if age_ms < cfg.mus_old_days * MS_PER_DAY:
        return False
    return mus < (cfg.mus_prune_l1 if level == 1 else cfg.mus_prune_l2)
