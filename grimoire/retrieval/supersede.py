"""Newer facts first (``retrieval.supersede``): a later statement outranks the one it updates.

A memory that states a value ("gas on Arbitrum is 30 gwei", "Maren: I live in Porto") is
out of date once a later one states another ("gas on Arbitrum is 8 gwei", "Maren: I live
in Lisbon"). Both answer "what is gas on Arbitrum?", and the older one may match the
question as well or better. For a question about the current state the later one leads;
both stay in the answer, and ``at`` (which sees only what was known then) still shows the
past.

Two relevant pooled episodes (relevance tier ≥ 1) are an *update* pair when:

- neither is an ``action`` (an action is an event: a later swap does not undo an earlier
  one, both are evidence; observations, alerts and shifts state what holds);
- their ``actor`` is the same, or both have none (another person's value is not an update);
- the later *restates* the earlier with a changed value: at least half of the words of
  each are the other's (the same statement), and each has a word the other lacks (a value
  was substituted, not merely added: "…Porto, and I love it" adds, it does not change).
  Words are compared after ``terms_of``'s light normalisation and counted by their IDF
  in the episode sample (the relevance gate's), so two statements that share only
  "my", "is", "the" and the speaker's name are not one.

The later one is lifted just above the earlier: its tier becomes at least the earlier's,
its boosted score the earlier's plus a hair, so the two swap while every other item keeps
its place; a chain (A, then B, then C) orders C > B > A. Each gets a line in its breakdown
(``supersedes`` / ``superseded``, the value being the shared share of words).

A query that repeats a statement in full (every word of the earlier one is in the query,
not every word of the later) asks for that statement, not for the current state: the pair
is left as relevance ranked it, so an episode whose text the query repeats stays first.

Not caught: an update in other words ("we moved, Lisbon is home now"). Similarity cannot
tell it here: a stored vector carries the previous turn of its thread, so one speaker's
statements are each other's nearest whatever they are about (``bench_recall.py --part
updates`` measures both kinds). That needs the attribute itself: a KG triple (the graph
is bi-temporal already) or an LLM's extraction. No word list; no LLM.

Questions about a past state pass ``at`` or name a time window; the caller skips this
stage for them. Owns: the pair test and the lift. Must not read a store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from grimoire.retrieval.candidates import Breakdown, Candidate

__all__ = ["restates", "supersede"]

_HAIR = 1e-6


def restates(earlier: frozenset[str], later: frozenset[str],
             weight: Callable[[str], float] = lambda _: 1.0) -> float | None:
    """The shared share of words when ``later`` restates ``earlier`` with a changed value
    (see the module docstring), else None. Words count by ``weight`` (their IDF), so
    sharing "my", "is" and "the" does not make two statements one."""
    if not earlier or not later or not (earlier - later) or not (later - earlier):
        return None
    shared = sum(weight(t) for t in earlier & later)
    whole = max(sum(weight(t) for t in earlier), sum(weight(t) for t in later))
    share = shared / whole if whole > 0.0 else 0.0
    return share if share >= 0.5 else None


def supersede(candidates: Sequence[Candidate], boosted: Mapping[str, float],
              tiers: Mapping[str, int], factors: Mapping[str, Breakdown],
              terms: Callable[[str], frozenset[str]], weight: Callable[[str], float],
              query: frozenset[str] = frozenset(),
              ) -> tuple[dict[str, float], dict[str, int], dict[str, Breakdown]]:
    """(boosted scores, tiers, breakdowns) with every update lifted above what it updates.

    The same pairs as testing every earlier/later pair with ``restates``, found cheaply:
    pairs only within one actor, each term weighed once per call (not once per pair),
    and a pair skipped when the lighter text's weight is under half the heavier's (the
    shared weight is at most the lighter's, so the share cannot reach 0.5)."""
    out_scores, out_tiers, out_factors = dict(boosted), dict(tiers), dict(factors)
    states = sorted((c for c in candidates
                     if c.kind == "episode" and c.id in boosted and tiers.get(c.id, 0) >= 1
                     and c.provenance.get("type") != "action"),
                    key=lambda c: (c.timestamp, c.id))
    weights: dict[str, float] = {}

    def weighed(term: str) -> float:
        found = weights.get(term)
        if found is None:
            found = weights[term] = weight(term)
        return found

    words = {c.id: terms(c.content) for c in states}
    mass = {c.id: sum(weighed(t) for t in words[c.id]) for c in states}
    by_actor: dict[object, list[Candidate]] = {}
    for c in states:
        by_actor.setdefault(c.provenance.get("actor"), []).append(c)
    for group in by_actor.values():
        for n, new in enumerate(group):
            for old in group[:n]:
                if old.timestamp == new.timestamp:
                    continue
                light, heavy = sorted((mass[old.id], mass[new.id]))
                if light < 0.5 * heavy or heavy <= 0.0:
                    continue
                earlier, later = words[old.id], words[new.id]
                both = earlier & later
                if len(both) == len(earlier) or len(both) == len(later):
                    continue  # nothing substituted: one holds all of the other's words
                if earlier <= query and not later <= query:
                    continue  # the query repeats the earlier statement: it asks for it
                share = sum(weights[t] for t in both) / heavy  # ``restates``, its sums kept
                if share >= 0.5:
                    _lift(old, new, share, out_scores, out_tiers, out_factors)
    return out_scores, out_tiers, out_factors


def _lift(old: Candidate, new: Candidate, share: float, scores: dict[str, float],
          tiers: dict[str, int], factors: dict[str, Breakdown]) -> None:
    tiers[new.id] = max(tiers.get(new.id, 0), tiers.get(old.id, 0))
    if scores[new.id] <= scores[old.id]:
        scores[new.id] = scores[old.id] + _HAIR
    factors[new.id] = {**factors.get(new.id, {}), "supersedes": {
        "value": share, "older_ms": float(old.timestamp)}}
    factors[old.id] = {**factors.get(old.id, {}), "superseded": {
        "value": share, "newer_ms": float(new.timestamp)}}
