"""``outcome.report``: strength, evidence for entries without a claim, region quality,
outcome edges and learned weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from curator.hierarchy.regions import RegionModel
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import NotFoundError, ValidationError
from grimoire.gate.decay import evidence_confidence
from grimoire.records import Category, Claim, DecayClass, GrimoireEntry, Regime
from grimoire.stores.semantic.types import EdgeKind
from tests.retrieval.retrieve_support import DAY, entry, ids, open_grimoire, put_entry, settle

QUERY = "gas high wait swapping"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_grimoire(tmp_path / "data", clock) as grimoire:
        yield grimoire


def _confidence(g: Grimoire, e: GrimoireEntry, confirmed: int, contradicted: int) -> float:
    return evidence_confidence(e.provenance, confirmed, contradicted, g.context.config.decay)


def _three(g: Grimoire, clock: FrozenClock, **fields: object) -> list[str]:
    made = [put_entry(g, f"when gas is high wait before swapping {word}",
                      category=Category.HEURISTIC, decay_class=DecayClass.REGIME_CONDITIONAL,
                      confidence=0.6, **fields).id for word in ("alpha", "bravo", "charlie")]
    clock.advance(5 * DAY)
    return made


def test_positive_reinforces_followed_entries_and_links_them(
        g: Grimoire, clock: FrozenClock) -> None:
    made = _three(g, clock)
    result = g.retrieve(query=QUERY, kinds=["entry"])
    used, ignored = made[1], [made[0], made[2]]
    report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive",
                              pnl=12.5, followed_ids=[used])
    assert report["updated"] == 1 and report["edges"] == {"caused_success": 1, "irrelevant": 2}
    after = entry(g, used)
    assert after.strength == 2.0 and after.validated_count == 1
    assert after.last_accessed_at == clock.now  # the decay clock restarts
    # a decision is evidence for an entry without a claim: its confidence is what ✓1 gives
    assert after.confidence == _confidence(g, after, 1, 0)
    for other in ignored:
        assert entry(g, other).strength == 1.0
    semantic = g.context.semantic
    edge = semantic.get_edge(used, result["retrieval_id"], EdgeKind.CAUSED_SUCCESS)
    assert edge is not None and "pnl +12.5" in (edge.relationship or "")
    assert semantic.get_edge(ignored[0], result["retrieval_id"], EdgeKind.IRRELEVANT)
    record = semantic.get_retrieval(result["retrieval_id"])
    assert record is not None and record.outcome == "positive"
    assert record.outcome_detail is not None and record.outcome_detail["pnl"] == 12.5


def test_negative_counts_against_the_followed_entry_only(
        g: Grimoire, clock: FrozenClock) -> None:
    """The failure is ✗1 for the entry followed: its confidence is what ✗1 gives (SPEC §13),
    not a DOWNVOTE and a region factor on top of whatever it stood at."""
    made = _three(g, clock)
    result = g.retrieve(query=QUERY, kinds=["entry"])
    g.outcome_report(retrieval_id=result["retrieval_id"], outcome="negative",
                     followed_ids=[made[0]])
    hit = entry(g, made[0])
    assert hit.contradicted_count == 1
    assert hit.confidence == _confidence(g, hit, 0, 1)
    assert hit.strength == 1.0
    assert entry(g, made[1]).confidence == 0.6  # not followed: not responsible
    assert g.context.semantic.get_edge(made[0], result["retrieval_id"],
                                       EdgeKind.CAUSED_FAILURE) is not None


def test_a_negative_report_that_names_nothing_followed_blames_nothing(
        g: Grimoire, clock: FrozenClock) -> None:
    """Issue 27: without followed_ids a failure counted against every item returned, those
    the agent ignored too. Nobody is blamed now; the retrieval keeps its outcome."""
    made = _three(g, clock)
    result = g.retrieve(query=QUERY, kinds=["entry"], mode="deciding")
    report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="negative")
    assert report["attributed"] is False and report["followed_ids"] == []
    assert report["updated"] == 0 and report["edges"] == {}
    for entry_id in made:
        assert entry(g, entry_id).contradicted_count == 0
        assert entry(g, entry_id).confidence == 0.6
    record = g.context.semantic.get_retrieval(result["retrieval_id"])
    assert record is not None and record.outcome == "negative"


def test_region_quality_comes_from_the_curators_model(g: Grimoire, clock: FrozenClock) -> None:
    """The report names the failed entry's region quality (how likely the failure was its
    fault: near 1 where actions usually succeed); its confidence is its evidence's."""
    made = _three(g, clock)
    vectors = g.context.semantic.entry_vectors(made)
    model = RegionModel(1)
    model.fit(np.array([vectors[i] for i in made]))
    for _ in range(8):
        model.record_transition(0, "swap", 0, reward=1.0, success=True)
    g.context.writer.call(lambda: g.context.semantic.set_meta("regions", model.to_dict()))
    quality = model.region_quality(0)
    result = g.retrieve(query=QUERY, kinds=["entry"])
    report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="negative",
                              followed_ids=[made[2]])
    assert report["entries"][0]["region_quality"] == pytest.approx(quality)
    failed = entry(g, made[2])
    assert failed.contradicted_count == 1 and failed.confidence == _confidence(g, failed, 0, 1)


