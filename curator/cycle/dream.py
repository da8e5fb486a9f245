"""Dreams: replay without a model, when the heartbeat is idle (SPEC §13, seed 004).

A dream here is a bounded replay of the agent's own *older* episodes against the rules it
holds now. One idle slot (``dream(ctx)``; the daemon runs one between ticks on its learning
thread when that thread is free, ``dreams.enabled``) takes the ``dreams.rules_per_slot``
candidate and active rules (warnings, heuristics, insights with a metric or outcome-rate
claim of their own or through the insight they were derived from) dreamt least recently,
and for each:

1. **Replay validation.** It judges the claim, with the curator's own verdict rule
   (``curator.claims.judge_claim``), on up to ``dreams.episodes_per_rule`` episodes older
   than any the rule was found on (before its oldest parent episode), none of them
   counted as its evidence, and none replayed for it before (a per-rule cursor walks back
   in time, slot after slot, until the history is used up).
2. **Counterfactual check.** For an outcome-rate claim about an action ("avoid swap in
   high_vol: 80% negative"), on the same older episodes where the rest of its condition
   held, it compares the outcome rate of the actions that did what the rule is about with
   the rate of those that did not; the rule holds counterfactually when doing it was worse
   (for a warning) or better (for a preferred action) than not doing it, at the curator's
   causal verdict level.

A rule that one check confirms and neither contradicts is **dream-validated**: seed 004's
multipliers, ``strength`` + ``decay.dream_strength`` (0.5, weaker than a live
confirmation's 1) and the ×``decay.dream_multiplier`` (2) half-life (class D), flag
``dream_validated``. A rule a check contradicts and none confirms loses the flag. Dreams
never move confidence, ✓ or ✗: those count live evidence only (SPEC §4, §13). Every change
is in the curator's audit trail (op ``dream``, with both verdicts), so ``explain`` shows it.

A slot never runs beside a curator cycle (it skips when one holds the cycle lock) and
works at the last cycle's data time. The per-rule cursors (how far back each rule was replayed,
in which slot) are meta ``dreams.state``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from curator.claims import NEGATIVE_RATE, POSITIVE_RATE, EpisodeWindow, Verdict, judge_claim
from curator.claims.judge import causal_verdict
from curator.claims.regimes import with_market_regimes
from curator.claims.window import condition_mask
from curator.cycle.evidence import claim_of
from curator.cycle.run import cycle_lock
from curator.cycle.state import Change, Cycle, CycleState, apply_changes, list_all
from curator.cycle.transitions import is_summary
from grimoire.context import Context
from grimoire.gate.decay import dream_validate
from grimoire.records import Category, Claim, EntryStatus, GrimoireEntry

__all__ = ["DREAM_STATE_KEY", "counterfactual", "dream"]

DREAM_STATE_KEY = "dreams.state"
_KINDS = (Category.INSIGHT, Category.HEURISTIC, Category.WARNING)


def counterfactual(window: EpisodeWindow, claim: Claim, min_support: int,
                   level: float) -> tuple[bool | None, dict[str, Any]]:
    """Where the claim's condition (but its action) held: the outcome rate with the action
    vs without it. (verdict, figures); None when the claim names no action or either side
    has fewer than ``min_support`` rated actions."""
    action = claim.condition.get("action")
    if claim.target not in (NEGATIVE_RATE, POSITIVE_RATE) or not isinstance(action, str):
        return None, {}
    rest = {k: v for k, v in claim.condition.items() if k != "action"}
    held = condition_mask(window, rest, scope=True, strategy=claim.strategy,
                          band_cut=claim.band_cut)
    if held is None:
        return None, {}
    rated = held & window.rated
    did = window.actions.get(action, np.zeros(window.size, dtype=bool))
    hits = window.negative if claim.target == NEGATIVE_RATE else window.positive
    n_with, n_without = int((rated & did).sum()), int((rated & ~did).sum())
    k_with, k_without = int((rated & did & hits).sum()), int((rated & ~did & hits).sum())
    figures = {"with": [k_with, n_with], "without": [k_without, n_without]}
    if n_with < min_support or n_without < min_support:
        return None, figures
    rate_without = k_without / n_without
    sign = 1.0 if claim.direction == "higher" else -1.0
    if (claim.effect - rate_without) * sign <= 0:
        # not acting went as the rule says acting goes: the action is not what made
        # the difference the rule is about
        return False, figures
    return causal_verdict(k_with, n_with, claim.effect, rate_without, level), figures


def _found_from(ctx: Context, entry: GrimoireEntry, via: GrimoireEntry | None) -> int:
    """The time of the oldest episode the rule was found on (its or its insight's parents),
    else the time it was learned."""
    ids = [*entry.parent_episode_ids, *(via.parent_episode_ids if via is not None else ())]
    times = [e.timestamp for e in (ctx.episodes.get(i) for i in dict.fromkeys(ids))
             if e is not None]
    return min(times) if times else (entry.valid_from or entry.created_at)


def _judge(cy: Cycle, entry: GrimoireEntry, claim: Claim, episodes: list[Any]
           ) -> tuple[Verdict | None, bool | None, dict[str, Any]]:
    cfg = cy.ctx.config
    window = EpisodeWindow.of(with_market_regimes(cy.ctx, episodes))
    support, level = cfg.curator.validate_min_support, cfg.curator.causal_verdict_level
    outcome = claim.target in (NEGATIVE_RATE, POSITIVE_RATE)
    replay = judge_claim(window, claim, support, 1, level=level if outcome else None,
                         reference=window, strata=cfg.distiller.hour_strata,
                         least_gap=cfg.distiller.min_rate_gap if entry.validated_count else 0.0)
    cf, figures = counterfactual(window, claim, support, level)
    return replay, cf, figures


def _change(cy: Cycle, entry: GrimoireEntry, replay: Verdict | None, cf: bool | None,
            figures: Mapping[str, Any], span: tuple[int, int]) -> tuple[str, Change | None]:
    verdicts = [v for v in ((replay.right if replay is not None else None), cf)
                if v is not None]
    if True in verdicts and False not in verdicts:
        outcome = "validated"
    elif False in verdicts and True not in verdicts:
        outcome = "contradicted"
    else:
        return "undecided", None
    if outcome == "contradicted" and not entry.dream_validated:
        return outcome, None
    decay = cy.ctx.config.decay

    def mutate(cur: GrimoireEntry) -> GrimoireEntry:
        if outcome == "validated":
            return dream_validate(cur, decay)
        return dataclasses.replace(cur, dream_validated=False)

    detail = {"replay": replay.to_dict() if replay is not None else None,
              "counterfactual": {"right": cf, **figures}, "episodes_from": span[0],
              "episodes_until": span[1]}
    why = (f"dream: {outcome} on older episodes"
           + (f" (replay {'held' if replay.right else 'failed'} over {replay.n})"
              if replay is not None and replay.right is not None else "")
           + (f" (counterfactual {'held' if cf else 'failed'})" if cf is not None else ""))
    return outcome, Change(entry.id, "dream", mutate, why=why, detail=detail)


def dream(ctx: Context, now: int | None = None) -> dict[str, Any]:
    """One idle slot of dreaming (bounded: ``dreams.rules_per_slot`` rules, at most
    ``dreams.episodes_per_rule`` episodes each). Returns its counts."""
    counts: dict[str, Any] = {"rules": 0, "validated": 0, "contradicted": 0, "undecided": 0,
                              "exhausted": 0, "episodes": 0}
    lock = cycle_lock(ctx)
    if not lock.acquire(blocking=False):
        return {"skipped": "a curator cycle is running"}
    try:
        state = CycleState.load(ctx)
        # the data's own time (the last cycle's), the clock's only before any cycle
        at = state.last_now if state.last_now is not None else (
            int(now) if now is not None else ctx.now())
        cy = Cycle(ctx=ctx, now=at, number=state.cycle, previous=state, window=[])
        cfg = ctx.config.dreams
        saved = ctx.semantic.get_meta(DREAM_STATE_KEY, {}) or {}
        memo: dict[str, Any] = dict(saved.get("rules") or {})
        slot = int(saved.get("slots") or 0) + 1
        counts["slot"] = slot
        by_id = {e.id: e for e in list_all(cy, tuple(EntryStatus))}
        rules = []
        for entry in list_all(cy, (EntryStatus.CANDIDATE, EntryStatus.ACTIVE), _KINDS):
            found = claim_of(entry, by_id)
            if (found is None or is_summary(entry) or found[0].target.startswith("event:")
                    or (memo.get(entry.id) or {}).get("done")):
                continue
            rules.append((entry, found))
        # least recently dreamt first (never: first of all), so every rule gets its turn
        rules.sort(key=lambda r: ((memo.get(r[0].id) or {}).get("slot", 0), r[0].id))
        changes: list[Change] = []
        for entry, (claim, via_id, _) in rules[:cfg.rules_per_slot]:
            counts["rules"] += 1
            mine = memo.get(entry.id) or {}
            via = by_id.get(via_id) if via_id else None
            until = int(mine.get("until") or _found_from(ctx, entry, via))
            skip = set(entry.parent_episode_ids) | {
                e for e, _, _, _ in ctx.semantic.list_evidence(entry.id)}
            older = ctx.episodes.recent(cfg.episodes_per_rule, until=until)
            episodes = [e for e in older if e.id not in skip]
            if not older:
                memo[entry.id] = {"until": until, "slot": slot, "done": True}
                counts["exhausted"] += 1
                continue
            memo[entry.id] = {"until": older[0].timestamp, "slot": slot}
            counts["episodes"] += len(episodes)
            replay, cf, figures = _judge(cy, entry, claim, episodes)
            outcome, change = _change(cy, entry, replay, cf, figures,
                                      (older[0].timestamp, until))
            counts[outcome] += 1
            if change is not None:
                changes.append(change)
        apply_changes(cy, changes)

        def save() -> None:
            live = set(by_id)
            ctx.semantic.set_meta(DREAM_STATE_KEY, {
                "slots": slot, "rules": {k: v for k, v in memo.items() if k in live}})

        ctx.writer.call(save)
        return counts
    finally:
        lock.release()
