"""What each MCP tool does with the daemon's methods; ``call`` is one socket round trip.

Kept apart from the SDK so it reads as plain functions: ``add_event`` (seed 001:
the effect, optionally its cause, linked by the daemon's causal path) and
``query`` (seed 001: a narrative context, retrieval plus the causal chain, oldest
first) compose several methods; the others map onto one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grimoire.errors import ValidationError

__all__ = ["Call", "add_event", "kg_query", "query_narrative"]

Call = Callable[[str, dict[str, Any]], Any]


def add_event(call: Call, effect: str, cause: str | None = None, cause_id: str | None = None,
              type: str = "observation", outcome: str | None = None) -> dict[str, Any]:
    """Record ``effect``; with a cause (text: a new episode; or the id of a known item) the
    daemon records the causal link through its ``causal_hint`` path."""
    if cause and cause_id:
        raise ValidationError("give the cause as text or as an id, not both", field="cause")
    created_cause = None
    if cause:
        created_cause = call("episode.write", {"text": cause, "type": "observation"})["id"]
        cause_id = created_cause
    params: dict[str, Any] = {"text": effect, "type": type}
    if outcome:
        params["outcome"] = outcome
    if cause_id:
        params["causal_hint"] = cause_id
    effect_id = call("episode.write", params)["id"]
    out: dict[str, Any] = {"id": effect_id}
    if cause_id:
        out["cause_id"] = cause_id
        out["cause_created"] = created_cause is not None
    return out


def query_narrative(call: Call, question: str, k: int = 5, summaries: bool = False
                    ) -> dict[str, Any]:
    """Retrieve for ``question`` and tell it as a story: the causal chain oldest first,
    then the most relevant knowledge and episodes (the curator's L1/L2 summaries only
    when ``summaries`` asks for them)."""
    found = call("retrieve", {"query": question, "k": k, "mode": "browse",
                              "summaries": summaries})
    chain = call("causal.chain", {"query": question})
    lines: list[str] = []
    steps = chain.get("chain") or []
    if steps:
        lines.append("What led here (oldest first):")
        for step in steps:
            text = step.get("content") or step.get("text") or step.get("id")
            lines.append(f"- {text}")
    if found.get("items"):
        lines.append("Most relevant memory:")
        for item in found["items"]:
            kind = item.get("category") or item.get("kind")
            lines.append(f"- [{kind}, score {item.get('score', 0):.2f}] {item.get('content')}")
    if not lines:
        lines.append("Nothing in memory relates to this yet.")
    return {"narrative": "\n".join(lines), "retrieval_id": found.get("retrieval_id"),
            "chain": steps, "items": found.get("items", [])}


def kg_query(call: Call, subject_kind: str, subject_id: str, block: int | None = None,
             known_at: int | None = None) -> Any:
    """Facts about a subject valid at a block, or as known at a time (unix ms)."""
    subject = {"kind": subject_kind, "id": subject_id}
    if (block is None) == (known_at is None):
        raise ValidationError("give exactly one of block or known_at", field="block")
    if block is not None:
        return call("kg.at", {"subject": subject, "block": block})
    return call("kg.known_at", {"subject": subject, "time": known_at})
