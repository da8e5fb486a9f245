"""Curator phase: critical safety incidents become warnings (SPEC §13 "Bloodstain").

Every new ``safety_incident`` episode of critical (or emergency) importance becomes a
warning, proposed through the admission gate with the incident as its parent episode:
"Avoid repeating this safety incident: <what happened>", tagged ``safety_incident`` and
``critical``. It is an ordinary warning of this agent's own (self-learned): listed at any
confidence, exempt from pruning as every warning is, decaying as warnings do. It is *not*
a bloodstain: seed 004 reserves that mark (×3 slower decay, ×1.2 retrieval) for
knowledge paid for by a predecessor's death, the warnings of its testament's lessons
(``grimoire.portable.succession``); a warning told by ``entry.add`` with provenance
``death_reflection`` is flagged at the gate (``grimoire.methods.entry``). An incident the
gate has already seen merges into its warning (a restatement is not evidence: it moves
nothing).
"""

from __future__ import annotations

import functools
from typing import Any

from curator.cycle.state import Cycle, admit_recorded, refresh
from grimoire.gate.admit import Proposal
from grimoire.records import Category, EpisodeType, Importance, Provenance

__all__ = ["INCIDENT_TAGS", "incident_warnings"]

INCIDENT_TAGS = ("safety_incident", "critical")
_SEVERE = frozenset({Importance.CRITICAL, Importance.EMERGENCY})


def incident_warnings(cy: Cycle) -> dict[str, Any]:
    """New critical safety incidents → ordinary critical warnings through the gate."""
    counts: dict[str, Any] = {"incidents": 0, "admitted": 0, "merged": 0, "skipped": 0,
                              "rejected": 0, "quarantined": 0}
    incidents = [e for e in cy.window
                 if e.type is EpisodeType.SAFETY_INCIDENT and e.importance in _SEVERE]
    if not incidents:
        return counts
    proposals = [Proposal(
        category=Category.WARNING,
        content=f"Avoid repeating this safety incident: {e.text.strip()}",
        provenance=Provenance.SELF_LEARNED,
        tags=INCIDENT_TAGS, strategy=e.strategy, regime=e.regime,
        parent_episode_ids=(e.id,), support=1, event_time=e.timestamp)
        for e in incidents]
    vectors = cy.ctx.embedder.embed([p.content for p in proposals])
    for proposal, vector in zip(proposals, vectors, strict=True):
        result = cy.ctx.writer.call(functools.partial(
            admit_recorded, cy, proposal, vector, op="incident_warning",
            why="a critical safety incident", detail={"episode": proposal.parent_episode_ids[0]}))
        refresh(cy, [result.get("id")])
        counts["incidents"] += 1
        decision = str(result["decision"])
        counts[decision] = counts.get(decision, 0) + 1
    return counts
