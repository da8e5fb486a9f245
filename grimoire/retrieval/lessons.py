"""Lessons first: a rule the query found ranks above the episodes it was learned from.

A rule (a warning or heuristic with a structured condition) speaks about every episode its
condition holds for: it *covers* them. When a query finds both a rule and episodes the rule
covers, the rule is the lesson those episodes taught, stated once with its evidence
counted, and the agent asking before a decision wants it ahead of any single one of them.
A causal link ("a clade alert is followed by a shift to high_vol within 10 min") covers
the occurrences of its two events the same way: a question that finds the shifts to
high_vol is asking what the link answers.
So a covering rule's boosted score becomes its own plus the best boosted score among the
relevant episodes it covers (``covers`` in its breakdown: that score, and how many of the
pooled episodes it covers). Rules covering the same evidence keep the order of their own match.

The lift moves scores *within* a relevance tier only (the caller gates them again): a
rule the query does not match on its own stays below every item it does match, and an
episode the query repeats stays first. It is not applied on a chain walk (a why question
or an explicit ``event_id``), where the causes are what was asked for.

Which rule covers which episode is the caller's (``Coverage``: the facade reads the rules'
conditions through ``grimoire.methods.advise.covering``). Owns the lift. Must not read a
store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from grimoire.retrieval.candidates import Breakdown, Candidate

__all__ = ["Coverage", "lessons_first"]

# (entry ids, episode ids) → each rule among the entries → the episodes it covers
Coverage = Callable[[Collection[str], Sequence[str]], Mapping[str, Sequence[str]]]


def lessons_first(coverage: Coverage, pooled: Sequence[Candidate],
                  boosted: Mapping[str, float], tiers: Mapping[str, int],
                  factors: Mapping[str, Breakdown]
                  ) -> tuple[dict[str, float], dict[str, Breakdown]]:
    """(boosted scores with each covering rule lifted, breakdowns with its ``covers``
    line). Only relevant items (tier ≥ 1) take part, on either side."""
    out, lines = dict(boosted), dict(factors)
    relevant = [c for c in pooled if c.id in boosted and tiers.get(c.id, 0) >= 1]
    entries = {c.id for c in relevant if c.kind == "entry"}
    episodes = [c.id for c in relevant if c.kind == "episode"]
    if not entries or not episodes:
        return out, lines
    for rule, covered in coverage(entries, episodes).items():
        found = [e for e in covered if e in boosted]
        if rule not in boosted or not found:
            continue
        best = max(found, key=lambda e: (boosted[e], e))
        out[rule] = boosted[rule] + boosted[best]
        lines[rule] = {**lines.get(rule, {}), "covers": {
            "value": boosted[best], "episodes": float(len(found))}}
    return out, lines
