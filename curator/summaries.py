"""Hierarchical summaries and Memory Utility Score pruning (SPEC §8 step 8, seed 002).

Owns: clustering recent episodes by embedding (``cluster_episodes``), the
extractive L1 session summary of one cluster (``l1_summary``), the L2 chapter
summary of several L1s (``l2_summary``), the Memory Utility Score and the
prune rule. Everything is pure: callers pass episodes, vectors and entries in,
and get drafts back; this module never reads a store or a clock.

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
from datetime import UTC, datetime, timedelta
from typing import Protocol

import numpy as np
import numpy.typing as npt
import structlog

from grimoire.clock import MS_PER_DAY
from grimoire.config import CuratorConfig
from grimoire.errors import LLMError, ValidationError
from grimoire.records import Episode, GrimoireEntry, Outcome, Regime

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

log = structlog.get_logger()

Matrix = npt.NDArray[np.float64]
_MAX_QUOTE = 160
_GIST_MARK = " Examples:"  # L2 quotes the first example after this mark in each L1
_DEFAULT_MUS = {"retrieval_frequency": 0.4, "relevance": 0.4, "recency": 0.2}


class SummaryWriter(Protocol):
    """Where an LLM-written summary plugs in (``llm=`` on ``l1_summary``/``l2_summary``).

    ``facts`` is the extractive summary (numbers this module measured; the
    writer must not contradict them) and ``excerpts`` the source texts. Return
    the prose; raise ``LLMError`` to fall back to the extractive text.
    """

    def write_summary(self, level: int, facts: str, excerpts: Sequence[str]) -> str: ...


@dataclass(frozen=True, slots=True, eq=False)
class Cluster:
    """Episodes that belong together: positions into the list given to ``cluster_episodes``.

    ``indices`` are in time order; ``similarities[i]`` is the cosine of
    member ``indices[i]`` to the unit centroid; ``coherence`` is the mean
    pairwise cosine between members (1.0 for a single member).
    """

    indices: tuple[int, ...]
    similarities: tuple[float, ...]
    centroid: Matrix
    coherence: float

    @property
    def size(self) -> int:
        return len(self.indices)


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


# ---------------------------------------------------------------- clustering


def cluster_episodes(
    episodes: Sequence[Episode],
    vectors: npt.ArrayLike,
    *,
    min_size: int,
    coherence: float,
    group_by: Sequence[str] = (),
) -> list[Cluster]:
    """Greedy cosine clustering in time order; keep clusters of ``min_size``+ members.

    Each episode (oldest first) joins the cluster whose members it is most
    similar to on average, if that mean cosine is at least ``coherence``;
    otherwise it starts a cluster. So every cluster's coherence (its mean
    pairwise cosine) is at least ``coherence`` by construction. Both follow
    from the cluster's vector sum S and size n: mean cosine to v is S·v / n,
    coherence is (|S|² − n) / (n(n − 1)); a decision costs one dot product per
    cluster. ``group_by`` names episode fields (e.g. ``("regime",)``) that must
    be equal inside a cluster. The order of ``episodes`` does not matter.
    """
    rows = _unit_rows(vectors, len(episodes))
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise ValidationError("must be an integer >= 1", field="min_size")
    if not -1.0 <= coherence <= 1.0:
        raise ValidationError("must be in [-1, 1]", field="coherence")
    for name in group_by:
        if name not in Episode.__dataclass_fields__:
            raise ValidationError(f"{name!r} is not an episode field", field="group_by")
    order = sorted(range(len(episodes)), key=lambda i: (episodes[i].timestamp, episodes[i].id))
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in order:
        key = tuple(str(getattr(episodes[i], name)) for name in group_by)
        groups.setdefault(key, []).append(i)
    clusters: list[Cluster] = []
    for members in groups.values():
        clusters.extend(_greedy(rows, members, min_size, coherence))
    clusters.sort(key=lambda c: (episodes[c.indices[0]].timestamp, episodes[c.indices[0]].id))
    return clusters


def _unit_rows(vectors: npt.ArrayLike, n: int) -> Matrix:
    rows = np.asarray(vectors, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] != n:
        raise ValidationError(f"must be a matrix with one row per episode ({n}), got shape "
                              f"{rows.shape}", field="vectors")
    if not np.all(np.isfinite(rows)):
        raise ValidationError("must be finite", field="vectors")
    norms = np.linalg.norm(rows, axis=1)
    if n and np.any(norms == 0):
        raise ValidationError(f"row {int(np.argmin(norms))} is all zeros", field="vectors")
    unit: Matrix = rows / norms[:, None] if n else rows
    return unit


def _greedy(rows: Matrix, members: list[int], min_size: int, threshold: float) -> list[Cluster]:
    sums = np.zeros((len(members), rows.shape[1]))
    sq = np.zeros(len(members))  # |S|² per cluster
    sizes = np.zeros(len(members))
    assigned: list[list[int]] = []
    for i in members:
        v = rows[i]
        k = len(assigned)
        if k:
            # Mean cosine of v to each cluster's members. Joining only at or above
            # the threshold keeps every cluster's mean pairwise cosine above it too
            # (a mean of means that are all >= t), and stops a large cluster from
            # absorbing outliers that would barely dent its average.
            mean_to_members = (sums[:k] @ v) / sizes[:k]
            best = int(np.argmax(mean_to_members))
            if mean_to_members[best] >= threshold:
                sums[best] += v
                sq[best] = float(sums[best] @ sums[best])
                sizes[best] += 1
                assigned[best].append(i)
                continue
        sums[k] = v
        sq[k] = 1.0
        sizes[k] = 1
        assigned.append([i])
    out = []
    for c, idx in enumerate(assigned):
        size = len(idx)
        coherence = 1.0 if size == 1 else float((sq[c] - size) / (size * (size - 1)))
        if size < min_size or coherence < threshold:
            continue
        centroid = sums[c] / math.sqrt(sq[c])
        sims = tuple(float(x) for x in rows[idx] @ centroid)
        out.append(Cluster(tuple(idx), sims, centroid, coherence))
    return out


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
    quotes = [members[j].text for j in closest[: max(0, examples)]]
    shared = _shared_fields(members)
    facts = " ".join(part for part in (
        f"{len(members)} episodes, {_period(members)}:",
        _fields_text(members),
        _outcomes_text(members),
        _metrics_text(members),
    ) if part)
    extractive = facts + (_GIST_MARK + " " + "; ".join(f"“{_quote(q)}”" for q in quotes) + "."
                          if quotes else "")
    content = _with_llm(llm, 1, extractive, [m.text for m in members])
    return SummaryDraft(
        content=content,
        level=1,
        parent_episode_ids=tuple(m.id for m in members),
        tags=_tags(1, shared),
        regime=_as_regime(shared.get("regime")),
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
    highlights = [_highlight(v.content) for v in biggest[: max(0, examples)]]
    parts = [f"Chapter of {len(views)} session summaries covering {len(episode_ids)} episodes, "
             f"{_span(start, end)}."]
    for label, counts in (("Regime", regimes), ("Strategy", strategies)):
        if counts:
            ranked = ", ".join(f"{k} in {n} session{'s' * (n != 1)}" for k, n in _ranked(counts))
            parts.append(f"{label}{'s:' if len(counts) > 1 else ''} {ranked}.")
    if chapter:
        parts += [_outcomes_text(chapter), _metrics_text(chapter)]
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
        tags=_tags(2, shared),
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


# ---------------------------------------------------------------- text pieces

_SHARED_FIELDS = ("regime", "strategy", "tool", "token_pair", "chain")


def _shared_fields(members: Sequence[Episode]) -> dict[str, str]:
    out = {}
    for name in _SHARED_FIELDS:
        values = {_field(m, name) for m in members}
        if len(values) == 1 and None not in values:
            out[name] = str(values.pop())
    return out


def _field(episode: Episode, name: str) -> str | None:
    value = getattr(episode, name)
    if isinstance(value, Regime):
        return value.value
    return None if value is None else str(value)


def _fields_text(members: Sequence[Episode]) -> str:
    parts = []
    for name in _SHARED_FIELDS:
        counts = Counter(v for m in members if (v := _field(m, name)) is not None)
        if not counts:
            continue
        label = name.replace("_", " ")
        if len(counts) == 1 and sum(counts.values()) == len(members):
            parts.append(f"{label} {next(iter(counts))}")
        else:
            parts.append(f"{label} mixed (" + ", ".join(f"{k} {n}" for k, n in
                                                        _ranked(counts)[:3]) + ")")
    return "; ".join(parts) + "." if parts else ""


def _outcomes_text(members: Sequence[Episode]) -> str:
    counts = Counter(m.outcome for m in members if m.outcome is not Outcome.DESCRIPTIVE)
    parts = []
    if counts:
        parts.append("outcomes " + ", ".join(
            f"{counts[o]} {o.value}" for o in (Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL)
            if counts[o]))
    gains = [m.gain for m in members if m.gain is not None]
    if gains:
        parts.append(f"gain {_range(min(gains), max(gains), '')} (total {_num(sum(gains))})")
    return ("Outcomes: " + "; ".join(parts).removeprefix("outcomes ") + ".") if parts else ""


def _metrics_text(members: Sequence[Episode]) -> str:
    names = sorted({k for m in members for k in m.metrics})
    parts = []
    for name in names:
        values = [m.metrics[name] for m in members if name in m.metrics]
        label, unit = _metric_label(name)
        text = f"{label} {_range(min(values), max(values), unit)}"
        if len(values) < len(members):
            text += f" (in {len(values)})"
        parts.append(text)
    return ("Metrics: " + "; ".join(parts) + ".") if parts else ""


_UNITS = {"gwei": "gwei", "bps": "bps", "usd": "USD", "pct": "%", "ms": "ms"}


def _metric_label(name: str) -> tuple[str, str]:
    head, _, tail = name.rpartition("_")
    if head and tail in _UNITS:
        return head.replace("_", " "), _UNITS[tail]
    return name.replace("_", " "), ""


def _num(value: float) -> str:
    text = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}" if abs(value) >= 10 \
        else f"{value:.2f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text == "-0" else text


def _range(low: float, high: float, unit: str) -> str:
    dash = " to " if low < 0 else "–"  # "-2–2" would read as a subtraction
    body = _num(low) if _num(low) == _num(high) else f"{_num(low)}{dash}{_num(high)}"
    return f"{body}{'' if not unit else '%' if unit == '%' else ' ' + unit}"


def _ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _utc(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def _span(start: int, end: int) -> str:
    a, b = _utc(start), _utc(end)
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC"
    return f"{a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M} UTC"


def _period(members: Sequence[Episode]) -> str:
    return _span(members[0].timestamp, members[-1].timestamp)


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_QUOTE else flat[: _MAX_QUOTE - 1].rstrip() + "…"


def _highlight(content: str) -> str:
    """An L1's most representative quote (its first example), else the start of its text."""
    _, mark, tail = content.partition(_GIST_MARK)
    if mark and "“" in tail and "”" in tail.split("“", 1)[1]:
        return _quote(tail.split("“", 1)[1].split("”", 1)[0])
    return _quote(content)


def _tags(level: int, shared: Mapping[str, str]) -> tuple[str, ...]:
    return ("summary", f"summary:l{level}", *(f"{k}:{v}" for k, v in sorted(shared.items())))


def _as_regime(value: str | None) -> Regime | None:
    return None if value is None else Regime(value)


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
