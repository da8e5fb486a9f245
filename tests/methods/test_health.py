"""Health metrics (SPEC §12): computed from stored data, each with its band and flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.methods.health import BANDS, METRICS, Band, register_health_metrics
from grimoire.methods.status import HEALTH_METRICS
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance
from tests.learn.learn_support import T0, open_grimoire

NOW = T0 + 30 * MS_PER_DAY
FACTORS = {"future_utility": 0.5, "factual_confidence": 0.5, "semantic_novelty": 0.5,
           "temporal_recency": 0.5, "content_type_prior": 0.5}


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[Grimoire]:
    grimoire = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder)
    yield grimoire
    grimoire.close()


def health(g: Grimoire, name: str) -> dict[str, Any]:
    metric: dict[str, Any] = g.status()["health"][name]
    return metric


def decisions(g: Grimoire, **counts: int) -> None:
    def write() -> None:
        with g.context.semantic.transaction():
            for decision, n in counts.items():
                for i in range(n):
                    g.context.semantic.log_admission(
                        decision=decision, factors=FACTORS, composite=0.5,
                        candidate=f"{decision} {i}", now=NOW - MS_PER_DAY)

    g.context.writer.call(write)


def entry(i: int, *, category: Category = Category.INSIGHT, quality: float = 0.6,
          created: int = NOW - MS_PER_DAY, status: EntryStatus = EntryStatus.ACTIVE
          ) -> GrimoireEntry:
    return GrimoireEntry(id=f"e{i:04d}", category=category, content=f"entry {i}",
                         confidence=0.6, quality_score=quality,
                         decay_class=DecayClass.TACTICAL, provenance=Provenance.SELF_LEARNED,
                         created_at=created, last_accessed_at=created, status=status)


def insert(g: Grimoire, items: list[GrimoireEntry]) -> None:
    vectors = g.context.embedder.embed([e.content for e in items])

    def write() -> None:
        with g.context.semantic.transaction():
            for e, v in zip(items, vectors, strict=True):
                g.context.semantic.insert_entry(e, v)

    g.context.writer.call(write)


def test_every_metric_is_registered_and_reported_on_an_empty_store(g: Grimoire) -> None:
    report = g.status()["health"]
    assert set(METRICS) <= set(report) and set(METRICS) <= set(HEALTH_METRICS)
    for name in ("admission_rate", "average_quality", "retrieval_hit_rate",
                 "heuristic_survival_rate", "prediction_accuracy", "grimoire_size",
                 "pnl_trend"):
        assert report[name]["flag"] == "insufficient", name
    registry: dict[str, Any] = {}
    register_health_metrics(registry)
    register_health_metrics(registry)
    assert registry == METRICS


@pytest.mark.parametrize(("admitted", "rejected", "value", "flag"), [
    (12, 8, 0.6, "healthy"), (3, 17, 0.15, "alarm"), (14, 6, 0.7, "watch"),
    (17, 3, 0.85, "alarm"), (5, 5, 0.5, "insufficient"),
])
def test_admission_rate(g: Grimoire, admitted: int, rejected: int, value: float,
                        flag: str) -> None:
    decisions(g, admitted=admitted, rejected=rejected)
    metric = health(g, "admission_rate")
    assert metric["value"] == pytest.approx(value) and metric["flag"] == flag
    assert metric["n"] == admitted + rejected and metric["healthy"] == [0.4, 0.6]


def test_old_decisions_leave_the_admission_window(g: Grimoire) -> None:
    decisions(g, admitted=25)
    g.context.clock.set(NOW + 8 * MS_PER_DAY)  # type: ignore[attr-defined]
    assert health(g, "admission_rate")["flag"] == "insufficient"


def test_average_quality_and_its_decline(g: Grimoire) -> None:
    insert(g, [entry(i, quality=0.6 + 0.02 * (i % 3)) for i in range(9)])
    metric = health(g, "average_quality")
    assert metric["value"] == pytest.approx(0.62) and metric["flag"] == "healthy"
    insert(g, [entry(100 + i, quality=0.85, created=NOW - 10 * MS_PER_DAY) for i in range(5)])
    declined = health(g, "average_quality")
    assert declined["previous_7d"] == pytest.approx(0.85) and declined["declining"]
    assert declined["flag"] == "alarm"


def test_grimoire_size_flags_accelerating_growth(g: Grimoire) -> None:
    insert(g, [entry(i, created=NOW - 10 * MS_PER_DAY) for i in range(20)])
    insert(g, [entry(100 + i) for i in range(25)])
    metric = health(g, "grimoire_size")
    assert metric["value"] == 45 and metric["created_7d"] == 25
    assert metric["flag"] == "healthy"
    insert(g, [entry(200 + i) for i in range(10)])
    assert health(g, "grimoire_size")["flag"] == "alarm"


def test_retrieval_hit_rate(g: Grimoire) -> None:
    def write() -> None:
        for i in range(25):
            g.context.semantic.log_retrieval(f"r{i}", query="gas", mode="deciding",
                                             items=[{"id": "e1"}], now=NOW - 1000)
            g.context.semantic.set_retrieval_outcome(
                f"r{i}", "positive" if i < 10 else "negative", now=NOW - 500)
        g.context.semantic.log_retrieval("r-open", query="gas", mode="deciding", items=[],
                                         now=NOW - 1000)

    g.context.writer.call(write)
    metric = health(g, "retrieval_hit_rate")
    assert metric["value"] == pytest.approx(0.4) and metric["n"] == 25
    assert metric["retrievals"] == 26 and metric["flag"] == "healthy"


def test_heuristic_survival_rate(g: Grimoire) -> None:
    statuses = [EntryStatus.ACTIVE] * 3 + [EntryStatus.DEMOTED] * 2 + \
        [EntryStatus.ARCHIVED] * 5 + [EntryStatus.QUARANTINED] * 4
    insert(g, [entry(i, category=Category.HEURISTIC, status=s) for i, s in enumerate(statuses)])
    insert(g, [entry(50, category=Category.INSIGHT)])
    metric = health(g, "heuristic_survival_rate")
    assert metric["value"] == pytest.approx(0.3) and metric["n"] == 10
    assert metric["flag"] == "watch"


def actions(g: Grimoire, deviations: list[float], *, gains: list[float] | None = None,
            days: float = 1.0) -> None:
    span = days * MS_PER_DAY
    params = [{"type": "action", "text": f"swap {i}", "actions": ["swap"], "outcome": "positive",
               "timestamp": int(NOW - span + i * span / len(deviations)),
               "gain": (gains or [1.0] * len(deviations))[i],
               "metrics": {"return_bps": 20.0 + d}, "prediction": {"expected_return_bps": 20.0}}
              for i, d in enumerate(deviations)]
    g.episode_write_batch(params)


def test_prediction_accuracy_within_50_bps(g: Grimoire) -> None:
    actions(g, [10.0] * 17 + [-80.0] * 3)
    metric = health(g, "prediction_accuracy")
    assert metric["value"] == pytest.approx(0.85) and metric["flag"] == "watch"
    assert metric["n"] == 20


def test_pnl_trend_alarms_after_two_losing_weeks(g: Grimoire) -> None:
    gains = [5.0] * 10 + [-2.0] * 20
    actions(g, [0.0] * 30, gains=gains, days=20.0)
    metric = health(g, "pnl_trend")
    assert metric["value"] == pytest.approx(10.0) and metric["days_observed"] >= 14
    assert metric["pnl_14d"] < 0 and metric["flag"] == "alarm"


def test_learning_and_reflexion_counters_are_shown(g: Grimoire) -> None:
    from curator.learn.hook import distill

    distill(g.context, None, NOW)
    actions(g, [0.0])
    report = g.status()["health"]
    assert report["learning"]["runs"] == 1 and report["learning"]["flag"] == "info"
    assert report["reflexion"]["episodes"] == 1


@given(st.floats(0.0, 1.0), st.sampled_from(sorted(BANDS)))
def test_a_band_flags_consistently(value: float, name: str) -> None:
    """Property: inside the band is healthy, past an alarm bound is alarm, else watch."""
    band: Band = BANDS[name]
    flag = band.flag(value)
    inside = (band.low is None or value >= band.low) and (band.high is None or value <= band.high)
    alarm = (band.alarm_low is not None and value < band.alarm_low) or (
        band.alarm_high is not None and value > band.alarm_high)
    assert flag == ("alarm" if alarm else "healthy" if inside else "watch")
    assert band.flag(value, enough=False) == "insufficient" == band.flag(None)
