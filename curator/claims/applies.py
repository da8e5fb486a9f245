"""Whether a stored rule's condition holds for the situation the agent is in (SPEC §13,
decision time).

A situation is an action episode not written yet: the fields the agent gives (its tool or
actions, token pair, chain, regime, strategy, metrics, time). A rule's condition is its
claim's; a rule the curator derived from an insight has none of its own, and holds under
the insight's condition when the action is one the rule names. The condition is read by
``window.condition_mask``, the reading the curator judges claims with, on the terms whose
field the situation gives; a term whose field it lacks leaves the rule "may apply", naming
the field (``window.term_field``). A term no one here can read (another extractor's) and
a condition that fails give no match.

Scope: a strategy's rule applies to that strategy's situations, and may apply to a
situation that names no strategy; a global rule applies to every strategy, as
PLAYBOOK.md's "Global" section tells the owner. Pure: records in, matches out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.claims.window import EpisodeWindow, actions_of, condition_mask, term_field
from curator.cycle.derive import rule_actions
from curator.cycle.transitions import derived_from
from grimoire.records import Claim, Episode, GrimoireEntry

__all__ = ["APPLIES", "MAY_APPLY", "Match", "Situation", "covered", "link_events", "match_rule",
           "rule_claim", "rule_conditions"]

APPLIES = "applies"
MAY_APPLY = "may_apply"
STRATEGY = "strategy"


@dataclass(frozen=True)
class Situation:
    """A partial action episode and which of its fields the agent gave.

    ``given`` names fields as ``term_field`` does: ``regime``, ``token_pair``, ``chain``,
    ``tool``, ``action`` (actions or tool), ``timestamp``, ``metrics.<name>``, and
    ``strategy``. A field not given is unknown, not empty."""

    episode: Episode
    given: frozenset[str]
    window: EpisodeWindow

    @classmethod
    def of(cls, episode: Episode, fields: Collection[str]) -> Situation:
        """``fields``: the episode fields the agent set (``actions``, ``metrics``, …)."""
        given = {f for f in fields if f not in ("actions", "metrics")}
        if actions_of(episode):
            given.add("action")
        given.update(f"metrics.{name}" for name in episode.metrics)
        return cls(episode, frozenset(given), EpisodeWindow.of([episode]))


@dataclass(frozen=True, slots=True)
class Match:
    """A rule that holds (``applies``) or may hold (``may_apply``: ``missing`` names the
    fields it needs), and the condition it was matched on."""

    match: str
    missing: tuple[str, ...]
    condition: Mapping[str, Any]


def rule_claim(rule: GrimoireEntry, parent: GrimoireEntry | None) -> Claim | None:
    """The claim a rule stands on: its own, else (a derived rule) its insight's."""
    if rule.claim is not None:
        return rule.claim
    if parent is not None and derived_from(rule) == parent.id:
        return parent.claim
    return None


def rule_conditions(rule: GrimoireEntry, parent: GrimoireEntry | None
                    ) -> tuple[Mapping[str, Any], ...]:
    """The conditions under which ``rule`` holds, any one of them: its claim's; for a rule
    derived from an insight, the insight's condition with each action the rule names
    (unless the condition names its action itself). Empty: nothing structured to match."""
    claim = rule_claim(rule, parent)
    if claim is None:
        return ()
    if rule.claim is not None or "action" in claim.condition:
        return (claim.condition,)
    actions = rule_actions(rule)
    if not actions:
        return (claim.condition,)
    return tuple({**claim.condition, "action": action} for action in actions)


def _holds(situation: Situation, condition: Mapping[str, Any], band_cut: float | None,
           missing: set[str]) -> Match | None:
    fields: dict[str, str] = {}
    for key, value in condition.items():
        field = term_field(key, value)
        if field is None:
            return None  # a term this reading cannot judge: no verdict
        fields[key] = field
    known = {k: v for k, v in condition.items() if fields[k] in situation.given}
    mask = condition_mask(situation.window, known, band_cut=band_cut)
    if mask is None or not bool(mask[0]):
        return None
    lacking = missing | {fields[k] for k in condition if k not in known}
    return Match(MAY_APPLY if lacking else APPLIES, tuple(sorted(lacking)), dict(condition))


def match_rule(situation: Situation, rule: GrimoireEntry, parent: GrimoireEntry | None = None
               ) -> Match | None:
    """How ``rule`` stands in ``situation``: applies, may apply, or None (its condition
    fails there, is outside its strategy, or is not structured). ``parent``: the insight a
    derived rule came from (``curator.cycle.transitions.derived_from``)."""
    claim = rule_claim(rule, parent)
    if claim is None:
        return None
    missing: set[str] = set()
    if claim.strategy is not None:
        if STRATEGY not in situation.given:
            missing.add(STRATEGY)
        elif situation.episode.strategy != claim.strategy:
            return None
    best: Match | None = None
    for condition in rule_conditions(rule, parent):
        found = _holds(situation, condition, claim.band_cut, missing)
        if found is not None and (best is None or _better(found, best)):
            best = found
    return best


def link_events(claim: Claim) -> tuple[str, str] | None:
    """A causal link's two events (cause, effect) as ``event_keys`` names them; None for
    any other claim."""
    cause = claim.condition.get("event")
    if not isinstance(cause, str) or not claim.target.startswith("event:"):
        return None
    return cause, claim.target.removeprefix("event:")


def _occurrences(window: EpisodeWindow, ends: tuple[str, str], strategy: str | None
                 ) -> npt.NDArray[np.bool_]:
    """Which episodes of ``window`` are occurrences of either event, in ``strategy``'s scope
    (None: the episodes written without a strategy, as ``check_causal`` reads a global
    link)."""
    wanted = set(ends)
    scope = condition_mask(window, {}, scope=True, strategy=strategy)
    assert scope is not None  # an empty condition is always readable
    named = np.fromiter((not wanted.isdisjoint(keys) for keys in window.events), dtype=bool,
                        count=window.size)
    out: npt.NDArray[np.bool_] = scope & named
    return out


def _better(a: Match, b: Match) -> bool:
    return (a.match == APPLIES, -len(a.missing)) > (b.match == APPLIES, -len(b.missing))


def covered(rule: GrimoireEntry, parent: GrimoireEntry | None, window: EpisodeWindow
            ) -> npt.NDArray[np.bool_]:
    """The episodes of ``window`` (a mask) that ``rule`` speaks about: its condition (any one
    of ``rule_conditions``) holds for each, read as ``match_rule`` reads a situation with
    every field given; a strategy's claim covers only that strategy's episodes, a global
    claim every strategy's. A causal link ("A is followed by B within L") speaks about
    every occurrence of A and of B, as the curator counts them (``event_keys``; a
    strategy's link that strategy's, a global link those written without one). No episode
    for a rule without a structured condition, an empty condition (it would cover
    everything) or a term this reading cannot judge."""
    out = np.zeros(window.size, dtype=bool)
    claim = rule_claim(rule, parent)
    if claim is None or window.size == 0:
        return out
    ends = link_events(claim)
    if ends is not None:
        return _occurrences(window, ends, claim.strategy)
    for condition in rule_conditions(rule, parent):
        if not condition:
            continue
        mask = condition_mask(window, condition, band_cut=claim.band_cut)
        if mask is not None:
            out |= mask
    if claim.strategy is not None:
        out &= window.strategies == claim.strategy
    return out
