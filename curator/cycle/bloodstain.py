"""Curator phase: bloodstain warnings (seed 004, issue 11 item 8).

Every new ``safety_incident`` episode of critical (or emergency) importance
becomes a warning flagged ``is_bloodstain``, proposed through the admission
gate with the incident as its parent episode: "Avoid repeating this: <what
happened>". The flag is what makes the rest of seed 004 reachable: the decay
multiplier (``decay.bloodstain_multiplier``), the retrieval premium and the
pruning exemption. An incident the gate has already seen merges into its
warning (a restatement is not evidence: it moves nothing). A warning told by
``entry.add`` with provenance ``death_reflection`` is flagged at the gate
(``grimoire.gate.admit``).
"""

from __future__ import annotations

import functools
from typing import Any

from curator.cycle.state import Cycle, admit_recorded, refresh
from grimoire.gate.admit import Proposal
from grimoire.records import Category, EpisodeType, Importance, Provenance

__all__ = ["BLOODSTAIN_TAG", "bloodstains"]

BLOODSTAIN_TAG = "bloodstain"
_SEVERE = frozenset({Importance.CRITICAL, Importance.EMERGENCY})


def bloodstains(cy: Cycle) -> dict[str, Any]:
    """New critical safety incidents → bloodstain warnings through the gate."""
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
        tags=(BLOODSTAIN_TAG, "safety_incident"), strategy=e.strategy, regime=e.regime,
        parent_episode_ids=(e.id,), support=1, event_time=e.timestamp, is_bloodstain=True)
        for e in incidents]
    vectors = cy.ctx.embedder.embed([p.content for p in proposals])
    for proposal, vector in zip(proposals, vectors, strict=True):
        result = cy.ctx.writer.call(functools.partial(
            admit_recorded, cy, proposal, vector, op="bloodstain",
            why="a critical safety incident", detail={"episode": proposal.parent_episode_ids[0]}))
        refresh(cy, [result.get("id")])
        counts["incidents"] += 1
        decision = str(result["decision"])
        counts[decision] = counts.get(decision, 0) + 1
    return counts
