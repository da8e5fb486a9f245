"""``entry.explain``: prefix ids, and an entry's whole history as data and as text."""

from __future__ import annotations

import dataclasses

import pytest

from curator.cycle.evidence import validate_predictions
from curator.cycle.promote import promote as promote_phase
from curator.cycle.run import run_cycle
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.errors import NotFoundError, ValidationError
from grimoire.records import Category, DecayClass, EntryStatus
from tests.curator.test_curator_support import (
    GAS_CLAIM,
    finish_cycle,
    gas_obs,
    get,
    hour,
    put,
    start_cycle,
    write,
)


def test_unique_prefix_ambiguous_prefix_and_unknown_id(g: Grimoire) -> None:
    a = put(g, id="0193aaaa-0000-7000-8000-000000000001")
    put(g, id="0193aaaa-0000-7000-8000-000000000002")
    other = put(g, id="0193bbbb-0000-7000-8000-000000000003")
    assert g.entry_explain(a.id)["id"] == a.id
    assert g.entry_explain("0193bbbb")["id"] == other.id
    with pytest.raises(ValidationError, match="matches 2 entries") as err:
        g.entry_explain("0193aaaa")
    assert err.value.field == "id"
    with pytest.raises(NotFoundError):
        g.entry_explain("0193cccc")
    with pytest.raises(ValidationError, match="at least 4"):
        g.entry_explain("019")
    with pytest.raises(ValidationError):
        g.entry_explain("")


def test_a_prefix_from_playbook_md_resolves_to_the_listed_entry(g: Grimoire) -> None:
    """Entries made in the same millisecond share their first 12 characters; PLAYBOOK.md's
    prefix is unique among what it lists, so that is the entry explain returns."""
    listed = put(g, id="0193aaaa-0000-7000-8000-00000000000a", category=Category.WARNING,
                 content="Avoid swap when the regime is high_vol because most of them lose.")
    put(g, id="0193aaaa-0000-7000-8000-00000000000b", status=EntryStatus.CANDIDATE)
    assert g.entry_explain("0193aaaa")["id"] == listed.id


def test_history_of_an_admitted_validated_promoted_entry(g: Grimoire, clock: FrozenClock) -> None:
    ids = write(g, [gas_obs(hour(2.2), 5.5), gas_obs(hour(2.5), 6.5)])
    added = g.entry_add(category="insight", content="Gas averages 6 gwei between 02:00 and "
                        "04:00 UTC (vs 24 gwei otherwise; 40 episodes).",
                        parent_episode_ids=ids, provenance="self_learned")
    assert added["decision"] == "admitted"
    entry_id = added["id"]
    g.context.writer.call(lambda: g.context.semantic.update_entry(
        dataclasses.replace(get(g, entry_id), claim=GAS_CLAIM)))
    # Two cycles' validation and promotion phases (the learners' own votes are left out,
    # so the history is exactly the curator's): ✓5 gives (5 + 5) / (5 + 10) = 0.67 >= 0.6,
    # promoted; then ✓8.
    for day in (0, 1):
        write(g, [gas_obs(hour(2.1, day=day) + i, 7.0) for i in range(3)])
        clock.set(hour(5, day=day))
        cy = start_cycle(g)
        validate_predictions(cy)
        promote_phase(cy)
        finish_cycle(cy)

    data = g.entry_explain(entry_id[:13])
    assert data["id"] == entry_id
    assert [h["op"] for h in data["history"]][:3] == ["validate", "promote", "validate"]
    promote = data["history"][1]
    assert promote["before"] == {"status": "candidate"}
    assert promote["after"]["status"] == "active" and "0.6" in promote["after"]["why"]
    assert data["votes"] == {"validated_count": 8, "contradicted_count": 0}
    # Its 2 parent episodes and 3 new ones a day, each counted once and listed (issue 11).
    assert len(data["evidence"]["confirming"]) == 8 and data["evidence"]["contradicting"] == []
    assert "Confirming episodes counted (8)" in data["text"]
    assert data["admission"][0]["decision"] == "admitted"
    assert set(data["admission"][0]["factors"]) == {
        "future_utility", "factual_confidence", "semantic_novelty", "temporal_recency",
        "content_type_prior"}
    assert [e["id"] for e in data["provenance"]["episodes"]] == ids
    assert data["provenance"]["episodes"][0]["text"].startswith("WETH/USDC gas 5.5 gwei")
    assert data["decay"]["half_life_days"] == 7.0
    assert data["decay"]["effective_confidence"] <= data["decay"]["confidence"]
    # explain shows the confidence rule's terms (SPEC §13) and their result
    rule = data["decay"]["rule"]
    assert (rule["confirmed"], rule["contradicted"], rule["prior"], rule["k"]) == (8, 0, 0.5,
                                                                                 10.0)
    assert rule["from_evidence"] == pytest.approx(13 / 18, abs=1e-4)
    assert rule["stored"] == pytest.approx(13 / 18)
    assert rule["effective"] == data["decay"]["effective_confidence"]
    assert rule["age_factor"] == data["decay"]["retention"]
    assert (f"Confidence rule: (✓8 + 10 × prior 0.5) / (✓8 + ✗0 + 10) = 0.722 from the "
            f"evidence, × age factor {rule['age_factor']:.3f} = {rule['effective']:.3f} now."
            in data["text"])
    text = data["text"]
    assert entry_id in text and "Admission gate:" in text and "promote" in text
    assert "Episodes the learners found it in (the last 2 of the 2 kept)" in text
    assert "half-life 7.0 d" in text


