"""``rules.applicable``: the active rules whose structured condition holds for the situation
the agent is in (SPEC §13, decision time), warnings first.

The agent describes the decision in front of it with the fields of an action episode
(``SITUATION_FIELDS``: its tool or actions, token pair, chain, regime, strategy, metrics,
and the time). Each active rule's claim condition is checked against those fields by
``curator.claims.applies`` (the same reading of a condition the curator judges claims
with), so a situation is matched on what it is, not on how it is worded. A rule whose
condition needs a field the situation lacks is returned as ``may_apply`` with the fields
it needs; rules without a structured condition (told ones, causal links) are left to
``retrieve``'s similarity.

Order: rules that apply before rules that may apply; within each, warnings first; then by
``weight`` = effective confidence × effect size, where effect size is the claim's
|effect − baseline| / max(|effect|, |baseline|) (a unit-free relative difference in
[0, 1], for outcome rates and metric levels alike); ties by id. A rule that gives the same
advice as one above it (same category, condition and strategy, matched the same way) is
folded into that one's ``also`` (``same_advice``): one place, several reasons; ``limit``
counts places.

Time: ``timestamp`` is the situation's own time (data time, unix ms): hour-of-day
conditions are judged on it and confidences decayed to it. Without one, an hour-window
rule may apply (needs ``timestamp``) and confidences are decayed to the store's data time
(``store_time``: the newest episode), as ``entry.list`` and ``explain`` show them; the
wall clock is never read once the store holds an episode.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from curator.claims.applies import APPLIES, Match, Situation, covered, match_rule, rule_claim
from curator.claims.window import EpisodeWindow
from curator.cycle.state import store_time
from curator.cycle.transitions import derived_from
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.gate.decay import effective_confidence
from grimoire.records import Category, Claim, EntryStatus, GrimoireEntry, parse_enum
from grimoire.records.episode import episode_from_params
from grimoire.retrieval.rules import Advice, AppliedRule
from grimoire.retrieval.stages.params import MAX_K
from grimoire.retrieval.stages.records import episode_by_id
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["DEFAULT_CATEGORIES", "SITUATION_FIELDS", "advice_for", "applicable_rules",
           "covering", "effect_size",
           "parse_situation", "rules_applicable", "same_advice", "situation_text"]

SITUATION_FIELDS = ("tool", "actions", "token_pair", "chain", "regime", "strategy", "metrics",
                    "timestamp")
DEFAULT_CATEGORIES = (Category.WARNING, Category.HEURISTIC)
# what retrieve's lessons-first step lifts above the episodes it speaks about
COVERING_CATEGORIES = (*DEFAULT_CATEGORIES, Category.CAUSAL_LINK)
MAX_LIMIT = 100
_RULES_KEY = "advise.rules"  # ctx.extras: the active rules under the read mark they were read at
_Rules = tuple[list[GrimoireEntry], dict[str, GrimoireEntry | None]]  # rules, their insights


def parse_situation(value: object, field: str = "situation") -> Situation:
    """Validate a situation; a bad field raises ValidationError naming it
    (``situation.regime``), an unknown one names the fields a situation has."""
    if not isinstance(value, Mapping):
        raise ValidationError("must be an object with the fields of an action episode: "
                              + ", ".join(SITUATION_FIELDS), field=field)
    unknown = sorted(str(k) for k in value if k not in SITUATION_FIELDS)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; a situation has "
                              + ", ".join(SITUATION_FIELDS), field=field)
    given = {k: v for k, v in value.items() if v is not None}
    if not given:
        raise ValidationError("give at least one of " + ", ".join(SITUATION_FIELDS),
                              field=field)
    try:
        episode = episode_from_params({**given, "text": "situation", "type": "action"},
                                      id="situation", now_ms=0)
    except ValidationError as exc:
        message = str(exc)
        if exc.field and message.startswith(f"{exc.field}: "):
            message = message[len(exc.field) + 2:]
        raise ValidationError(message, field=f"{field}.{exc.field}" if exc.field else field
                              ) from None
    if "actions" in given and not all(episode.actions):
        raise ValidationError("must be a list of non-empty strings", field=f"{field}.actions")
    return Situation.of(episode, given)


def situation_text(situation: Situation) -> str:
    """The situation in a few words ("swap on WETH/USDC · regime high_vol"): the query
    ``retrieve`` embeds when it is given no text, and the context block's heading."""
    e, given = situation.episode, situation.given
    parts: list[str] = []
    if e.actions:
        parts.append(" ".join(e.actions))
    if "tool" in given:
        parts.append(f"with {e.tool}")
    if "token_pair" in given:
        parts.append(f"on {e.token_pair}")
    if "chain" in given:
        parts.append(f"on chain {e.chain}")
    if "regime" in given and e.regime is not None:
        parts.append(f"regime {e.regime.value}")
    if "strategy" in given:
        parts.append(f"strategy {e.strategy}")
    parts.extend(f"{name} {value:g}" for name, value in sorted(e.metrics.items()))
    if "timestamp" in given:
        moment = datetime.fromtimestamp(e.timestamp / 1000, tz=UTC)
        parts.append(f"at {moment.strftime('%Y-%m-%d %H:%M UTC')}")
    return " · ".join(parts)


