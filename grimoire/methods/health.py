"""Health metrics of SPEC §12 (seed 004 "Cognitive Quality Metrics"), for ``status``.

Each metric is computed on demand from stored data (admission log, entries,
retrieval log, episodes) and returned with the seed's healthy band, its alarm
rule and a flag: ``healthy``, ``watch`` (outside the band, not yet an alarm),
``alarm``, or ``insufficient`` (too little data to judge). Counters kept in
memory by the learners (distillation runs, Reflexion verdicts) are shown as
``info``. ``register_health_metrics()`` puts them in ``status.HEALTH_METRICS``
(called by the facade at open; registering twice is harmless).

Left out, because Grimoire has no data for them: reflection consistency
(needs regenerated LLM reflections), DecisionCache hit rate, dream yield,
threat coverage. Read-only: must not write anything.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from grimoire.clock import MS_PER_DAY
from grimoire.context import Context
from grimoire.methods.status import HEALTH_METRICS
from grimoire.methods.status_cache import SCAN_LIMIT, action_rows
from grimoire.records import Category, EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["BANDS", "Band", "register_health_metrics"]

WEEK_MS = 7 * MS_PER_DAY
MIN_SAMPLES = 20  # fewer decisions / reports / predictions than this: "insufficient"
PREDICTION_TOLERANCE_BPS = 50.0  # seed 004: a prediction within 50 bps of the actual


@dataclass(frozen=True, slots=True)
class Band:
    """Healthy when low <= value <= high; alarm below ``alarm_low`` or above ``alarm_high``."""

    low: float | None
    high: float | None
    alarm_low: float | None
    alarm_high: float | None
    rule: str

    def flag(self, value: float | None, enough: bool = True) -> str:
        if value is None or not enough:
            return "insufficient"
        if (self.alarm_low is not None and value < self.alarm_low) or (
                self.alarm_high is not None and value > self.alarm_high):
            return "alarm"
        if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high):
            return "watch"
        return "healthy"

    def report(self, value: float | None, *, n: int, enough: bool = True,
               **detail: Any) -> dict[str, Any]:
        return {"value": None if value is None else round(value, 4), "n": n,
                "healthy": [self.low, self.high], "alarm": self.rule,
                "flag": self.flag(value, enough), **detail}


# The seed's table (SPEC §12): definitions of "healthy", not tunables.
BANDS = {
    "admission_rate": Band(0.40, 0.60, 0.20, 0.80, "< 20% or > 80%"),
    "average_quality": Band(0.50, 0.80, 0.40, None, "< 0.4 or declining"),
    "retrieval_hit_rate": Band(0.30, None, 0.10, None, "< 10%"),
    "heuristic_survival_rate": Band(0.40, 0.70, 0.20, 0.90, "< 20% or > 90%"),
    "prediction_accuracy": Band(0.90, None, 0.80, None, "< 80%"),
}


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def admission_rate(ctx: Context) -> dict[str, Any]:
    """Share of the last 7 days' gate decisions that admitted the candidate."""
    counts = ctx.semantic.admission_counts(since=ctx.now() - WEEK_MS)
    total = sum(counts.values())
    return BANDS["admission_rate"].report(
        _ratio(counts.get("admitted", 0), total), n=total, enough=total >= MIN_SAMPLES,
        decisions=dict(sorted(counts.items())), window_days=7)


def _recent_entries(ctx: Context, since: int) -> list[GrimoireEntry]:
    """Entries (any status but quarantined) created at or after ``since``, newest first."""
    statuses = tuple(s for s in EntryStatus if s is not EntryStatus.QUARANTINED)
    out: list[GrimoireEntry] = []
    page, offset = 500, 0
    while True:
        rows = ctx.semantic.list_entries(EntryFilter(statuses=statuses), order="created_at",
                                         limit=page, offset=offset)
        out.extend(e for e in rows if e.created_at >= since)
        if len(rows) < page or rows[-1].created_at < since:
            return out
        offset += page


def average_quality(ctx: Context) -> dict[str, Any]:
    """Mean quality score of the entries admitted in the last 7 days (and the 7 before)."""
    now = ctx.now()
    entries = _recent_entries(ctx, now - 2 * WEEK_MS)
    week = [e.quality_score for e in entries if e.created_at >= now - WEEK_MS]
    before = [e.quality_score for e in entries if e.created_at < now - WEEK_MS]
    value = sum(week) / len(week) if week else None
    previous = sum(before) / len(before) if before else None
    report = BANDS["average_quality"].report(value, n=len(week), previous_7d=previous)
    declining = value is not None and previous is not None and value < previous - 0.1
    if declining and report["flag"] in ("healthy", "watch"):
        report["flag"] = "alarm"
    report["declining"] = declining
    return report


def grimoire_size(ctx: Context) -> dict[str, Any]:
    """Active entries, and whether creation is slowing (plateau) or accelerating (alarm)."""
    counts = ctx.semantic.counts()
    now = ctx.now()
    entries = _recent_entries(ctx, now - 2 * WEEK_MS)
    week = sum(e.created_at >= now - WEEK_MS for e in entries)
    before = len(entries) - week
    # "Unbounded growth": this week's additions well above last week's (not a plateau).
    accelerating = week > 1.5 * before
    flag = "insufficient" if before < MIN_SAMPLES else "alarm" if accelerating else "healthy"
    return {"value": counts.by_status.get(EntryStatus.ACTIVE.value, 0), "n": counts.total,
            "healthy": "slow growth, plateau", "alarm": "unbounded growth", "flag": flag,
            "created_7d": week, "created_previous_7d": before,
            "by_status": dict(counts.by_status)}