def test_failure_in_another_regime_is_no_evidence(g: Grimoire, clock: FrozenClock) -> None:
    made = _three(g, clock, market_regime=Regime.BULL)
    result = g.retrieve(query=QUERY, kinds=["entry"], regime="bear")
    report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="negative",
                              followed_ids=[made[0]])
    assert report["updated"] == 0
    assert entry(g, made[0]).confidence == 0.6 and entry(g, made[0]).contradicted_count == 0


def test_neutral_changes_no_entry(g: Grimoire, clock: FrozenClock) -> None:
    made = _three(g, clock)
    result = g.retrieve(query=QUERY, kinds=["entry"])
    report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="neutral")
    assert report["updated"] == 0 and report["edges"] == {}
    assert all(entry(g, i).strength == 1.0 for i in made)


def test_weights_learn_and_persist(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "data"
    with open_grimoire(path, clock) as g:
        made = _three(g, clock)
        put_entry(g, "when gas is high wait before swapping fresh")  # recency 1, others old
        result = g.retrieve(query=QUERY, kinds=["entry"])
        fresh = next(i for i in ids(result) if i not in made)
        before = dict(result["trace"]["weights"])
        report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive",
                                  followed_ids=[fresh])
        learned = report["weights"]
        assert learned["recency"] > before["recency"]
        assert sum(learned.values()) == pytest.approx(1.0)
        assert g.retrieve(query=QUERY)["trace"]["weights"] == learned
    with open_grimoire(path, clock) as reopened:
        assert reopened.context.semantic.get_meta("rerank_weights")["weights"] == learned
        assert reopened.retrieve(query=QUERY)["trace"]["weights"] == learned


def test_frozen_weights_do_not_learn(tmp_path: Path, clock: FrozenClock) -> None:
    with open_grimoire(tmp_path / "d", clock, **{"retrieval.learn_weights": False}) as g:
        _three(g, clock)
        result = g.retrieve(query=QUERY, kinds=["entry"])
        report = g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive")
        assert report["weights"] == result["trace"]["weights"]
        assert g.context.semantic.get_meta("rerank_weights") is None


def test_unknown_twice_browse_and_strangers_are_refused(g: Grimoire, clock: FrozenClock) -> None:
    made = _three(g, clock)
    with pytest.raises(NotFoundError, match="retrieval_id"):
        g.outcome_report(retrieval_id="nope", outcome="positive")
    browse = g.retrieve(query=QUERY, mode="browse")
    with pytest.raises(ValidationError) as info:
        g.outcome_report(retrieval_id=browse["retrieval_id"], outcome="positive")
    assert info.value.field == "retrieval_id"
    result = g.retrieve(query=QUERY, kinds=["entry"])
    with pytest.raises(ValidationError) as info:
        g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive",
                         followed_ids=["not-returned"])
    assert info.value.field == "followed_ids"
    assert entry(g, made[0]).strength == 1.0  # the refused report changed nothing
    g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive")
    strength = entry(g, made[0]).strength
    with pytest.raises(ValidationError, match="already reported"):
        g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive")
    assert entry(g, made[0]).strength == strength  # not counted twice


