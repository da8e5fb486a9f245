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

__all__ = ["Advice", "AppliedRule", "rule_item", "rule_log_rows", "rules_section"]


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
    # rules of the same advice (same category, condition and strategy) that rank below this
    # one: one item, several reasons ("avoid swap in high_vol": slippage, and losses)
    also: tuple[AppliedRule, ...] = ()

    def lines(self) -> list[str]:
        """Its content, then each folded rule's, one line each (what the budget counts)."""
        return [_line(self.entry.content), *(_line(a.entry.content) for a in self.also)]

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
            "also": [a.to_dict() for a in self.also],
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
    why it is there (with the rules it folds, ``rule.also``). ``text``: ``rule.lines()``
    as the token budget left them, one per line; the item's content is the first."""
    e = rule.entry
    cut = text is not None and text != "\n".join(rule.lines())
    item: dict[str, Any] = {
        "id": e.id, "kind": "entry", "category": e.category.value, "rank": rank,
        "content": text.split("\n", 1)[0] if cut and text is not None else e.content,
        "score": round(rule.weight, 6),
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
    if cut:
        item["truncated"] = True
    return item


def rule_log_rows(rule: AppliedRule, rank: int, context: Mapping[str, Any]
                  ) -> list[dict[str, Any]]:
    """The retrieval log's rows for a served rule and each rule it folds (served in its
    place, at its rank, so that either can be reported as followed). No retrieval factor
    put a rule there (``factors`` empty): what did is the condition it matched."""
    return [{"id": r.entry.id, "kind": "entry", "rank": rank, "score": round(r.weight, 6),
             "factors": {}, "context": context,
             "rule": {"match": r.match, "condition": dict(r.condition),
                      "missing": list(r.missing), "confidence": round(r.confidence, 6),
                      "effect_size": round(r.effect_size, 6)}}
            for r in (rule, *rule.also)]


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
        text = (texts or {}).get(rule.entry.id, "\n".join(rule.lines()))
        shown = text.split("\n")
        lines.append(f"{rank}. [{_label(rule, with_match=True)}] {shown[0]}")
        # the rules of the same advice it folds, under it, as far as the budget left them
        lines.extend(f"   also [{_label(a, with_match=False)}] {line}"
                     for a, line in zip(rule.also, shown[1:], strict=False))
    return lines


def _label(rule: AppliedRule, *, with_match: bool) -> str:
    told = source_labels(rule.entry.provenance.value,
                         [t for t in rule.entry.tags if t.startswith(UNTRUSTED)])
    return " · ".join([*told, rule.entry.category.value,
                       *([_match_text(rule)] if with_match else []),
                       f"confidence {rule.confidence:.2f}", f"weight {rule.weight:.2f}"])
