"""Claims the new episodes decisively reversed, and what the reversal does (SPEC §8 step 1).

Called by ``curator.cycle.evidence.validate_predictions`` once the cycle's verdicts are in:

- ``failing_runs``: for a claim the new episodes contradict, the verdict of its whole
  failing run (every matching episode since the claim was last confirmed, or learned):
  a rule on a condition a few actions a cycle meet ("swaps on WETH/DAI") is contradicted
  by five episodes at a time, never enough for one cycle to show the opposite decisively,
  so without the run it only wore down, cycle by cycle, for a thousand ticks, and the world
  after the change was never learned (no change point was ever recorded);
- ``find_reversals``: the verdicts that are decisive reversals (Holm-corrected over the
  cycle's decided claims), each read on its failing run when it has one;
- ``settle_reversals``: each entry stating a reversed claim gets the reversal's own
  transition (``transitions.reversal_reason``: its ``valid_until`` is set where the world
  turned, and it leaves active status, so PLAYBOOK.md, at once), its family's change
  point is recorded for the learners (``curator.claims.change_points``), and the claim
  the episodes make now goes through the admission gate, unless it is already known;
  known and itself reversed earlier, it is revived instead (the world turned back).

Confidence is not touched here: it follows the evidence counted for the entry.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from curator.claims import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    EpisodeWindow,
    Verdict,
    change_points,
    judge_claim,
    reversal,
)
from curator.claims.regimes import read_placed
from curator.cycle.state import Change, Cycle, admit_recorded, apply_changes, entries, refresh
from curator.cycle.transitions import is_reversed, reversal_reason
from curator.distiller import stats
from curator.distiller.operations import category_for_claim
from grimoire.gate.admit import Proposal
from grimoire.records import (
    Category,
    Claim,
    EntryStatus,
    GrimoireEntry,
    Provenance,
    Regime,
)
from grimoire.stores.semantic.types import EntryFilter
from playbook.render_text import render_claim

__all__ = ["failing_runs", "find_reversals", "settle_reversals"]

_REGIMES = frozenset(r.value for r in Regime)
_KNOWN = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED,
          EntryStatus.QUARANTINED)
Reversed = tuple[GrimoireEntry, Claim, Verdict]  # the old claim's entry, the claim now, verdict


def settle_reversals(cy: Cycle, owners: list[tuple[str, Verdict]], reversed_list: list[Reversed],
                     pools: dict[str, Any]) -> dict[str, int]:
    """Apply the cycle's reversals: ``owners`` are every entry stating a reversed claim (with
    its verdict), ``reversed_list`` one (entry, claim now, verdict) per reversed claim."""
    counts: dict[str, int] = {}
    when = _episode_times(cy, pools)
    if owners:  # each leaves PLAYBOOK.md by the verdict itself
        counts["reversed"] = len(apply_changes(cy, [
            _reverse_change(cy, entry_id, _changed_at(cy, when, verdict))
            for entry_id, verdict in owners]))
    _record_change_points(cy, reversed_list, when)
    counts.update(_propose_reversals(cy, reversed_list))
    return counts


def _reverse_change(cy: Cycle, entry_id: str, changed_at: int) -> Change:
    """The reversal verdict's own transition (``transitions.reversal_reason``): the claim's
    valid time ends where the new episodes turned (``valid_until``) and, if it was listed,
    it leaves PLAYBOOK.md now. Its confidence is left to its evidence: the ✓ counted
    before the change still stand, so a claim pushed out by voting its confidence to the
    floor would either linger (its old ✓ outweigh one cycle's ✗) or lie about them."""

    def mutate(cur: GrimoireEntry) -> GrimoireEntry | None:
        ended = dataclasses.replace(
            cur, valid_until=changed_at if cur.valid_until is None else cur.valid_until)
        if reversal_reason(ended) is not None:
            ended = dataclasses.replace(ended, status=EntryStatus.DEMOTED)
        return ended

    probe = entries(cy).get(entry_id)
    why = (reversal_reason(dataclasses.replace(probe, valid_until=changed_at))
           if probe is not None else None) or "the new episodes reversed its claim"
    return Change(entry_id, "reverse", mutate, why=why, detail={"valid_until": changed_at})


def _episode_times(cy: Cycle, pools: dict[str, Any]) -> dict[str, int]:
    """Every episode this cycle judged on, by id: its timestamp."""
    when = {ep.id: ep.timestamp for ep in cy.window}
    for pool in pools.values():
        if isinstance(pool, EpisodeWindow):
            when.update((ep.id, ep.timestamp) for ep in pool.episodes)
    return when


def _changed_at(cy: Cycle, when: dict[str, int], verdict: Verdict) -> int:
    """Where a reversed claim's world turned: its first new episode that showed it."""
    times = [when[i] for i in verdict.episode_ids if i in when]
    return min(times) if times else cy.now


def failing_runs(cy: Cycle, owners: dict[str, tuple[str, int | None]],
                 claims: dict[str, Claim], verdicts: dict[str, Verdict | None],
                 pools: dict[str, Any]) -> dict[str, Verdict]:
    """claim key -> the verdict on every matching episode since the claim was last
    confirmed (never confirmed: since it was learned), for the claims this cycle's
    episodes contradict, when that run holds more episodes than the cycle's own verdict
    and says 'wrong' too. ``owners``: claim key -> (the entry stating it, the time it was
    learned up to). Only reversals read it; the evidence counted is the cycle's own.

    The run starts where the claim last held, so it is the stretch of contradiction a
    change point would open; each run is one more chance to reverse a claim, and
    ``find_reversals`` counts it in its family-wise correction as before (one per
    decided claim) with the effect floors of ``claims.reversal`` on top."""
    cfg = cy.ctx.config
    out: dict[str, Verdict] = {}
    for key, (entry_id, learned) in owners.items():
        verdict = verdicts.get(key)
        claim = claims[key]
        if verdict is None or verdict.right is not False or claim.target.startswith("event:"):
            continue
        confirmed = [at for _, kind, _, at in cy.ctx.semantic.list_evidence(entry_id)
                     if kind == "confirm"]
        start = max(confirmed) if confirmed else learned
        if start is None:
            continue
        rates = claim.target in (NEGATIVE_RATE, POSITIVE_RATE)
        window = _run_window(cy, pools, start, actions=rates)
        run = judge_claim(window, claim, cfg.curator.validate_min_support,
                          cfg.curator.validate_max_votes,
                          level=cfg.curator.causal_verdict_level if rates else None,
                          strata=() if rates else cfg.distiller.hour_strata)
        if run is not None and run.right is False and run.n > verdict.n:
            out[key] = run
    return out


def _run_window(cy: Cycle, pools: dict[str, Any], start: int, *, actions: bool,
                ) -> EpisodeWindow:
    """The episodes (only actions, for a rate) later than ``start``: at most
    ``curator.window_episodes`` of the newest, and this cycle's; read once per start."""
    name = f"run:{'actions' if actions else 'all'}@{start}"
    if name not in pools:
        pools[name] = EpisodeWindow.of(read_placed(
            cy.ctx, cy.ctx.config.curator.window_episodes, since=start, actions=actions,
            alongside=cy.window)).after(start)
    window: EpisodeWindow = pools[name]
    return window


def find_reversals(cy: Cycle, claims: dict[str, Claim], verdicts: dict[str, Verdict | None],
                   runs: dict[str, Verdict] | None = None) -> dict[str, Claim]:
    """The claims the new episodes decisively reverse: claim key -> the claim they make now.

    A reversal needs, besides ``claims.reversal`` (wrong, on twice one prediction's
    support, past the baseline by half the claimed gap), that the condition's episodes lie
    on the other side of the rest of the window they were judged in (``Verdict.
    log_p_against``), and that this holds at family-wise ``curator.reversal_alpha`` with
    Holm's step-down over every claim the cycle decided: each decided claim was a chance
    to reverse one, and with dozens of claims judged every cycle a few noisily labelled
    episodes would otherwise write an opposite rule now and then. A claim with a failing
    run (``failing_runs``) is read on the run instead of the cycle's episodes alone."""
    cfg = cy.ctx.config
    candidates: list[tuple[str, Claim, float]] = []
    family = 0
    for key, decided in verdicts.items():
        if decided is None or decided.right is None:
            continue
        family += 1
        verdict = (runs or {}).get(key, decided)
        opposite = reversal(claims[key], verdict, min_support=cfg.curator.validate_min_support,
                            min_effect=cfg.distiller.min_effect,
                            min_rate_gap=cfg.distiller.min_rate_gap)
        if opposite is not None and verdict.log_p_against < 0.0:
            candidates.append((key, opposite, verdict.log_p_against))
    rejected = stats.holm([log_p for _, _, log_p in candidates], cfg.curator.reversal_alpha,
                          m=max(family, len(candidates)))
    # The claim made now carries the p-value of the test that found it (as a learner's
    # claim carries its own): found by a family-wise test, it is listed from the next cycle
    # (``transitions.is_established``) instead of waiting for new episodes to confirm it:
    # a day, for an hour window judged on whole passes.
    return {key: dataclasses.replace(opposite, p_value=math.exp(log_p))
            for (key, opposite, log_p), r in zip(candidates, rejected, strict=True) if r}


def _record_change_points(cy: Cycle, reversed_list: list[tuple[GrimoireEntry, Claim, Verdict]],
                          when: dict[str, int]) -> None:
    """Each reversed claim's family changed at its first matching new episode."""
    if not reversed_list:
        return
    points = {change_points.family(flipped): _changed_at(cy, when, verdict)
              for _, flipped, verdict in reversed_list}
    change_points.record(cy.ctx, points)


def _propose_reversals(cy: Cycle, reversed_list: list[tuple[GrimoireEntry, Claim, Verdict]],
                       ) -> dict[str, int]:
    """Claims the new episodes decisively reversed → the reversed claim, through the gate.

    The gate quarantines it while an old claim is still confident (the firewall);
    ``review_quarantine`` releases it once the old one has fallen.
    """
    counts = {"reversals": 0}
    proposals: list[tuple[GrimoireEntry, Proposal]] = []
    revived: list[Change] = []
    for entry, flipped, verdict in reversed_list:
        known = cy.ctx.semantic.find_by_claim_key(flipped.key, EntryFilter(statuses=_KNOWN))
        if known is not None:  # already known (the learner or an earlier cycle)
            if is_reversed(known):  # the world turned back: its valid time resumes
                revived.append(Change(known.id, "revive", _revive,
                                      why=f"the new episodes reverse {entry.id}, which had "
                                          "reversed it: its claim holds again"))
            continue
        archived = cy.ctx.semantic.find_by_claim_key(
            flipped.key, EntryFilter(statuses=(EntryStatus.ARCHIVED,)))
        if archived is not None:  # one entry per claim: the cold one comes back
            revived.append(Change(archived.id, "revive", _unarchive,
                                  why=f"the new episodes reverse {entry.id} into its claim"))
            continue
        category = category_for_claim(flipped)
        content = (render_claim(flipped, category, "") or
                   render_claim(flipped, Category.INSIGHT, "") or flipped.key)
        regime = flipped.condition.get("regime")
        proposals.append((entry, Proposal(
            category=category, content=content, provenance=Provenance.SELF_LEARNED,
            tags=("reversal", flipped.target.partition(":")[2]), strategy=flipped.strategy,
            regime=Regime(regime) if isinstance(regime, str) and regime in _REGIMES else None,
            parent_episode_ids=verdict.episode_ids[-200:], claim=flipped,
            support=verdict.n, event_time=cy.now)))
    if revived:
        counts["revived"] = len(apply_changes(cy, revived))
    if not proposals:
        return counts
    vectors = cy.ctx.embedder.embed([p.content for _, p in proposals])
    for (old, proposal), vector in zip(proposals, vectors, strict=True):
        why = f"the new episodes reverse {old.id}"
        detail = {"reverses": old.id, "n": proposal.support,
                  "observed": proposal.claim.effect if proposal.claim else None}
        result = cy.ctx.writer.call(functools.partial(
            admit_recorded, cy, proposal, vector, op="reversal", why=why, detail=detail))
        refresh(cy, [result.get("id")])
        counts["reversals"] += 1
        decision = str(result["decision"])
        counts[f"reversal_{decision}"] = counts.get(f"reversal_{decision}", 0) + 1
    return counts


def _unarchive(cur: GrimoireEntry) -> GrimoireEntry | None:
    """An archived claim the episodes show again: a candidate, its ✓ / ✗ kept."""
    if cur.status is not EntryStatus.ARCHIVED:
        return None
    return dataclasses.replace(cur, status=EntryStatus.CANDIDATE, valid_until=None,
                               consecutive_low_confidence=0)


def _revive(cur: GrimoireEntry) -> GrimoireEntry | None:
    """A reversed claim found to hold again: no longer ended (promotion decides the rest)."""
    return dataclasses.replace(cur, valid_until=None) if is_reversed(cur) else None