@pytest.mark.parametrize(("params", "field"), [
    ({"outcome": "positive"}, "retrieval_id"),
    ({"retrieval_id": "r", "outcome": "great"}, "outcome"),
    ({"retrieval_id": "r", "outcome": "positive", "pnl": float("nan")}, "pnl"),
    ({"retrieval_id": "r", "outcome": "positive", "followed_ids": "abc"}, "followed_ids"),
    ({"retrieval_id": "r", "outcome": "positive", "extra": 1}, "params"),
])
def test_bad_params_name_the_field(g: Grimoire, params: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        g.outcome_report(**params)
    assert info.value.field == field


def test_report_right_after_retrieve_finds_the_log(g: Grimoire, clock: FrozenClock) -> None:
    """The log write is asynchronous; a report waits for it instead of missing it."""
    _three(g, clock)
    for _ in range(5):
        result = g.retrieve(query=QUERY, kinds=["entry"])
        g.outcome_report(retrieval_id=result["retrieval_id"], outcome="neutral")
    settle(g)
    assert g.context.semantic.retrieval_counts()["reported"] == 5


def test_a_decision_is_counted_once_in_the_ledger_and_never_for_a_claim(
        g: Grimoire, clock: FrozenClock) -> None:
    """Every ✓ is a ledger row (issue 11): a reported decision confirms an entry without a
    claim once, recorded as that decision; an entry with a claim is confirmed only by the
    episodes the curator judges it on, so the decision moves its strength, not its ✓ (nor
    its confidence)."""
    made = _three(g, clock)
    semantic = g.context.semantic
    claim = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 6.0, 24.0, 40)
    current = entry(g, made[2])
    g.context.writer.call(lambda: semantic.update_entry(
        dataclasses.replace(current, claim=claim)))
    result = g.retrieve(query=QUERY, kinds=["entry"])
    g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive",
                     followed_ids=[made[0], made[2]])
    plain, claimed = entry(g, made[0]), entry(g, made[2])
    assert plain.validated_count == 1
    assert semantic.list_evidence(made[0])[0][:2] == (
        f"retrieval:{result['retrieval_id']}", "confirm")
    assert semantic.count_evidence(made[0]) == (1, 0)
    assert claimed.strength == 2.0 and claimed.validated_count == 0
    assert semantic.count_evidence(made[2]) == (0, 0)
    clock.advance(DAY)
    again = g.retrieve(query=QUERY, kinds=["entry"])
    g.outcome_report(retrieval_id=again["retrieval_id"], outcome="negative",
                     followed_ids=[made[0], made[2]])
    assert entry(g, made[0]).contradicted_count == 1
    assert semantic.count_evidence(made[0]) == (1, 1)
    assert entry(g, made[2]).contradicted_count == 0
    # nor does a failure move its confidence: no ✗ stands behind such a move
    assert entry(g, made[2]).confidence == claimed.confidence


def test_explain_lists_reported_decisions_apart_from_episodes(
        g: Grimoire, clock: FrozenClock) -> None:
    """A decision counted in the ledger is named as a decision by explain, never as an
    episode: the owner can check each ✓ against what it was."""
    made = _three(g, clock)
    result = g.retrieve(query=QUERY, kinds=["entry"])
    g.outcome_report(retrieval_id=result["retrieval_id"], outcome="positive",
                     followed_ids=[made[0]])
    why = g.entry_explain(id=made[0])
    assert why["evidence"]["confirming"] == []
    assert why["evidence"]["confirming_decisions"] == [result["retrieval_id"]]
    assert why["evidence"]["contradicting_decisions"] == []
    assert "Confirming episodes counted (0): none; reported decisions (1): " in why["text"]