def effect_size(claim: Claim) -> float:
    """|effect − baseline| / max(|effect|, |baseline|): 0 (no difference) to 1."""
    scale = max(abs(claim.effect), abs(claim.baseline))
    return 0.0 if scale == 0.0 else min(1.0, abs(claim.effect - claim.baseline) / scale)


def _categories(value: object) -> tuple[Category, ...]:
    if value is None:
        return DEFAULT_CATEGORIES
    if not isinstance(value, list | tuple) or not value:
        raise ValidationError("must be a non-empty list of categories", field="categories")
    return tuple(dict.fromkeys(parse_enum(Category, v, "categories") for v in value))


def _applied(rule: GrimoireEntry, parent: GrimoireEntry | None, found: Match, now: int,
             ctx: Context) -> AppliedRule:
    claim = rule_claim(rule, parent)
    assert claim is not None  # match_rule found a condition, so the rule has a claim
    confidence = effective_confidence(rule, now, ctx.config.decay)
    size = effect_size(claim)
    return AppliedRule(rule, found.match, found.missing, found.condition, claim, confidence,
                       size, confidence * size, derived_from(rule))


def _active_rules(ctx: Context, categories: tuple[Category, ...]) -> _Rules:
    """The active rules of ``categories`` and the insights the derived ones stand on.

    Kept in ``ctx.extras`` under the semantic store's entries mark, so the agent's calls
    between two changes to the entries decode the rows once (an agent asks thousands of
    times a day; the rules change at a curator cycle or an outcome, while every retrieval
    commits its own log row): the mark moves with every write to an entry, so a kept list
    is never older than what a read would return."""
    mark = ctx.semantic.entries_mark()
    held = ctx.extras.get(_RULES_KEY)
    kept: dict[tuple[Category, ...], _Rules] = (
        held[1] if mark is not None and held is not None and held[0] == mark else {})
    if categories in kept:
        return kept[categories]
    rules = ctx.semantic.list_entries(
        EntryFilter(statuses=(EntryStatus.ACTIVE,), categories=categories), limit=None)
    parents: dict[str, GrimoireEntry | None] = {}
    for rule in rules:
        parent_id = derived_from(rule) if rule.claim is None else None
        if parent_id is not None and parent_id not in parents:
            parents[parent_id] = ctx.semantic.get_entry(parent_id)
    if mark is not None:  # one list per set of categories asked for (advise, covering)
        ctx.extras[_RULES_KEY] = (mark, {**kept, categories: (rules, parents)})
    return rules, parents


def applicable_rules(ctx: Context, situation: Situation,
                     categories: Sequence[Category] = DEFAULT_CATEGORIES, *,
                     limit: int = 10, may_apply: bool = True) -> list[AppliedRule]:
    """The active rules of ``categories`` that apply (or may apply) to ``situation``, in
    the module's order, at most ``limit``."""
    rules, parents = _active_rules(ctx, tuple(categories))
    now = situation.episode.timestamp if "timestamp" in situation.given else store_time(ctx)
    found: list[AppliedRule] = []
    for rule in rules:
        parent_id = derived_from(rule) if rule.claim is None else None
        parent = parents.get(parent_id) if parent_id is not None else None
        match = match_rule(situation, rule, parent)
        if match is None or (match.match != APPLIES and not may_apply):
            continue
        found.append(_applied(rule, parent, match, now, ctx))
    found.sort(key=lambda r: (r.match != APPLIES, r.entry.category is not Category.WARNING,
                              -r.weight, r.entry.id))
    return same_advice(found)[:limit]


