"""Confidence follows evidence (SPEC §13, issue 24) on real stores: the curator sets an
entry's confidence from its ✓ / ✗ and provenance (``decay.evidence_confidence``), so the
same evidence reached by different paths gives the same confidence."""

from __future__ import annotations

from curator.claims import Verdict
from curator.cycle.evidence import vote_change
from curator.cycle.state import apply_changes
from grimoire import Grimoire
from grimoire.gate.decay import evidence_confidence
from grimoire.records import Provenance
from tests.curator.test_curator_support import finish_cycle, get, put, start_cycle


def _verdict(right: bool, ids: list[str]) -> Verdict:
    return Verdict(right, len(ids), 0.8 if right else 0.2, 0.8, 0.4, "outcome:negative_rate",
                   predictions=max(1, len(ids) // 3), episode_ids=tuple(ids))


def _cycle(g: Grimoire, verdicts: dict[str, Verdict]) -> None:
    cy = start_cycle(g)
    apply_changes(cy, [vote_change(cy, entry_id, verdict, op="validate", why="test")
                       for entry_id, verdict in verdicts.items()])
    finish_cycle(cy)


def test_the_same_evidence_in_another_order_gives_the_same_confidence(g: Grimoire) -> None:
    first = put(g, confidence=0.5)
    second = put(g, confidence=0.5)
    held = [[f"ep-held-{c}-{i}" for i in range(30)] for c in range(3)]
    failed = [f"ep-failed-{i}" for i in range(6)]
    # first: three cycles of confirmations, then the contradictions; second: the reverse
    for ids in held:
        _cycle(g, {first.id: _verdict(True, ids)})
    _cycle(g, {first.id: _verdict(False, failed), second.id: _verdict(False, failed)})
    for ids in held:
        _cycle(g, {second.id: _verdict(True, ids)})
    a, b = get(g, first.id), get(g, second.id)
    assert (a.validated_count, a.contradicted_count) == (90, 6)
    assert (b.validated_count, b.contradicted_count) == (90, 6)
    assert a.confidence == b.confidence
    assert a.confidence == evidence_confidence(Provenance.SELF_LEARNED, 90, 6,
                                               g.context.config.decay)


def test_one_cycle_of_confirmations_does_not_make_a_rule_certain(g: Grimoire) -> None:
    entry = put(g, confidence=0.5)
    _cycle(g, {entry.id: _verdict(True, [f"ep-{i}" for i in range(30)])})
    assert 0.5 < get(g, entry.id).confidence < 0.9
