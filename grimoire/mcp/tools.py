"""What each MCP tool does with the daemon's methods; ``call`` is one socket round trip.

Kept apart from the SDK so it reads as plain functions: ``add_event`` (seed 001:
the effect, optionally its cause; without one the daemon searches its likely causes
and the answer names the one it linked) and ``query`` (seed 001: a narrative
context, retrieval plus the causal chain, oldest first) compose several methods;
the others map onto one.

Answers are sized for a model's context: an item is its id, kind, words (clipped at
``CLIP`` characters), score, confidence and time, not the factor breakdown (``retrieve``
with ``detail`` returns the method's full answer); ``explain`` is a summary (the
sentence, its ✓ / ✗ and confidence, provenance, the last changes) unless ``full``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grimoire.errors import ValidationError

__all__ = ["CLIP", "SIMULATED", "Call", "add_event", "compact_items", "compact_retrieval",
           "consequences", "explain_summary", "kg_query", "query_narrative", "readable_time"]

Call = Callable[[str, dict[str, Any]], Any]
CLIP = 280  # characters of an item's words in a compact answer
_HISTORY = 3  # last changes an explain summary lists
_EVIDENCE = 3  # episode ids per side an explain summary lists
_CHAIN_SHOWN = 4  # causal steps a query's narrative tells: the root and the last three
# How an answer from simulated memory (FEED.json kind simulated) says so.
SIMULATED = ("simulated memory: learned from the built-in market simulator; its times are "
             "simulated time, not real UTC")


def _clip(text: Any, limit: int = CLIP) -> str:
    words = " ".join(str(text or "").split())
    return words if len(words) <= limit else words[:limit - 1] + "…"


def _round(value: Any, places: int) -> Any:
    return round(value, places) if isinstance(value, int | float) and not isinstance(
        value, bool) else value


def add_event(call: Call, effect: str, cause: str | None = None, cause_id: str | None = None,
              type: str = "observation", outcome: str | None = None) -> dict[str, Any]:
    """Record ``effect``; with a cause (text: a new episode; or the id of a known item) the
    daemon records the causal link through its ``causal_hint`` path. Without one, the
    daemon links the likely causes it finds (similar and recent, seed 000's weight) and
    the answer names the strongest (``likely_cause``), or says there was none."""
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
    steps = call("causal.chain", {"id": effect_id}).get("chain") or []
    if len(steps) >= 2:  # oldest first: the step before the effect is its strongest cause
        found, link = steps[-2], steps[-1]
        out["likely_cause"] = {"id": found.get("id"), "text": _clip(found.get("text")),
                               "weight": _round(link.get("weight"), 3),
                               "relationship": link.get("relationship")}
    else:
        out["likely_cause"] = None
    return out


def readable_time(ms: int, simulated: bool = False) -> str:
    """A time of the memory in words: UTC, or simulated time when the memory is simulated
    (the simulator's clock runs ahead of the wall clock: never given as real UTC)."""
    from playbook import iso_utc

    text = iso_utc(ms).replace("T", " ").removesuffix("Z")
    return f"{text} {'simulated time' if simulated else 'UTC'}"


def compact_items(items: Sequence[Mapping[str, Any]], simulated: bool = False
                  ) -> list[dict[str, Any]]:
    """Retrieved items as a model needs them: what, how much, how sure, when (in words,
    simulated time for simulated memory, beside the unix ms ``timestamp``)."""
    out = []
    for item in items:
        row: dict[str, Any] = {"id": item.get("id"), "kind": item.get("category")
                               or item.get("kind"), "content": _clip(item.get("content")),
                               "score": _round(item.get("score"), 3)}
        if item.get("kind") != "episode" and item.get("confidence") is not None:
            row["confidence"] = _round(item.get("confidence"), 2)
        if isinstance(item.get("timestamp"), int):
            row["time"] = readable_time(item["timestamp"], simulated)
            row["timestamp"] = item["timestamp"]
        if item.get("regime"):
            row["regime"] = item["regime"]
        rule = item.get("rule")
        if isinstance(rule, Mapping):  # a rule that applies to the situation given
            row["rule"] = {k: rule[k] for k in ("match", "missing") if k in rule}
        out.append(row)
    return out


def compact_retrieval(found: Mapping[str, Any], simulated: bool = False) -> dict[str, Any]:
    """``retrieve``'s answer without the breakdown: the id to report on, items, region;
    from simulated memory it says so once (``memory``) and gives times as simulated time."""
    out: dict[str, Any] = {"retrieval_id": found.get("retrieval_id"),
                           **({"memory": SIMULATED} if simulated else {}),
                           "items": compact_items(found.get("items") or [], simulated)}
    region = found.get("region")
    if isinstance(region, Mapping) and region.get("best_actions"):
        out["region"] = {"id": region.get("id"),
                         "best_actions": list(region["best_actions"])[:3]}
    return out


def query_narrative(call: Call, query: str, k: int = 5, summaries: bool = False
                    ) -> dict[str, Any]:
    """Retrieve for ``query`` and tell it as a story: the causal chain oldest first,
    then the most relevant knowledge and episodes (the curator's L1/L2 summaries only
    when ``summaries`` asks for them)."""
    found = call("retrieve", {"query": query, "k": k, "mode": "browse",
                              "summaries": summaries})
    chain = call("causal.chain", {"query": query})
    lines: list[str] = []
    steps = chain.get("chain") or []
    if len(steps) > _CHAIN_SHOWN:  # the root, then the steps nearest the event
        skipped = len(steps) - _CHAIN_SHOWN
        steps = [steps[0], {"id": None, "text": f"… {skipped} more steps …"},
                 *steps[-(_CHAIN_SHOWN - 1):]]
    if steps:
        lines.append("What led here (oldest first):")
        for step in steps:
            lines.append(f"- {_clip(step.get('text') or step.get('id'), 160)}")
    items = compact_items(found.get("items") or [])
    if items:
        lines.append("Most relevant memory:")
        for item in items:
            lines.append(f"- [{item['kind']}, score {item.get('score') or 0:.2f}] "
                         f"{_clip(item['content'], 160)}")
    if not lines:
        lines.append("Nothing in memory relates to this yet.")
    return {"narrative": "\n".join(lines), "retrieval_id": found.get("retrieval_id"),
            "chain": [{"id": s.get("id"), "relationship": s.get("relationship")}
                      for s in steps if s.get("id")],
            "items": [{"id": i["id"], "kind": i["kind"]} for i in items]}


def consequences(call: Call, start: Mapping[str, Any], depth: int, limit: int
                 ) -> dict[str, Any]:
    """``causal.consequences`` with each consequence's words clipped."""
    out = call("causal.consequences", {**start, "depth": depth, "limit": limit})
    items = [{"id": c.get("id"), "text": _clip(c.get("text"), 200), "depth": c.get("depth"),
              "weight": _round(c.get("weight"), 3), "relationship": c.get("relationship")}
             for c in out.get("consequences") or []]
    origin = out.get("start") or {}
    return {"start": {"id": origin.get("id"), "text": _clip(origin.get("text"), 200)}
            if origin else None, "consequences": items, "narrative": out.get("narrative")}


def explain_summary(full: Mapping[str, Any]) -> dict[str, Any]:
    """``entry.explain`` summarised: the sentence, its evidence and confidence, its
    provenance and parents, the last changes; ``explain(full=True)`` has the rest."""
    entry = full.get("entry") or {}
    decay = full.get("decay") or {}
    evidence = full.get("evidence") or {}
    provenance = full.get("provenance") or {}
    history = list(full.get("history") or [])[-_HISTORY:]
    return {
        "id": full.get("id"), "category": entry.get("category"),
        "status": entry.get("status"), "sentence": (full.get("numbers") or {}).get(
            "sentence") or entry.get("content"),
        "validated": entry.get("validated_count"), "contradicted": entry.get(
            "contradicted_count"),
        "confidence": _round(decay.get("effective_confidence", entry.get("confidence")), 4),
        "decay_class": decay.get("decay_class"),
        "half_life_days": decay.get("effective_half_life_days"),
        "provenance": provenance.get("provenance"),
        "cited_episodes": provenance.get("episodes_total"),
        "confirming": list(evidence.get("confirming") or [])[:_EVIDENCE],
        "contradicting": list(evidence.get("contradicting") or [])[:_EVIDENCE],
        "parents": [{"id": p.get("id"), "category": p.get("category"),
                     "content": _clip(p.get("content"), 160)}
                    for p in list(full.get("parents") or [])[:3]],
        "last_changes": [{"cycle": h.get("cycle"), "op": h.get("op"),
                          "why": _clip((h.get("after") or {}).get("why"), 160) or None}
                         for h in history],
        "more": "explain with full=true for every vote, cited episode and change",
        # said once, as PLAYBOOK.md and ``status`` say it: these times are not real UTC
        **({"memory": SIMULATED} if full.get("simulated") else {}),
    }


def kg_query(call: Call, subject_kind: str, subject_id: str, block: int | None = None,
             known_at: int | None = None) -> Any:
    """Facts about a subject valid at a block, or as known at a time (unix ms)."""
    subject = {"kind": subject_kind, "id": subject_id}
    if (block is None) == (known_at is None):
        raise ValidationError("give exactly one of block or known_at", field="block")
    if block is not None:
        return call("kg.at", {"subject": subject, "block": block})
    return call("kg.known_at", {"subject": subject, "time": known_at})