def retrieval_hit_rate(ctx: Context) -> dict[str, Any]:
    """Share of the last 7 days' reported retrievals whose outcome was positive."""
    counts = ctx.semantic.retrieval_counts(since=ctx.now() - WEEK_MS)
    reported = counts.get("reported", 0)
    return BANDS["retrieval_hit_rate"].report(
        _ratio(counts.get("positive", 0), reported), n=reported,
        enough=reported >= MIN_SAMPLES, retrievals=counts.get("total", 0), window_days=7)


def heuristic_survival_rate(ctx: Context) -> dict[str, Any]:
    """Heuristics still active among every heuristic ever admitted (quarantined ones excluded)."""
    counts = ctx.semantic.counts().by_category_status.get(Category.HEURISTIC.value, {})
    total = sum(n for status, n in counts.items() if status != EntryStatus.QUARANTINED.value)
    active = counts.get(EntryStatus.ACTIVE.value, 0)
    return BANDS["heuristic_survival_rate"].report(
        _ratio(active, total), n=total, enough=total >= 5, by_status=dict(counts))


def prediction_accuracy(ctx: Context) -> dict[str, Any]:
    """Share of recent actions whose realised return came within 50 bps of the prediction.

    The deviations are Reflexion's (published by the curator as ``prediction_deviations``);
    without the curator installed there are none to count."""
    deviations = ctx.stats.get("prediction_deviations")
    devs: list[float] = []
    if deviations is not None:
        rows = action_rows(ctx, ctx.now() - WEEK_MS, SCAN_LIMIT)
        devs = [dev for _t, _gain, dev in rows if dev is not None]
    within = sum(abs(d) <= PREDICTION_TOLERANCE_BPS for d in devs)
    return BANDS["prediction_accuracy"].report(
        _ratio(within, len(devs)), n=len(devs), enough=len(devs) >= MIN_SAMPLES,
        tolerance_bps=PREDICTION_TOLERANCE_BPS, window_days=7)


def pnl_trend(ctx: Context) -> dict[str, Any]:
    """Daily P&L of the last 30 days; alarm when the last 14 days, all observed, lost money."""
    now = ctx.now()
    episodes = action_rows(ctx, now - 30 * MS_PER_DAY, SCAN_LIMIT)
    daily: dict[int, float] = {}
    for timestamp, gain, _dev in episodes:
        if gain is not None:
            day = (now - timestamp) // MS_PER_DAY
            daily[day] = daily.get(day, 0.0) + gain
    span = (now - min(t for t, _g, _d in episodes)) / MS_PER_DAY if episodes else 0.0
    last14 = sum(v for d, v in daily.items() if d < 14)
    enough = span >= 14
    flag = "insufficient" if not enough else ("alarm" if last14 < 0 else "healthy")
    return {"value": round(sum(daily.values()), 2), "n": len(episodes),
            "healthy": "improving or stable", "alarm": "declining 14+ days", "flag": flag,
            "pnl_7d": round(sum(v for d, v in daily.items() if d < 7), 2),
            "pnl_14d": round(last14, 2), "days_observed": round(span, 2)}


def learning(ctx: Context) -> dict[str, Any]:
    """Distillation runs since open: count, mean and max milliseconds, the last per strategy
    (the curator's ``learning`` read-out)."""
    source = ctx.stats.get("learning")
    stats: dict[str, Any] = dict(source()) if source is not None else {}
    runs = int(stats.get("runs", 0))
    return {"flag": "info", "runs": runs,
            "mean_ms": round(stats["total_ms"] / runs, 2) if runs else None,
            "max_ms": round(stats.get("max_ms", 0.0), 2) if runs else None,
            "last": {k or "global": {"episodes": v.get("episodes"), "ms": v.get("ms"),
                                     "ops": v.get("ops")}
                     for k, v in sorted(stats.get("last", {}).items())}}


def reflexion(ctx: Context) -> dict[str, Any]:
    """Reflexion verdicts and safety incidents since open (the curator's ``reflexion``
    read-out)."""
    source = ctx.stats.get("reflexion")
    stats = source() if source is not None else {}
    return {"flag": "info", "episodes": stats.get("episodes", 0),
            "incidents": stats.get("incidents", 0),
            "verdicts": dict(stats.get("verdicts", {}))}


METRICS: dict[str, Callable[[Context], Any]] = {
    "admission_rate": admission_rate,
    "average_quality": average_quality,
    "grimoire_size": grimoire_size,
    "retrieval_hit_rate": retrieval_hit_rate,
    "heuristic_survival_rate": heuristic_survival_rate,
    "prediction_accuracy": prediction_accuracy,
    "pnl_trend": pnl_trend,
    "learning": learning,
    "reflexion": reflexion,
}


def register_health_metrics(
    registry: MutableMapping[str, Callable[[Context], Any]] = HEALTH_METRICS,
) -> None:
    """Add these metrics to ``status``'s registry (idempotent)."""
    registry.update(METRICS)
