"""What the report shows, read from a store into plain series (read-only).

Every number here is a count or a value read from the stores, never an estimate:

- ``rules``: each entry PLAYBOOK.md ever listed, with the confidence and ✓ / ✗ it was
  printed with at each curator cycle (``playbook_history``), the cycle it entered, and
  the cycle it left (None while still listed in the latest cycle);
- ``episodes_by_day``: episodes per UTC day and type, and action outcomes per day;
- ``retrievals_by_day``: retrievals per day, median and p95 latency (of those whose
  latency was logged), outcomes reported, and the hit rate = positive / reported;
- ``candidates``: the entries being judged (status candidate, never listed in
  PLAYBOOK.md while they are), the most confident first, with their ✓ / ✗;
- ``graph``: the knowledge graph's triples (open, closed, versions, subjects);
- ``causal``: learned causal-link entries, the causal edges by kind (outcome edges too),
  and the lags of the edges between events (their own ``lag_ms``, else the time from the
  cause episode to the effect episode).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grimoire.context import Context
from grimoire.records import Category, EntryStatus, EpisodeType, Outcome
from grimoire.stores.semantic.types import EdgeKind, EntryFilter

__all__ = ["MIN_REPORTED", "CausalSummary", "ReportData", "RetrievalDay", "RuleHistory",
           "collect", "day_of"]

MS_PER_DAY = 86_400_000
#: Fewer outcomes reported than this give no hit rate: "0%" from one report says nothing.
MIN_REPORTED = 5
#: Candidates the report lists (the most confident); the count is of all of them.
MAX_CANDIDATES = 25
# Edge kinds that say cause → effect between events (outcome edges link entries to decisions).
_EVENT_EDGE_KINDS = (EdgeKind.EXPLICIT, EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)


def day_of(ms: int) -> int:
    """The UTC day number (days since 1970-01-01) of a unix-ms time."""
    return ms // MS_PER_DAY


@dataclass(frozen=True, slots=True)
class RulePoint:
    cycle: int
    at: int  # when that cycle recorded it (unix ms)
    confidence: float
    validated: int
    contradicted: int


@dataclass(frozen=True, slots=True)
class RuleHistory:
    entry_id: str
    category: str
    content: str
    status: str  # the entry's status now
    points: tuple[RulePoint, ...]  # one per cycle that listed it, oldest first
    entered_cycle: int
    left_cycle: int | None  # the first cycle after its last listing; None: still listed
    relisted: int  # how many times it came back after leaving


@dataclass(frozen=True, slots=True)
class RetrievalDay:
    day: int
    count: int
    p50_ms: float | None
    p95_ms: float | None
    reported: int
    positive: int
    negative: int
    neutral: int

    @property
    def hit_rate(self) -> float | None:
        """positive / reported, None under ``MIN_REPORTED`` reports."""
        return self.positive / self.reported if self.reported >= MIN_REPORTED else None


@dataclass(frozen=True, slots=True)
class CausalSummary:
    links: tuple[tuple[str, str, float, str, int | None], ...]  # id, status, conf, text, within
    edges_by_kind: dict[str, int]
    lags_ms: dict[str, tuple[float, ...]]  # per edge kind, the lags that are known


@dataclass(frozen=True, slots=True)
class ReportData:
    data_dir: str
    generated_at: int
    cycles: tuple[tuple[int, int], ...]  # (cycle, recorded_at) of every recorded listing
    rules: tuple[RuleHistory, ...]
    episode_types: tuple[str, ...]
    episodes_by_day: dict[int, dict[str, int]]  # day → type → count
    outcomes_by_day: dict[int, dict[str, int]]  # day → outcome → count (actions only)
    retrievals: tuple[RetrievalDay, ...]
    graph: dict[str, int]
    causal: CausalSummary
    counts: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False  # FEED.json: the market simulator's memory, in simulated time
    # (id, category, confidence, ✓, ✗, content) of the most confident candidates
    candidates: tuple[tuple[str, str, float, int, int, str], ...] = ()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def _rules(ctx: Context) -> tuple[tuple[tuple[int, int], ...], tuple[RuleHistory, ...]]:
    cycle_times = {cycle: at for cycle, at, _ in ctx.semantic.playbook_cycles()}
    per_entry: dict[str, list[RulePoint]] = defaultdict(list)
    for row in ctx.semantic.playbook_listings():
        per_entry[row.entry_id].append(RulePoint(row.cycle, row.recorded_at, row.confidence,
                                                 row.validated, row.contradicted))
    cycles = sorted(cycle_times.items())
    order = [c for c, _ in cycles]
    position = {c: i for i, c in enumerate(order)}
    entries = ctx.semantic.get_entries(per_entry)
    out = []
    for entry_id, points in per_entry.items():
        entry = entries.get(entry_id)
        idx = [position[p.cycle] for p in points]
        last = idx[-1]
        left = order[last + 1] if last + 1 < len(order) else None
        relisted = sum(1 for a, b in itertools.pairwise(idx) if b > a + 1)
        out.append(RuleHistory(
            entry_id=entry_id,
            category=entry.category.value if entry else "?",
            content=entry.content if entry else "(entry no longer stored)",
            status=entry.status.value if entry else "?",
            points=tuple(points), entered_cycle=points[0].cycle, left_cycle=left,
            relisted=relisted))
    out.sort(key=lambda r: (r.left_cycle is not None, r.entered_cycle, r.entry_id))
    return tuple(cycles), tuple(out)


def _episodes(ctx: Context) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    by_type: dict[int, Counter[str]] = defaultdict(Counter)
    outcomes: dict[int, Counter[str]] = defaultdict(Counter)
    for ep in ctx.episodes.scan():
        day = day_of(ep.timestamp)
        by_type[day][ep.type.value] += 1
        if ep.type is EpisodeType.ACTION and ep.outcome is not Outcome.DESCRIPTIVE:
            outcomes[day][ep.outcome.value] += 1
    return ({d: dict(c) for d, c in sorted(by_type.items())},
            {d: dict(c) for d, c in sorted(outcomes.items())})


def _retrievals(ctx: Context) -> tuple[RetrievalDay, ...]:
    per_day: dict[int, list[Any]] = defaultdict(list)
    for point in ctx.semantic.retrieval_series():
        per_day[day_of(point.created_at)].append(point)
    out = []
    for day, points in sorted(per_day.items()):
        lat = [p.latency_ms for p in points if p.latency_ms is not None]
        outcomes = Counter(p.outcome for p in points if p.outcome is not None)
        out.append(RetrievalDay(
            day=day, count=len(points),
            p50_ms=statistics.median(lat) if lat else None,
            p95_ms=_percentile(lat, 0.95) if lat else None,
            reported=sum(outcomes.values()), positive=outcomes["positive"],
            negative=outcomes["negative"], neutral=outcomes["neutral"]))
    return tuple(out)


def _lag_of(edge_lag: int | None, cause: Any, effect: Any) -> float | None:
    if edge_lag is not None:
        return float(edge_lag)
    if cause is not None and effect is not None:
        return float(effect.timestamp - cause.timestamp)
    return None


def _causal(ctx: Context, max_edges: int) -> CausalSummary:
    links = ctx.semantic.list_entries(_link_filter(), limit=None)
    rows = []
    for e in sorted(links, key=lambda e: (-e.confidence, e.id)):
        within = e.claim.condition.get("within_ms") if e.claim is not None else None
        rows.append((e.id, e.status.value, e.confidence, e.content,
                     int(within) if isinstance(within, int | float) else None))
    edges = ctx.semantic.list_edges(limit=max_edges)
    by_kind = Counter(edge.kind.value for edge in edges)
    edges = [edge for edge in edges if edge.kind in _EVENT_EDGE_KINDS]
    ids = {i for edge in edges if edge.lag_ms is None for i in (edge.cause_id, edge.effect_id)}
    episodes = {i: ctx.episodes.get(i) for i in sorted(ids)}
    lags: dict[str, list[float]] = defaultdict(list)
    for edge in edges:
        lag = _lag_of(edge.lag_ms, episodes.get(edge.cause_id), episodes.get(edge.effect_id))
        if lag is not None and lag >= 0:
            lags[edge.kind.value].append(lag)
    return CausalSummary(tuple(rows), dict(sorted(by_kind.items())),
                         {k: tuple(v) for k, v in sorted(lags.items())})


def _link_filter() -> EntryFilter:
    return EntryFilter(categories=(Category.CAUSAL_LINK,),
                       statuses=tuple(s for s in EntryStatus if s is not EntryStatus.QUARANTINED))


def collect(ctx: Context, *, now: int | None = None, max_edges: int = 20_000) -> ReportData:
    """Read everything the report shows from ``ctx``'s stores (nothing is written)."""
    cycles, rules = _rules(ctx)
    by_type, outcomes = _episodes(ctx)
    types = tuple(t.value for t in EpisodeType
                  if any(t.value in day for day in by_type.values()))
    counts = ctx.semantic.counts()
    graph = {k: int(v) for k, v in ctx.graph.stats().items()
             if k in ("triples", "open", "closed", "versions", "subjects")}
    return ReportData(
        data_dir=str(ctx.data_dir), generated_at=ctx.now() if now is None else now,
        cycles=cycles, rules=rules, episode_types=types, episodes_by_day=by_type,
        outcomes_by_day=outcomes, retrievals=_retrievals(ctx), graph=graph,
        causal=_causal(ctx, max_edges),
        candidates=tuple((e.id, e.category.value, e.confidence, e.validated_count,
                          e.contradicted_count, e.content) for e in ctx.semantic.list_entries(
                              EntryFilter(statuses=(EntryStatus.CANDIDATE,)),
                              limit=MAX_CANDIDATES)),
        counts={"episodes": ctx.episodes.count(), "entries": counts.total,
                "entries_by_status": dict(counts.by_status),
                "causal_edges": counts.causal_edges},
        simulated=ctx.simulated)


def still_listed(rules: Iterable[RuleHistory]) -> list[RuleHistory]:
    return [r for r in rules if r.left_cycle is None]
