"""Apply the learners' operations to the semantic store, one short writer job at a time.

- ADD → ``knowledge.admit`` (quality score, admission gate, insert / merge /
  quarantine, admission log) as one transaction on the writer thread;
  standard confidence is the provenance's (self-learned: 0.5), SPEC §7.
- UPVOTE / DOWNVOTE → batched votes (``votes.record_votes``), applied by
  the curator cycle, never here.
- EDIT → the entry's claim replaced (the numbers the curator counted kept), its content
  the sentence of the stored numbers (``playbook.entry_sentence``) and its vector that
  sentence's, with a curator delta (op ``edit``, before / after) for the audit trail.
  An EDIT that moves the claim's condition (an hour window 20:00–00:00 become 20:00–23:00)
  recounts ✓ / ✗ over the counted episodes the new condition covers (``_recount``):
  a verdict on the 23:00 episodes was evidence on the old claim, not on this one.
- causal links (category ``causal_link``): the entry as above, plus
  ``discovered`` causal edges from each evidence pair's cause episode to its
  effect episode (at most ``distiller.causal_edge_pairs`` per operation)
  when the link is admitted, merged, upvoted or edited.
- an ADD whose claim the gate earlier merged into (or skipped as a duplicate
  of) another entry holding the same claim (or none) is that entry's UPVOTE;
  an ADD of a claim an archived entry holds brings that entry back (``_revive``:
  one entry per claim, its ✓ / ✗ kept) and is its UPVOTE;
  one it rejected waits until its support has doubled (``alias``);
- the parent episodes of every operation that reached the store are marked
  consolidated.

Embedding and any LLM scoring run on the caller's thread before the writer
job. Must not: decide what to learn (the learners do) or change confidences
other than through the gate's own merge.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from curator.claims import EpisodeWindow, claim_mask
from curator.distiller.operations import Operation, OpKind
from curator.learn.alias import get_alias, set_alias
from curator.learn.votes import record_votes
from curator.views.render import format_duration
from grimoire.context import Context
from grimoire.gate.admit import Proposal, admit
from grimoire.gate.agreement import claim_relation
from grimoire.gate.decay import evidence_confidence
from grimoire.logs import get_logger
from grimoire.records import Category, Claim, EntryStatus, Episode, GrimoireEntry, Provenance
from grimoire.stores.semantic.types import CausalEdge, EdgeKind, EntryFilter
from playbook.render_text import entry_sentence

__all__ = ["UtilityScorer", "apply_operations", "curator_cycle_number", "curator_time",
           "link_weight"]

log = get_logger(__name__)

#: The optional LLM's admission factors for a proposal (None: use the rule-based ones).
UtilityScorer = Callable[[Proposal], Mapping[str, float] | None]
_DECISIONS = ("admitted", "merged", "skipped", "rejected", "quarantined")
_REACHED_STORE = frozenset({"admitted", "merged", "skipped", "quarantined"})
_DERIVED = "derived"  # the tag of a rule the curator parameterized (cycle.transitions)


def curator_cycle_number(ctx: Context) -> int:
    """Cycles the curator has completed (its ``curator_state`` meta), for delta records."""
    state = ctx.semantic.get_meta("curator_state", None)
    cycle = state.get("cycle", 0) if isinstance(state, Mapping) else 0
    return cycle if isinstance(cycle, int) and not isinstance(cycle, bool) and cycle >= 0 else 0


def curator_time(ctx: Context) -> int | None:
    """The data time of the curator's last completed cycle (its ``curator_state`` meta);
    None before the first."""
    state = ctx.semantic.get_meta("curator_state", None)
    at = state.get("last_now") if isinstance(state, Mapping) else None
    return at if isinstance(at, int) and not isinstance(at, bool) else None


def link_weight(op: Operation) -> float:
    """A discovered link's causal strength: the share of A→B follow-ups chance does not explain.

    With P(B follows A) = effect and P(B in any window) = baseline, that share
    is 1 − baseline / effect (the "probability of causation" of a relative
    risk); 0 when B follows A no more often than anywhere.
    """
    effect, base = op.claim.effect, op.claim.baseline
    if effect <= 0.0 or effect <= base:
        return 0.0
    return float(min(1.0, max(0.0, 1.0 - base / effect)))


def _event_time(op: Operation, by_id: Mapping[str, Episode], now: int) -> int:
    times = [by_id[i].timestamp for i in op.parent_episode_ids if i in by_id]
    return max(times) if times else now


def _proposal(op: Operation, by_id: Mapping[str, Episode], now: int) -> Proposal:
    return Proposal(
        category=op.category, content=op.content, provenance=Provenance.SELF_LEARNED,
        tags=op.tags, strategy=op.strategy, regime=op.regime,
        parent_episode_ids=op.parent_episode_ids, claim=op.claim,
        support=max(1, int(op.claim.support)), event_time=_event_time(op, by_id, now),
    )


def _admit(ctx: Context, proposal: Proposal, vector: np.ndarray,
           scores: Mapping[str, float] | None, now: int) -> dict[str, Any]:
    with ctx.semantic.transaction():  # entry, admission-log row and alias: one durable commit
        result = admit(ctx, proposal, vector, llm_scores=scores, now=now)
        if proposal.claim is not None:
            decision = str(result["decision"])
            target = result.get("id") or (result.get("nearest_id") if decision == "skipped"
                                          else None)
            if target is None or decision not in ("merged", "skipped") or _holds(
                    ctx.semantic.get_entry(target), proposal.claim):
                set_alias(ctx, proposal.claim, decision, target, now)
            else:
                # The gate judged by text alone and folded the claim into an entry that
                # states another one: no alias, so it is proposed again next run.
                log.info("learn.alias.refused", claim=proposal.claim.key, entry_id=target)
        return result


def _holds(entry: GrimoireEntry | None, claim: Claim) -> bool:
    """True when ``entry`` can stand for ``claim``: no claim of its own, or the same one."""
    if entry is None or entry.status is EntryStatus.ARCHIVED:
        return False
    return entry.claim is None or claim_relation(claim, entry.claim) == "agree"


def _revive(ctx: Context, claim: Claim, now: int) -> str | None:
    """Writer thread: the archived entry holding exactly ``claim`` (its ``Claim.key``),
    back to candidate, or None when there is none.

    One entry per claim (SPEC §13): a claim pushed out to cold storage (its confidence
    faded below the prune line for a few cycles) and then found again in new episodes
    is the same claim, with the ✓ / ✗ counted for it; a new entry would start again at
    ✓0, and its derived rule with it (the churn of issue 24: one warning dropped and
    re-made on 4 of 10 days). Re-finding is not evidence: counts, confidence and the
    decay clock stay; the curator judges it on its pending episodes and promotion decides
    as for any candidate."""
    with ctx.semantic.transaction():
        found = ctx.semantic.find_by_claim_key(claim.key, EntryFilter(
            statuses=(EntryStatus.ARCHIVED,)))
        if found is None:
            return None
        ctx.semantic.update_entry(dataclasses.replace(
            found, status=EntryStatus.CANDIDATE, consecutive_low_confidence=0, updated_at=now))
        ctx.semantic.add_curator_delta(
            cycle=curator_cycle_number(ctx), op="revive", entry_id=found.id,
            before={"status": found.status.value},
            after={"status": EntryStatus.CANDIDATE.value,
                   "why": "the learner found its claim again in new episodes: the same "
                          "entry, its ✓ / ✗ kept (re-finding is not evidence)"}, now=now)
        set_alias(ctx, claim, "merged", found.id, now)
        return found.id


def _aliased(ctx: Context, op: Operation) -> tuple[str, str | None]:
    """("vote", entry id) when the claim already lives in an entry, ("hold", None) when it
    was rejected and its support has not doubled since, else ("admit", None)."""
    alias = get_alias(ctx, op.claim)
    if alias is None:
        return "admit", None
    if alias.entry_id is not None:
        if _holds(ctx.semantic.get_entry(alias.entry_id), op.claim):
            return "vote", alias.entry_id
        return "admit", None
    if alias.decision == "rejected" and op.claim.support < 2 * alias.support:
        return "hold", None
    return "admit", None


def _edited(entry: GrimoireEntry, op: Operation, now: int) -> GrimoireEntry:
    """``entry`` as the EDIT ``op`` leaves it: the learner's claim (the counted numbers kept
    as below), and the sentence of that claim's stored numbers as its content (the words
    every view shows, ``playbook.entry_sentence``), not the learner's window's."""
    parents = tuple(dict.fromkeys(entry.parent_episode_ids + op.parent_episode_ids))[-200:]
    claim = op.claim
    if entry.claim is not None and entry.claim.target.startswith("event:"):
        # A link's "k of n times" are the occurrences the curator counted, once each; a
        # re-finding on an overlapping window is not evidence and leaves them (issue 11).
        claim = dataclasses.replace(claim, effect=entry.claim.effect,
                                    support=entry.claim.support)
    elif entry.claim is not None and claim.support < entry.claim.support:
        # The episodes the curator already counted stay behind the sentence (issue 11).
        claim = dataclasses.replace(claim, support=entry.claim.support)
    updated = dataclasses.replace(entry, content=op.content, claim=claim,
                                  parent_episode_ids=parents, updated_at=now,
                                  market_regime=op.regime or entry.market_regime)
    return dataclasses.replace(updated, content=entry_sentence(updated))


def _moved(old: Claim | None, new: Claim | None) -> bool:
    """True when an EDIT from ``old`` to ``new`` changes which episodes the claim covers."""
    return (old is not None and new is not None and not new.target.startswith("event:")
            and (old.condition != new.condition or old.strategy != new.strategy
                 or old.band_cut != new.band_cut))


def _recount(ctx: Context, entry: GrimoireEntry, claim: Claim) -> GrimoireEntry:
    """Writer thread: ``entry`` with ✓ / ✗ (and the confidence they give) counted over the
    episodes recorded for it (``entry_evidence``) that ``claim``'s condition covers.

    A verdict is evidence on the condition it was judged on: seven positive swaps at 23:00
    contradicted "swaps lose 20:00–00:00", not "swaps lose 20:00–23:00", and kept as ✗ of
    the narrower claim they would demote a warning no episode of its own hours failed.
    The rows stay recorded (each episode is still counted once for the entry), so a
    condition that moves back counts them again. A condition ``claim_mask`` cannot read
    keeps the counts the entry had."""
    rows = ctx.semantic.list_evidence(entry.id)
    if not rows:
        return entry
    verdict = {episode_id: kind for episode_id, kind, _, _ in rows}
    found = [ep for ep in (ctx.episodes.get(i) for i in verdict) if ep is not None]
    window = EpisodeWindow.of(sorted(found, key=lambda e: (e.timestamp, e.id)))
    mask = claim_mask(window, claim)
    if mask is None:
        return entry
    covered = [window.episodes[i].id for i in np.flatnonzero(mask)]
    ups = sum(1 for i in covered if verdict[i] == "confirm")
    downs = len(covered) - ups
    if (ups, downs) == (entry.validated_count, entry.contradicted_count):
        return entry
    return dataclasses.replace(
        entry, validated_count=ups, contradicted_count=downs,
        confidence=evidence_confidence(entry.provenance, ups, downs, ctx.config.decay))


def _derived_rules(ctx: Context, entry_id: str) -> list[GrimoireEntry]:
    """The rules the curator parameterized from ``entry_id`` (judged by its claim)."""
    rules = ctx.semantic.list_entries(EntryFilter(
        categories=(Category.WARNING, Category.HEURISTIC),
        statuses=tuple(s for s in EntryStatus if s is not EntryStatus.ARCHIVED)))
    return [r for r in rules if r.parent_entry_ids and r.parent_entry_ids[0] == entry_id
            and r.claim is None and _DERIVED in r.tags]


def _counts(entry: GrimoireEntry) -> dict[str, Any]:
    return {"validated_count": entry.validated_count,
            "contradicted_count": entry.contradicted_count, "confidence": entry.confidence}


def _edit_text(ctx: Context, op: Operation) -> str:
    """The content an EDIT will store (embedded before the writer job)."""
    entry = ctx.semantic.get_entry(op.target_entry_id) if op.target_entry_id else None
    return op.content if entry is None else _edited(entry, op, 0).content


def _edit(ctx: Context, op: Operation, vector: np.ndarray, now: int) -> bool:
    target = op.target_entry_id
    assert target is not None  # Operation guarantees it for EDIT
    entry = ctx.semantic.get_entry(target)
    if entry is None or entry.status is EntryStatus.ARCHIVED:
        log.info("learn.edit.skipped", entry_id=target, reason="missing or archived")
        return False
    moved = _moved(entry.claim, op.claim)
    why = ("its condition moved: ✓ / ✗ recounted over the counted episodes the new "
           "condition covers")
    with ctx.semantic.transaction():
        updated = _edited(entry, op, now)
        if moved:
            updated = _recount(ctx, updated, op.claim)
        recounted = ((updated.validated_count, updated.contradicted_count)
                     != (entry.validated_count, entry.contradicted_count))
        ctx.semantic.update_entry(updated, vector)
        ctx.semantic.add_curator_delta(
            cycle=curator_cycle_number(ctx), op="edit", entry_id=target,
            before={"content": entry.content,
                    "claim": entry.claim.to_dict() if entry.claim else None,
                    **(_counts(entry) if recounted else {})},
            after={"content": updated.content, "claim": op.claim.to_dict(),
                   "evidence": op.to_dict()["evidence"],
                   **({**_counts(updated), "why": why} if recounted else {})},
            now=now)
        for rule in _derived_rules(ctx, target) if moved else ():
            again = _recount(ctx, rule, op.claim)
            if again is rule:
                continue
            ctx.semantic.update_entry(dataclasses.replace(again, updated_at=now))
            ctx.semantic.add_curator_delta(
                cycle=curator_cycle_number(ctx), op="recount", entry_id=rule.id,
                before=_counts(rule),
                after={**_counts(again),
                       "why": f"the insight it was derived from ({target}) moved its "
                              "condition: " + why[len("its condition moved: "):]},
                now=now)
    return True


def _edges(ctx: Context, op: Operation, by_id: Mapping[str, Episode], relationship: str | None,
           limit: int, now: int) -> int:
    """Discovered edges for the most recent evidence pairs of a causal-link operation."""
    pairs = [p for p in op.evidence.get("pairs", ()) if len(p) == 2 and p[0] != p[1]][-limit:]
    if not pairs:
        return 0
    within = op.claim.condition.get("within_ms")
    text = relationship or (
        f"followed within {format_duration(float(within))} (discovered, "
        f"{op.claim.support} times)" if isinstance(within, int | float) else "discovered")
    median = op.evidence.get("lag_ms")
    weight = link_weight(op)
    edges = []
    for cause, effect in pairs:
        a, b = by_id.get(cause), by_id.get(effect)
        lag = (b.timestamp - a.timestamp if a is not None and b is not None
               else int(median) if isinstance(median, int | float) else None)
        edges.append(CausalEdge(str(cause), str(effect), EdgeKind.DISCOVERED, weight, text,
                                None if lag is None else max(0, int(lag)),
                                max(1, int(op.claim.support))))

    def write() -> None:
        with ctx.semantic.transaction():
            for edge in edges:
                ctx.semantic.upsert_edge(edge, now=now)
            ctx.semantic.bound_fan_in({e.effect_id for e in edges},
                                      ctx.config.retrieval.causal_max_fan_in)

    ctx.writer.call(write)
    return len(edges)


def apply_operations(
    ctx: Context, ops: Sequence[Operation], episodes: Sequence[Episode], now: int, *,
    utility: UtilityScorer | None = None, relationships: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Apply ``ops``; returns counts of gate decisions, votes, edits, edges, consolidated."""
    by_id = {ep.id: ep for ep in episodes}
    counts: Counter[str] = Counter(
        {k: 0 for k in (*_DECISIONS, "aliased", "held_back", "edited", "edges", "revived")})
    texts = [op.content if op.op is OpKind.ADD else _edit_text(ctx, op)
             for op in ops if op.op in (OpKind.ADD, OpKind.EDIT)]
    vectors = iter(ctx.embedder.embed(texts)) if texts else iter(())  # one batch, off-writer
    votes: dict[str, dict[str, int]] = {}
    consolidated: set[str] = set()
    limit = ctx.config.distiller.causal_edge_pairs
    for op in ops:
        reached = True
        link = op.category is Category.CAUSAL_LINK
        relationship = (relationships or {}).get(op.claim.key)
        if op.op is OpKind.ADD:
            vector = next(vectors)
            route, alias_id = _aliased(ctx, op)
            if route == "admit":  # in cold storage: the same entry, back (one per claim)
                revived = ctx.writer.call(functools.partial(_revive, ctx, op.claim, now))
                if revived is not None:
                    route, alias_id = "vote", revived
                    counts["revived"] += 1
            if route == "vote" and alias_id is not None:
                votes.setdefault(alias_id, {"up": 0, "down": 0})["up"] += 1
                counts["aliased"] += 1
                if link:
                    counts["edges"] += _edges(ctx, op, by_id, relationship, limit, now)
            elif route == "hold":
                counts["held_back"] += 1
                reached = False
            else:
                proposal = _proposal(op, by_id, now)
                scores = utility(proposal) if utility is not None else None
                result = ctx.writer.call(functools.partial(_admit, ctx, proposal, vector,
                                                           scores, now))
                decision = str(result["decision"])
                counts[decision] += 1
                reached = decision in _REACHED_STORE
                if link and decision in ("admitted", "merged"):
                    counts["edges"] += _edges(ctx, op, by_id, relationship, limit, now)
        elif op.op is OpKind.EDIT:
            edited = ctx.writer.call(functools.partial(_edit, ctx, op, next(vectors), now))
            counts["edited"] += int(edited)
            reached = edited
            if link and edited:
                counts["edges"] += _edges(ctx, op, by_id, relationship, limit, now)
        else:
            assert op.target_entry_id is not None
            held = votes.setdefault(op.target_entry_id, {"up": 0, "down": 0})
            held["up" if op.op is OpKind.UPVOTE else "down"] += 1
            if link and op.op is OpKind.UPVOTE:
                counts["edges"] += _edges(ctx, op, by_id, relationship, limit, now)
        if reached:
            consolidated.update(op.parent_episode_ids)
    if votes:
        record_votes(ctx, votes)
    counts["votes"] = sum(v["up"] + v["down"] for v in votes.values())
    if consolidated:
        ids = sorted(consolidated)
        ctx.writer.call(lambda: ctx.semantic.mark_consolidated(ids))
    counts["consolidated"] = len(consolidated)
    return dict(counts)