def test_an_off_topic_admission_is_logged_and_explained(g: Grimoire) -> None:
    """The gate's off-topic flag (nearest stored entry below cosine 0.5) is stored with the
    decision and its reasons, and explain shows both."""
    g.entry_add(category="insight", content="Gas averages 6 gwei between 02:00 and 04:00 UTC "
                "(vs 24 gwei otherwise; 40 episodes).")
    added = g.entry_add(category="warning", content="Avoid lunar eclipse tours when "
                        "coastal estuary tides exceed 3 metres: 4 of 5 boats ran aground.")
    assert added["off_topic"] is True
    (record,) = [r for r in g.context.semantic.list_admissions()
                 if r.candidate.startswith("Avoid lunar")]
    assert record.off_topic and any("off-topic" in reason for reason in record.reasons)
    assert record.decision == added["decision"] == "admitted"
    data = g.entry_explain(added["id"])
    assert data["admission"][0]["off_topic"] is True
    assert "[off-topic]" in data["text"] and "off-topic" in data["text"].split("[off-topic]")[1]
    (on_topic,) = [r for r in g.context.semantic.list_admissions()
                   if r.candidate.startswith("Gas averages")]
    assert not on_topic.off_topic


def test_derived_rules_parents_children_and_archived_entries(
        g: Grimoire, clock: FrozenClock) -> None:
    insight = put(g, claim=GAS_CLAIM, confidence=0.9)
    run_cycle(g.context)  # derives a heuristic from the insight
    rule_id = next(e["id"] for e in g.entry_list(category="heuristic")["entries"])
    data = g.entry_explain(rule_id)
    assert [p["id"] for p in data["parents"]] == [insight.id]
    assert data["history"][0]["op"] == "derive"
    parent = g.entry_explain(insight.id)
    assert [c["id"] for c in parent["derived"]] == [rule_id]
    assert "Rules derived from it:" in parent["text"]
    # An archived entry still explains itself (cold storage is readable).
    old = put(g, confidence=0.06, status=EntryStatus.DEMOTED, category=Category.INSIGHT,
              decay_class=DecayClass.TACTICAL)
    for _ in range(3):
        clock.advance(MS_PER_DAY)
        run_cycle(g.context)
    data = g.entry_explain(old.id)
    assert data["entry"]["status"] == "archived"
    assert data["history"][-1]["op"] == "prune"