def same_advice(rules: Sequence[AppliedRule]) -> list[AppliedRule]:
    """``rules`` (in order) with each one that gives the same advice as one before it folded
    into that one's ``also``: the same category (avoid / do), the same condition in the same
    strategy, matched the same way. "Swaps in high_vol: negative outcomes 2% (vs 44%)" and
    "... positive outcomes 97% (vs 77%)" are one lesson read from two outcomes; served apart,
    they took two of the agent's first places from advice it had not heard."""
    leads: dict[tuple[Any, ...], int] = {}
    groups: list[list[AppliedRule]] = []
    for rule in rules:
        key = (rule.match, rule.missing, rule.entry.category, rule.claim.strategy,
               json.dumps(rule.claim.condition, sort_keys=True, default=str),
               rule.claim.band_cut)
        if key in leads:
            groups[leads[key]].append(rule)
        else:
            leads[key] = len(groups)
            groups.append([rule])
    return [g[0] if len(g) == 1 else dataclasses.replace(g[0], also=tuple(g[1:]))
            for g in groups]


def rules_applicable(ctx: Context, situation: object, *, categories: object = None,
                     limit: object = 10, may_apply: object = True) -> dict[str, Any]:
    """The ``rules.applicable`` method: validate, match, answer."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"must be an integer in [1, {MAX_LIMIT}]", field="limit")
    if not isinstance(may_apply, bool):
        raise ValidationError("must be true or false", field="may_apply")
    cats = _categories(categories)
    sit = parse_situation(situation)
    found = applicable_rules(ctx, sit, cats, limit=limit, may_apply=may_apply)
    return {"situation": situation_text(sit), "given": sorted(sit.given),
            "rules": [r.to_dict() for r in found],
            "applies": sum(1 for r in found if r.match == APPLIES),
            "may_apply": sum(1 for r in found if r.match != APPLIES)}


def advice_for(ctx: Context, params: Mapping[str, Any]
               ) -> tuple[Advice, dict[str, Any]]:
    """For ``retrieve`` with a ``situation``: the rules to serve first, and the other params
    (the situation in words as the query when none is given; its regime as the query's
    regime, which ranks, when none is given)."""
    rest = {k: v for k, v in params.items() if k != "situation"}
    sit = parse_situation(params["situation"])
    text = situation_text(sit)
    rest.setdefault("query", text)
    if "regime" in sit.given and sit.episode.regime is not None:
        rest.setdefault("regime", sit.episode.regime.value)
    rules = applicable_rules(ctx, sit, limit=MAX_K)
    return Advice(text, tuple(rules)), rest


def covering(ctx: Context, entry_ids: Collection[str], episode_ids: Sequence[str]
             ) -> dict[str, list[str]]:
    """For ``retrieve``'s lessons-first step: of the active rules and causal links among
    ``entry_ids``, each one's episodes among ``episode_ids`` its structured condition holds
    for, or a link's events (``curator.claims.applies.covered``), in ``episode_ids``'
    order; those covering none are left out. Read through the rule cache (``_active_rules``)
    and the pipeline's episode cache, so a retrieval decodes nothing new between two
    commits."""
    if not entry_ids or not episode_ids:
        return {}
    rules, parents = _active_rules(ctx, COVERING_CATEGORIES)
    wanted = [r for r in rules if r.id in entry_ids]
    if not wanted:
        return {}
    episodes = [e for e in (episode_by_id(ctx, i) for i in episode_ids) if e is not None]
    window = EpisodeWindow.of(episodes)
    out: dict[str, list[str]] = {}
    for rule in wanted:
        parent_id = derived_from(rule) if rule.claim is None else None
        mask = covered(rule, parents.get(parent_id) if parent_id is not None else None, window)
        if mask.any():
            out[rule.id] = [episodes[i].id for i in np.flatnonzero(mask).tolist()]
    return out
