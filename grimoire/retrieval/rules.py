"""Rules that apply now, as ``retrieve`` serves them ahead of its ranked evidence.

``AppliedRule`` is one active rule whose structured condition holds (or may hold) for the
situation the agent described (``grimoire.methods.advise`` finds them); this module owns
its answer form (``to_dict``, the item ``retrieve`` puts first) and its line in the
context block. Must not match, rank or fetch anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grimoire.guard.instructions import UNTRUSTED
from grimoire.records import Claim, GrimoireEntry
from grimoire.retrieval.render import source_labels

__all__ = ["Advice", "AppliedRule", "rule_item", "rules_section"]


@dataclass(frozen=True, slots=True)
class AppliedRule:
    """An active rule for a situation: ``match`` is ``applies`` or ``may_apply`` (then
    ``missing`` names the situation fields its condition needs); ``condition`` is what was
    matched; ``claim`` holds its numbers (its own, or its insight's for a derived rule).
    ``weight`` (how much it matters) = ``confidence`` (effective, decayed) × ``effect_size``
    (|effect − baseline| / max(|effect|, |baseline|), in [0, 1])."""

    entry: GrimoireEntry
    match: str
    missing: tuple[str, ...]
    condition: Mapping[str, Any]
    claim: Claim
    confidence: float
    effect_size: float
    weight: float
    derived_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        claim = self.claim
        return {
            "id": self.entry.id, "category": self.entry.category.value,
            "content": self.entry.content, "match": self.match, "missing": list(self.missing),
            "condition": dict(self.condition), "strategy": claim.strategy,
            "target": claim.target, "direction": claim.direction,
            "effect": claim.effect, "baseline": claim.baseline, "support": claim.support,
            "effect_size": round(self.effect_size, 6),
            "confidence": round(self.confidence, 6), "weight": round(self.weight, 6),
            "validated_count": self.entry.validated_count,
            "contradicted_count": self.entry.contradicted_count,
            "derived_from": self.derived_from,
        }


@dataclass(frozen=True, slots=True)
class Advice:
    """What ``retrieve`` serves first: the situation in words and its rules, in order."""

    situation: str
    rules: tuple[AppliedRule, ...]


def rule_item(rule: AppliedRule, rank: int, tokens: int, text: str | None = None
              ) -> dict[str, Any]:
    """The ``retrieve`` item of a rule served because it applies: its score is its
    ``weight``; ``factors`` are empty (no retrieval factor put it there); ``rule`` says
    why it is there. ``text``: the content as the token budget left it."""
    e = rule.entry
    item: dict[str, Any] = {
        "id": e.id, "kind": "entry", "category": e.category.value, "rank": rank,
        "content": e.content if text is None else text, "score": round(rule.weight, 6),
        "factors": {},
        "provenance": {"source": e.provenance.value,
                       "parent_episode_ids": list(e.parent_episode_ids),
                       "parent_entry_ids": list(e.parent_entry_ids), "ref": None},
        "timestamp": max(e.last_accessed_at, e.created_at),
        "confidence": round(rule.confidence, 6),
        "regime": e.market_regime.value if e.market_regime else None,
        "strategy": e.strategy, "tokens": tokens,
        "rule": {k: v for k, v in rule.to_dict().items()
                 if k not in ("id", "category", "content")}}
    if text is not None and text != e.content:
        item["truncated"] = True
    return item


def _line(text: str) -> str:
    return " ".join(text.split())


def _match_text(rule: AppliedRule) -> str:
    if not rule.missing:
        return "applies"
    return f"may apply: needs {', '.join(rule.missing)}"


def rules_section(situation: str, rules: Sequence[AppliedRule],
                  texts: Mapping[str, str] | None = None) -> list[str]:
    """The context block's first part: the situation and the rules that apply to it."""
    lines = [f"RULES THAT APPLY NOW ({_line(situation)}):"]
    if not rules:
        lines.append("(none)")
    for rank, rule in enumerate(rules, start=1):
        text = (texts or {}).get(rule.entry.id, rule.entry.content)
        told = source_labels(rule.entry.provenance.value,
                             [t for t in rule.entry.tags if t.startswith(UNTRUSTED)])
        label = " · ".join([*told, rule.entry.category.value, _match_text(rule),
                            f"confidence {rule.confidence:.2f}", f"weight {rule.weight:.2f}"])
        lines.append(f"{rank}. [{label}] {_line(text)}")
    return lines
