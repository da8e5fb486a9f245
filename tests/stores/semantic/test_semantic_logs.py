"""Quarantine, admission / retrieval / curator logs, episode state and meta."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from grimoire.errors import NotFoundError, ValidationError
from grimoire.records import EntryStatus
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.semantic.types import EntryFilter, EpisodeState
from tests.stores.semantic.test_semantic_support import clock, dump, make_entry, rng, store, unit

__all__ = ["clock", "rng", "store"]  # fixtures

FACTORS = {"future_utility": 0.6, "factual_confidence": 0.5, "semantic_novelty": 0.7,
           "temporal_recency": 0.9, "content_type_prior": 0.5}


def test_quarantine_release_and_reject(store: SemanticStore, rng: np.random.Generator,
                                       clock: Any) -> None:
    trusted = make_entry(confidence=0.9)
    store.insert_entry(trusted, unit(rng))
    suspect, other = make_entry(), make_entry()
    v = unit(rng)
    held = store.quarantine(suspect, v, reason="contradicts a 0.9 entry",
                            conflicting_id=trusted.id, now=500)
    store.quarantine(other, unit(rng), reason="contradiction", now=600)
    assert held.status is EntryStatus.QUARANTINED
    assert store.get_entry(suspect.id) == held  # readable by id
    assert suspect.id not in {e.id for e, _ in store.knn(v, 5)}  # not served
    assert [e.id for e in store.list_entries()] == [trusted.id]
    pending = store.list_quarantine()
    assert [(r.entry.id, r.reason, r.conflicting_id, r.quarantined_at) for r in pending] == [
        (suspect.id, "contradicts a 0.9 entry", trusted.id, 500),
        (other.id, "contradiction", None, 600)]
    assert store.counts().quarantine_pending == 2

    released = store.release_quarantine(suspect.id, now=700)
    assert released.status is EntryStatus.CANDIDATE and released.updated_at == 700
    assert store.knn(v, 1, EntryFilter(statuses=(EntryStatus.CANDIDATE,)))[0][0] == released
    rejected = store.reject_quarantine(other.id, now=800)
    assert rejected.status is EntryStatus.ARCHIVED
    assert store.list_quarantine() == []
    record = store.get_quarantine(other.id)
    assert record is not None and (record.resolution, record.resolved_at) == ("rejected", 800)
    with pytest.raises(NotFoundError):
        store.release_quarantine(other.id)  # already resolved
    with pytest.raises(NotFoundError):
        store.reject_quarantine(trusted.id)  # never quarantined
    assert len(store.list_quarantine(pending_only=False)) == 2


def test_quarantine_validation(store: SemanticStore, rng: np.random.Generator) -> None:
    before = dump(store._db.path)
    with pytest.raises(ValidationError, match="reason"):
        store.quarantine(make_entry(), unit(rng), reason=" ")
    with pytest.raises(ValidationError, match="embedding"):
        store.quarantine(make_entry(), None, reason="x")
    with pytest.raises(ValidationError, match="status"):
        store.release_quarantine("x", status=EntryStatus.ARCHIVED)
    assert dump(store._db.path) == before


def test_an_existing_entry_can_be_moved_into_quarantine(store: SemanticStore,
                                                        rng: np.random.Generator) -> None:
    entry = make_entry()
    store.insert_entry(entry, unit(rng))
    store.quarantine(entry, reason="new evidence contradicts it", now=9)
    assert store.get_entry(entry.id).status is EntryStatus.QUARANTINED  # type: ignore[union-attr]
    assert [r.entry.id for r in store.list_quarantine()] == [entry.id]


def test_admission_log_and_counts(store: SemanticStore) -> None:
    first = store.log_admission(decision="admitted", factors=FACTORS, composite=0.62,
                                candidate="gas is cheap at night", category="insight",
                                entry_id="e-1", now=10)
    store.log_admission(decision="rejected", factors=FACTORS, composite=0.3, candidate="meh",
                        now=20)
    store.log_admission(decision="admitted", factors=FACTORS, composite=0.7, candidate="x",
                        now=30)
    records = store.list_admissions()
    assert [r.id for r in records][-1] == first
    assert records[-1].factors == FACTORS and records[-1].entry_id == "e-1"
    assert store.admission_counts() == {"admitted": 2, "rejected": 1}
    assert store.admission_counts(since=15) == {"admitted": 1, "rejected": 1}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"decision": "maybe"}, "decision"),
    ({"factors": {**FACTORS, "vibes": 1.0}}, "factors"),
    ({"factors": {k: v for k, v in FACTORS.items() if k != "future_utility"}}, "factors"),
    ({"factors": {**FACTORS, "future_utility": math.nan}}, "factors.future_utility"),
    ({"composite": 1.2}, "composite"),
    ({"candidate": ""}, "candidate"),
])
def test_bad_admission_records_are_refused(store: SemanticStore, kwargs: dict[str, Any],
                                           field: str) -> None:
    args: dict[str, Any] = {"decision": "admitted", "factors": FACTORS, "composite": 0.5,
                            "candidate": "text", **kwargs}
    with pytest.raises(ValidationError) as info:
        store.log_admission(**args)
    assert info.value.field == field
    assert store.list_admissions() == []


def test_retrieval_log_and_one_outcome_per_retrieval(store: SemanticStore) -> None:
    items = [{"id": "e-1", "kind": "entry", "factors": {"rrf": 0.5, "confidence": 0.7}},
             {"id": "ep-2", "kind": "episode", "factors": {"rrf": 0.3}}]
    store.log_retrieval("r-1", query="gas cheap?", mode="deciding", items=items, now=5)
    record = store.get_retrieval("r-1")
    assert record is not None and list(record.items) == items and record.outcome is None
    done = store.set_retrieval_outcome("r-1", "positive", detail={"pnl": 12.5,
                                                                   "followed_ids": ["e-1"]},
                                       now=9)
    assert (done.outcome, done.outcome_detail, done.outcome_at) == (
        "positive", {"pnl": 12.5, "followed_ids": ["e-1"]}, 9)
    with pytest.raises(ValidationError, match="already"):
        store.set_retrieval_outcome("r-1", "negative")
    with pytest.raises(NotFoundError):
        store.set_retrieval_outcome("r-404", "positive")
    with pytest.raises(ValidationError, match="already logged"):
        store.log_retrieval("r-1", query="again", mode="browse", items=[])
    with pytest.raises(ValidationError, match="items"):
        store.log_retrieval("r-2", query="q", mode="browse", items=[{"kind": "entry"}])
    with pytest.raises(ValidationError, match="items"):
        store.log_retrieval("r-2", query="q", mode="browse",
                            items=[{"id": "x", "score": math.inf}])
    with pytest.raises(ValidationError, match="mode"):
        store.log_retrieval("r-2", query="q", mode="sometimes", items=[])
    store.log_retrieval("r-3", query="q", mode="browse", items=[], now=6)
    assert store.retrieval_counts() == {"total": 2, "reported": 1, "positive": 1,
                                        "negative": 0, "neutral": 0}
    assert store.get_retrieval("r-2") is None


def test_prune_logs_keeps_recent_rows_and_curator_deltas(store: SemanticStore) -> None:
    store.log_admission(decision="admitted", factors=FACTORS, composite=0.6, candidate="a",
                        now=10)
    store.log_admission(decision="admitted", factors=FACTORS, composite=0.6, candidate="b",
                        now=100)
    store.log_retrieval("old", query="q", mode="browse", items=[], now=10)
    store.add_curator_delta(cycle=1, op="PROMOTE", entry_id="e", now=10)
    assert store.prune_logs(before=50) == {"admission_log": 1, "retrieval_log": 1}
    assert [r.candidate for r in store.list_admissions()] == ["b"]
    assert len(store.list_curator_deltas()) == 1


def test_curator_deltas(store: SemanticStore) -> None:
    store.add_curator_delta(cycle=3, op="UPVOTE", entry_id="e-1", before={"confidence": 0.5},
                            after={"confidence": 0.6}, now=1)
    store.add_curator_delta(cycle=3, op="ADD", entry_id="e-2", after={"content": "x"}, now=2)
    store.add_curator_delta(cycle=4, op="DEMOTE", entry_id="e-1", now=3)
    assert [d.op for d in store.list_curator_deltas(entry_id="e-1")] == ["UPVOTE", "DEMOTE"]
    assert [d.entry_id for d in store.list_curator_deltas(cycle=3)] == ["e-1", "e-2"]
    first = store.list_curator_deltas()[0]
    assert (first.before, first.after) == ({"confidence": 0.5}, {"confidence": 0.6})
    with pytest.raises(ValidationError, match="cycle"):
        store.add_curator_delta(cycle=-1, op="X")
    with pytest.raises(ValidationError, match="after"):
        store.add_curator_delta(cycle=1, op="X", after={"v": math.nan})
    assert len(store.list_curator_deltas()) == 3


def test_episode_state(store: SemanticStore, clock: Any) -> None:
    assert store.get_episode_state("ep-1") == EpisodeState("ep-1")
    store.mark_consolidated(["ep-1", "ep-2", "ep-1"])
    store.touch_episodes(["ep-2", "ep-3"], now=50)
    store.touch_episodes(["ep-2"], now=60)
    states = store.episode_states(["ep-1", "ep-2", "ep-3", "ep-4"])
    assert states["ep-1"] == EpisodeState("ep-1", consolidated=True)
    assert states["ep-2"] == EpisodeState("ep-2", True, 2, 60)
    assert states["ep-3"] == EpisodeState("ep-3", False, 1, 50)
    assert states["ep-4"] == EpisodeState("ep-4")
    store.set_episode_state(EpisodeState("ep-4", replayed_at=70))
    assert store.get_episode_state("ep-4").replayed_at == 70
    with pytest.raises(ValidationError, match="episode_ids"):
        store.mark_consolidated("ep-1")
    with pytest.raises(ValidationError, match="access_count"):
        store.set_episode_state(EpisodeState("ep-5", access_count=-1))


def test_meta_is_json_and_embedding_key_is_reserved(store: SemanticStore) -> None:
    assert store.get_meta("tick") is None
    assert store.get_meta("tick", 0) == 0
    store.set_meta("tick", 41)
    store.set_meta("tick", 42)
    store.set_meta("weights", {"rrf": 0.3, "confidence": 0.25})
    assert store.get_meta("tick") == 42
    assert store.get_meta("weights") == {"rrf": 0.3, "confidence": 0.25}
    with pytest.raises(ValidationError, match="embedding"):
        store.set_meta("embedding", {"model_id": "x", "dim": 1})
    with pytest.raises(ValidationError, match=r"meta\.bad"):
        store.set_meta("bad", math.nan)
    assert store.get_meta("embedding") == {"model_id": "test-model", "dim": 32}
