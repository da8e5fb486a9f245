"""The ``sentences`` phase: an entry's words follow its numbers (issue 24, one source).

A judgement moves a claim's numbers; the phase stores the sentence of the new numbers as
the entry's content (so explain, entry list and the report say what PLAYBOOK.md says),
and a rule derived from an insight states that insight's numbers, whatever its status.
"""

from __future__ import annotations

import dataclasses
import functools

from curator.cycle.derive import derive_rule
from curator.cycle.sentences import refresh_sentences
from curator.cycle.transitions import DERIVED_TAG
from grimoire import Grimoire
from grimoire.records import Category, EntryStatus
from playbook.render_text import entry_sentence
from tests.curator.test_curator_support import GAS_CLAIM, deltas, get, put, start_cycle
from tests.stores.semantic.test_semantic_entries import index_pages


def _judged(g: Grimoire, entry_id: str, **numbers: float) -> None:
    """Move the stored claim's numbers as a judgement does (content left as it was)."""
    entry = get(g, entry_id)
    assert entry.claim is not None
    moved = dataclasses.replace(entry, claim=dataclasses.replace(entry.claim, **numbers))
    g.context.writer.call(functools.partial(g.context.semantic.update_entry, moved))


def test_a_judged_claim_and_its_derived_rule_state_the_new_numbers(g: Grimoire) -> None:
    old = "Gas averages 6 gwei between 02:00 and 04:00 UTC (n=40)."
    insight = put(g, content=old, claim=GAS_CLAIM, status=EntryStatus.DEMOTED)
    made = derive_rule(dataclasses.replace(insight, category=Category.INSIGHT),
                       g.context.config.distiller)
    assert made is not None
    rule = put(g, category=made.category, content=made.content, tags=made.tags,
               parent_entry_ids=(insight.id,))
    _judged(g, insight.id, effect=6.5, support=71)
    assert refresh_sentences(start_cycle(g))["refreshed"] == 2
    stored, derived = get(g, insight.id), get(g, rule.id)
    assert stored.content == entry_sentence(stored) != old
    assert "6.5 gwei" in stored.content and "71 episodes" in stored.content
    # the rule states its (demoted) insight's numbers, not those it was derived with
    assert "6.5 gwei" in derived.content and "71 episodes" in derived.content
    assert deltas(g, insight.id)[-1] == "sentence" and deltas(g, rule.id)[-1] == "sentence"
    # nothing moved since: nothing to write
    assert refresh_sentences(start_cycle(g))["refreshed"] == 0


def test_an_entry_without_a_claim_keeps_its_words(g: Grimoire) -> None:
    told = put(g, category=Category.WARNING, content="Never bridge on Fridays.",
               tags=(DERIVED_TAG,))  # derived-looking, but no insight behind it
    plain = put(g, content="Gas spikes after token launches.")
    assert refresh_sentences(start_cycle(g))["refreshed"] == 0
    assert get(g, told.id).content == "Never bridge on Fridays."
    assert get(g, plain.id).content == "Gas spikes after token launches."


def test_the_phase_leaves_the_text_index_in_one_segment(g: Grimoire) -> None:
    made = [put(g, content=f"Gas spikes after launch {i} on chain {i % 3}.") for i in range(40)]
    path = g.context.data_dir / "semantic.sqlite"
    written = index_pages(path)
    assert refresh_sentences(start_cycle(g))["refreshed"] == 0
    assert index_pages(path) < written  # forty one-entry transactions, merged
    found = g.context.semantic.bm25("launch 7 chain", 3)
    assert found and found[0][0].id == made[7].id
