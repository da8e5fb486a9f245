"""Curator phases that weigh stored claims against new evidence (SPEC §8 steps 1 and 6).

- ``validate_predictions`` (step 1): every metric or outcome-rate claim (and
  every rule derived from one, through its parent's claim; a metric band at
  the cut point the claim states) is judged against
  the episodes that arrived since the last cycle (``curator.claims``), and, when
  they do not decide it, on all its pending episodes pooled (those after its
  evidence was last counted: a daily two-hour window gives two a cycle); a claim on
  an hour window not yet borne out only once a whole pass of the window has ended.
  One definition of evidence (issue 11): the verdict's episodes are recorded
  per entry (``entry_evidence``) and only those never counted for the entry
  are evidence; ✓ / ✗ grow by exactly that many episodes, confidence is the
  function of them and provenance (``decay.evidence_confidence``, SPEC §13),
  and the claim's numbers become running totals over them. The learners'
  UPVOTE / DOWNVOTE operations (re-findings on overlapping windows, meta
  ``pending_votes``) are consumed in the same transaction and logged, never
  counted. A confirmation restarts the decay clock (SPEC §4). A claim the new episodes
  decisively *reverse* (``claims.reversal``: the opposite now holds, on
  at least twice the support of one prediction; ``curator.cycle.reversals``)
  leaves PLAYBOOK.md by that verdict itself (its valid time ends there,
  ``transitions.reversal_reason``), and the rules derived from it follow it out,
  at once instead of lingering until days of scattered evidence wear them
  down. The reversed claim is proposed through the admission gate, and the
  family's change point is recorded (``curator.claims.change_points``) so that no
  learner votes on it from a window that still holds the old world.
- ``cross_reference_causal`` (step 6): every causal link ("A is followed by
  B within L") is judged on the occurrences of A whose lag window closed in
  the last ``curator.causal_lookback_ms`` (pooled, so a rare cause is judged
  at all; only occurrences never counted for the link are new evidence, see
  ``link_change``: a followed one is a ✓, an unfollowed one a ✗, and the
  sentence's "k of n times" are the running totals over them).
  Each followed occurrence closed this cycle adds a ``discovered`` edge
  between the two episodes.

Both compute from a read snapshot and apply through ``apply_changes``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from curator.claims import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    CausalCheck,
    EpisodeWindow,
    EventIndex,
    Verdict,
    check_causal,
    judge_claim,
    last_pass_start,
)
from curator.claims.regimes import read_placed, with_market_regimes
from curator.cycle.reversals import failing_runs, find_reversals, settle_reversals
from curator.cycle.state import (
    LIVE,
    Change,
    Cycle,
    apply_changes,
    list_all,
    pending_votes,
)
from curator.cycle.transitions import derived_from
from curator.views.render import band_cut_in
from grimoire.context import Context
from grimoire.gate.decay import evidence_confidence
from grimoire.records import (
    Category,
    Claim,
    EntryStatus,
    GrimoireEntry,
)
from grimoire.stores.semantic.types import CausalEdge, EdgeKind

__all__ = ["claim_of", "cross_reference_causal", "link_change", "validate_predictions",
           "vote_change"]


def vote_change(cy: Cycle, entry_id: str, verdict: Verdict | None, *, op: str, why: str,
                votes: tuple[int, int] = (0, 0), consume: bool = False,
                own_claim: bool = True) -> Change:
    """One entry's evidence of this cycle (issue 11: one definition of evidence).

    The verdict's episodes are recorded for the entry (``SemanticStore.record_evidence``);
    only those never counted for it before are evidence: ✓ / ✗ grow by exactly that many
    episodes, and confidence is then the function of them and the entry's provenance
    (``decay.evidence_confidence``), never a step per vote; no new evidence, no change.
    A confirmation restarts the decay clock (age is applied on read). The learners'
    batched UPVOTEs / DOWNVOTEs (``votes``) are re-findings of the same regularity on
    overlapping windows: they are consumed and logged, never counted. With ``own_claim``,
    the claim's numbers become the running totals over every episode it was judged on, so
    the sentence PLAYBOOK.md shows always cites at least the episodes behind ✓ and ✗."""
    cfg = cy.ctx.config.decay
    now = cy.now
    semantic = cy.ctx.semantic
    decided = verdict is not None and verdict.right is not None
    judged = decided and verdict is not None and verdict.observed is not None

    def mutate(cur: GrimoireEntry) -> GrimoireEntry:
        assert verdict is not None or not (decided or judged)
        new: list[str] = []
        if verdict is not None and decided:
            kind = "confirm" if verdict.right else "contradict"
            new = semantic.record_evidence(cur.id, verdict.episode_ids, kind,
                                           cycle=cy.number, now=now)
        if not new or verdict is None:
            return cur
        right = verdict.right is True
        ups = cur.validated_count + (len(new) if right else 0)
        downs = cur.contradicted_count + (0 if right else len(new))
        claim = cur.claim
        if own_claim and claim is not None and judged and verdict.observed is not None:
            total = claim.support + len(new)
            effect = (claim.effect * claim.support + verdict.observed * len(new)) / total
            claim = dataclasses.replace(claim, effect=float(effect), support=total)
        return dataclasses.replace(
            cur, confidence=evidence_confidence(cur.provenance, ups, downs, cfg),
            validated_count=ups, contradicted_count=downs,
            last_accessed_at=max(cur.last_accessed_at, now) if right else cur.last_accessed_at,
            claim=claim)

    detail = {**(verdict.to_dict() if verdict is not None else {}),
              **({"learner_upvotes_not_counted": votes[0],
                  "learner_downvotes_not_counted": votes[1]} if votes != (0, 0) else {})}
    return Change(entry_id, op, mutate, why=why, detail=detail,
                  consume=votes if consume else None)


def link_change(cy: Cycle, entry_id: str, check: CausalCheck, *, why: str) -> Change:
    """One causal link's evidence of this cycle, counted per lead occurrence (issue 11).

    Each occurrence of the lead event is recorded once for the link: ``confirm`` when the
    follow-up came within the lag, ``contradict`` when it did not. ✓ / ✗ grow by exactly
    the occurrences never counted before, and the claim's totals (its sentence's "k of n
    times") take them in: n grows by the new occurrences, k by the new followed ones. So
    ✓ is the followed occurrences counted and can never exceed the k (nor the n) the
    sentence cites. Confidence is then the function of ✓ / ✗ and provenance
    (``decay.evidence_confidence``); a pooled verdict that holds restarts the decay clock.
    No occurrence new: no change."""
    cfg = cy.ctx.config.decay
    now = cy.now
    semantic = cy.ctx.semantic
    verdict = check.verdict
    followed = list(dict.fromkeys(c for c, _, _ in check.pairs))
    missed = [i for i in dict.fromkeys(verdict.episode_ids) if i not in set(followed)]

    def mutate(cur: GrimoireEntry) -> GrimoireEntry:
        held = semantic.record_evidence(cur.id, followed, "confirm", cycle=cy.number, now=now)
        failed = semantic.record_evidence(cur.id, missed, "contradict", cycle=cy.number,
                                          now=now)
        fresh = len(held) + len(failed)
        if fresh == 0:
            return cur
        claim = cur.claim
        if claim is not None:
            hits = claim.effect * claim.support + len(held)
            total = claim.support + fresh
            claim = dataclasses.replace(claim, effect=hits / total, support=total)
        ups, downs = cur.validated_count + len(held), cur.contradicted_count + len(failed)
        gain = verdict.right is True
        return dataclasses.replace(
            cur, confidence=evidence_confidence(cur.provenance, ups, downs, cfg),
            validated_count=ups, contradicted_count=downs,
            last_accessed_at=max(cur.last_accessed_at, now) if gain else cur.last_accessed_at,
            claim=claim)

    return Change(entry_id, "causal_check", mutate, why=why, detail=verdict.to_dict())


def _claim_of(entry: GrimoireEntry, by_id: dict[str, GrimoireEntry],
              ) -> tuple[Claim, str | None, int | None] | None:
    """The claim ``entry`` is judged by (its own, or its parent insight's), the parent's id,
    and the time of the last episode the claim was learned from (``valid_from``: the
    newest episode behind it; None: not known, every episode is new)."""
    if entry.claim is not None:
        return _with_band_cut(entry.claim, entry), None, entry.valid_from
    # Only the insight it was derived from: a parent a merge added later states another
    # claim ("low_vol" merged into a "high_vol" warning), and judging the rule by it counted
    # that claim's episodes under this rule's sentence.
    source = derived_from(entry)
    parent = by_id.get(source) if source is not None else None
    if parent is not None and parent.claim is not None:
        return _with_band_cut(parent.claim, parent), parent.id, parent.valid_from
    return None


def claim_of(entry: GrimoireEntry, by_id: dict[str, GrimoireEntry],
             ) -> tuple[Claim, str | None, int | None] | None:
    """The claim ``entry`` is judged by, the insight it comes through (or None) and the
    time it was learned up to (see ``_claim_of``): what the dreams replay too."""
    return _claim_of(entry, by_id)


def _with_band_cut(claim: Claim, owner: GrimoireEntry) -> Claim:
    """A band claim stored before ``Claim.band_cut`` was kept states its cut only in its
    sentence ("when gas is above 31.2 gwei"): read from there, it is judged like any other
    (unreadable: no verdict, as before)."""
    band = claim.condition.get("metric_band")
    if band is None or claim.band_cut is not None:
        return claim
    cut = band_cut_in(owner.content, band)
    return claim if cut is None else dataclasses.replace(claim, band_cut=cut)


def _why(verdict: Verdict | None, via: str | None, votes: tuple[int, int]) -> str:
    parts = []
    if verdict is not None and verdict.right is not None:
        observed = "n/a" if verdict.observed is None else f"{verdict.observed:.4g}"
        parts.append(("reversed: " if verdict.reversed else "") +
                     f"{'held' if verdict.right else 'failed'}: observed {observed} over "
                     f"{verdict.n} new episodes vs claimed {verdict.effect:.4g} (baseline "
                     f"{verdict.baseline:.4g})" + (f", through insight {via}" if via else ""))
    if votes != (0, 0):
        parts.append(f"learners re-found it {votes[0] + votes[1]}x on overlapping windows "
                     "(not evidence, not counted)")
    return "; ".join(parts)


def validate_predictions(cy: Cycle) -> dict[str, Any]:
    """Step 1: judge every metric / outcome-rate claim on the new episodes, and net them with
    the learners' batched votes, once per entry."""
    counts = {"judged": 0, "right": 0, "wrong": 0, "undecided": 0, "voted": 0, "upvotes": 0,
              "downvotes": 0}
    votes = pending_votes(cy.ctx)
    if not cy.window and not votes:
        return counts
    window = EpisodeWindow.of(with_market_regimes(cy.ctx, cy.window))
    pools: dict[str, Any] = {}  # pending episodes / actions, the lookback, read on first use
    entries = list_all(cy, (*LIVE, EntryStatus.QUARANTINED))
    by_id = {e.id: e for e in entries}
    decided: dict[str, tuple[Verdict, str | None]] = {}
    reversed_claims: dict[str, tuple[GrimoireEntry, Claim, Verdict]] = {}
    # one judgement per claim and evidence time (parent and child share it)
    verdicts: dict[str, Verdict | None] = {}
    judged: list[tuple[GrimoireEntry, str | None, str]] = []
    claims: dict[str, Claim] = {}
    reversed_owners: list[tuple[str, Verdict]] = []  # every entry stating a reversed claim
    pending: dict[str, tuple[Claim, int | None]] = {}
    owners: dict[str, tuple[str, int | None]] = {}  # claim key -> its own entry, learned at
    found_claims = [(entry, _claim_of(entry, by_id)) for entry in entries] if cy.window else []
    counted_at = cy.ctx.semantic.last_evidence_at(
        [e.id for e, found in found_claims if found is not None])
    borne_out: set[str] = set()  # claim keys an entry stating them has ✓ for
    for entry, found in found_claims:
        if found is None or found[0].target.startswith("event:"):
            continue
        claim, via, learned = found
        since = _pending_since(learned, counted_at.get(entry.id))
        key = f"{claim.key}@{since}"
        judged.append((entry, via, key))
        pending.setdefault(key, (claim, since))
        if entry.validated_count > 0:
            borne_out.add(key)
        if via is None:
            owners.setdefault(key, (entry.id, learned))
    pools["since"] = _oldest(since for _, since in pending.values())
    for key, (claim, since) in pending.items():
        claims[key] = claim
        verdicts[key] = _judge(cy, window, claim, pools, since, borne_out=key in borne_out)
    runs = failing_runs(cy, owners, claims, verdicts, pools)
    flipped = find_reversals(cy, claims, verdicts, runs)  # key -> the claim made now
    for key in flipped:  # counted as the evidence it is; the reversal is its own transition
        verdict_now = verdicts[key]
        assert verdict_now is not None
        verdicts[key] = dataclasses.replace(verdict_now, reversed=True)
    for entry, via, key in judged:
        verdict = verdicts[key]
        if verdict is None:
            continue
        counts["judged"] += 1
        if verdict.right is None:
            counts["undecided"] += 1
            continue
        counts["right" if verdict.right else "wrong"] += 1
        decided[entry.id] = (verdict, via)
        if via is None and key in flipped:
            shown = runs.get(key, verdict)  # the change began where its failing run did
            reversed_claims.setdefault(key, (entry, flipped[key], shown))
            reversed_owners.append((entry.id, shown))
    changes: list[Change] = []
    for entry_id in [*decided, *sorted(set(votes) - set(decided))]:
        verdict, via = decided.get(entry_id, (None, None))
        held = votes.get(entry_id, (0, 0))
        counts["voted"] += int(entry_id in votes)
        counts["upvotes"] += held[0]
        counts["downvotes"] += held[1]
        changes.append(vote_change(
            cy, entry_id, verdict, op="validate" if entry_id in decided else "votes",
            why=_why(verdict, via, held), votes=held, consume=entry_id in votes,
            own_claim=via is None))
    apply_changes(cy, changes)
    counts.update(settle_reversals(cy, reversed_owners, list(reversed_claims.values()), pools))
    return counts


def _pending_since(learned: int | None, counted_at: int | None) -> int | None:
    """The time after which a claim's matching episodes are its pending evidence: the later
    of the newest episode it was learned from and the cycle time its evidence was last
    counted at (every matching episode seen by then was counted). None: every episode."""
    times = [t for t in (learned, counted_at) if t is not None]
    return max(times) if times else None


def _oldest(times: Any) -> int | None:
    values = list(times)
    return None if not values or any(t is None for t in values) else min(values)


def _pending_pool(cy: Cycle, pools: dict[str, EpisodeWindow], name: str) -> EpisodeWindow:
    """The episodes (``name`` "actions": only the actions) not yet judged for the claims of
    this cycle: those after the oldest claim's pending time (``pools["since"]``), at most
    ``curator.window_episodes`` of the newest, and this cycle's window. A claim whose new
    episodes do not decide it (two matching episodes a day, a rate on a handful of actions)
    is judged on all its pending episodes pooled, until they do; the evidence ledger keeps
    any of them from counting twice. Read once per cycle."""
    if name not in pools:
        since = pools.get("since")
        pools[name] = EpisodeWindow.of(read_placed(
            cy.ctx, cy.ctx.config.curator.window_episodes,
            since=since if isinstance(since, int) else None, actions=name == "actions",
            alongside=cy.window))
    pool: EpisodeWindow = pools[name]
    return pool


def _episode_pool(cy: Cycle) -> EpisodeWindow:
    """Every episode of the last ``curator.causal_lookback_ms`` (and of this cycle): the
    level a metric claim's target has outside its condition is read over them (a cycle's
    own window is a couple of hours, too few to say what 'otherwise' is)."""
    cfg = cy.ctx.config.curator
    return EpisodeWindow.of(read_placed(cy.ctx, cfg.window_episodes,
                                        since=cy.now - cfg.causal_lookback_ms, actions=False,
                                        alongside=cy.window))


def _judge(cy: Cycle, window: EpisodeWindow, claim: Claim, pools: dict[str, Any],
           since: int | None = None, *, borne_out: bool = False) -> Verdict | None:
    """The new episodes' verdict on ``claim``; when they do not decide it, the verdict of
    all its pending episodes (``_pending_pool``). A metric claim is judged against its
    target's level outside its condition (over the lookback for the new episodes, over the
    same pending span for the pooled ones).

    Only episodes later than ``since`` (``_pending_since``: the newest episode the claim was
    learned from, or the time its evidence was last counted) are evidence: the lookback, and
    a cycle's window that began before the learner ran, still hold the episodes that made
    the claim, and a claim the learner selected because those episodes happened to show it
    would be 'confirmed' by them (a false positive confirming itself). The level outside
    its condition is not evidence.

    An outcome-rate claim new episodes have already borne out (``borne_out``: ✓ > 0) is
    judged on the gap it asserts (``judge.rate_alternative``); one they never have, on the
    rate it was learned at. A claim the learner selected from many must first show that
    its selection was not chance, and a false positive's windows at the base rate fall
    decisively below its learned rate soon; once borne out, what its learned rate owes to
    the selection (a warning learned at 93% on 15 swaps of an 80% rule) must not wear it
    down window after window. Either way it is wrong only when a window is likelier at the
    baseline (or past it) than at the rate it is judged at by 1 / ``causal_verdict_level``
    (``claims.causal_verdict``): a rule whose rate sits right there is judged every cycle,
    and a tail at that rate alone called one window in a few dozen wrong.

    A claim on an hour window that new episodes have not borne out yet is judged on whole
    passes of it (``_whole_pass``): undecided until a pass that began after ``since`` has
    ended, then on all its pending episodes. Judged on what a cycle happened to see, it was
    judged on the hours at one edge of its window, and the learner draws a window's edges
    where the episodes it had made the scan most significant, so an edge is where a new
    window is least sure: "swaps lose 20:00–00:00" learned at 23:30 (its last hour lossy by
    chance on the first day) was judged on the seven swaps of 23:30–00:00 alone, wrong at
    once, and left PLAYBOOK.md for the day until the next evening's swaps bore out the
    20:00–23:00 the swaps really lose in. Once borne out, it is judged as the cycles see
    it again: a world that changes inside a pass is seen in the part after the
    change, not averaged away with the part before it."""
    cfg = cy.ctx.config
    max_votes = cfg.curator.validate_max_votes
    min_support = cfg.curator.validate_min_support
    whole = None if borne_out else _whole_pass(claim, since, cy.now)
    if whole is False:
        return Verdict(None, 0, None, claim.effect, claim.baseline, claim.target)
    if since is not None:
        window = _after(pools, "window", window, since)
    if claim.target in (NEGATIVE_RATE, POSITIVE_RATE):
        level = cfg.curator.causal_verdict_level
        gap = cfg.distiller.min_rate_gap if borne_out else 0.0
        verdict = None if whole else judge_claim(window, claim, min_support, max_votes,
                                                 level=level, least_gap=gap)
        if verdict is None or verdict.right is None:
            actions = _pending_pool(cy, pools, "actions")
            if since is not None:
                actions = _after(pools, "actions", actions, since)
            verdict = judge_claim(actions, claim, min_support, max_votes, level=level,
                                  least_gap=gap)
        return verdict
    metric = claim.target.startswith("metric:")
    verdict = None
    if not whole:
        if metric and "episodes" not in pools:
            pools["episodes"] = _episode_pool(cy)
        verdict = judge_claim(window, claim, min_support, max_votes,
                              reference=pools.get("episodes"), strata=cfg.distiller.hour_strata)
    if metric and (whole or (verdict is not None and verdict.right is None)):
        pooled = _pending_pool(cy, pools, "pending")
        if since is not None:
            pooled = _after(pools, "pending", pooled, since)
        if whole or pooled.size > window.size:
            verdict = judge_claim(pooled, claim, min_support, max_votes,
                                  strata=cfg.distiller.hour_strata)
    return verdict


def _whole_pass(claim: Claim, since: int | None, now: int) -> bool | None:
    """Whether a pass of ``claim``'s hour window began after ``since`` (its pending time)
    and has ended by ``now``; None for a claim with no hour window, or when every episode is
    pending (``since`` None)."""
    hours = claim.condition.get("hour_window")
    if hours is None or since is None:
        return None
    began = last_pass_start(hours, now)
    return None if began is None else began > since


def _after(pools: dict[str, Any], name: str, window: EpisodeWindow, learned: int,
           ) -> EpisodeWindow:
    """``window``'s episodes later than ``learned``, cut once per cycle and time."""
    key = f"{name}@{learned}"
    if key not in pools:
        pools[key] = window.after(learned)
    cut: EpisodeWindow = pools[key]
    return cut


MAX_EDGES_PER_LINK = 20  # episode pairs written as discovered edges per link and cycle


_Edge = tuple[str, str, int, float, str]  # cause, effect, lag ms, weight, relationship


def _upsert_edges(ctx: Context, edges: list[_Edge], now: int) -> int:
    with ctx.semantic.transaction():
        for cause, effect, lag, weight, relationship in edges:
            old = ctx.semantic.get_edge(cause, effect, EdgeKind.DISCOVERED)
            ctx.semantic.upsert_edge(CausalEdge(
                cause, effect, EdgeKind.DISCOVERED, weight=weight, relationship=relationship,
                lag_ms=lag, evidence_count=(old.evidence_count + 1) if old else 1), now=now)
        ctx.semantic.bound_fan_in({e[1] for e in edges}, ctx.config.retrieval.causal_max_fan_in)
    return len(edges)


def cross_reference_causal(cy: Cycle) -> dict[str, Any]:
    """Step 6: causal links against the cause occurrences whose lag window closed this cycle."""
    counts = {"links": 0, "occurrences": 0, "followed": 0, "edges": 0, "right": 0, "wrong": 0}
    links = [e for e in list_all(cy, LIVE, (Category.CAUSAL_LINK,))
             if e.claim is not None and e.claim.target.startswith("event:")]
    if not links:
        return counts
    closed_after = cy.previous.last_now
    if closed_after is None:
        closed_after = cy.window[0].timestamp - 1 if cy.window else cy.now
    # Pool the occurrences closed over the lookback: a cause seen once a cycle is judged on
    # several; the evidence table keeps an occurrence from counting twice.
    fresh_after = closed_after  # occurrences closed in this cycle: the edges and counts
    closed_after = min(closed_after, cy.now - cy.ctx.config.curator.causal_lookback_ms)
    lags = [int(e.claim.condition.get("within_ms", 0) or 0) for e in links if e.claim]
    since = closed_after - max(lags, default=0)
    index = EventIndex.of(cy.ctx.episodes.recent(cy.ctx.config.curator.window_episodes,
                                                 since=since))
    min_support = cy.ctx.config.curator.validate_min_support
    changes: list[Change] = []
    edges: dict[tuple[str, str], _Edge] = {}
    for link in links:
        assert link.claim is not None
        pooled = check_causal(index, link.claim, closed_after=closed_after,
                              closed_until=cy.now, min_support=min_support,
                              max_predictions=cy.ctx.config.curator.validate_max_votes,
                              level=cy.ctx.config.curator.causal_verdict_level)
        check = check_causal(index, link.claim, closed_after=fresh_after,
                             closed_until=cy.now, min_support=min_support,
                             max_predictions=cy.ctx.config.curator.validate_max_votes)
        if pooled is None or check is None or pooled.occurrences == 0:
            continue
        counts["links"] += 1
        counts["occurrences"] += check.occurrences
        counts["followed"] += check.followed
        # The most recent pairs (the learner keeps as many per run), written with the rest;
        # a pair two links share is one edge, counted once.
        weight = round(cy.eff(link), 4)
        for c, e, lag in check.pairs[-MAX_EDGES_PER_LINK:]:
            if (c, e) not in edges:
                edges[(c, e)] = (c, e, lag, weight, link.content)
        verdict = pooled.verdict
        why = (f"{pooled.followed} of {pooled.occurrences} occurrences of "
               f"{link.claim.condition.get('event')} closed in the lookback were followed by "
               f"{link.claim.target.removeprefix('event:')} ({check.occurrences} new this "
               "cycle; only occurrences never counted for it are evidence)")
        if verdict.right is None:
            continue  # too few occurrences yet: pooled again next cycle, counted once decided
        counts["right" if verdict.right else "wrong"] += 1
        changes.append(link_change(cy, link.id, pooled, why=why))
    size = max(1, cy.ctx.config.curator.write_batch) * 4  # edges are small rows
    rows = list(edges.values())
    for start in range(0, len(rows), size):
        counts["edges"] += cy.ctx.writer.call(functools.partial(
            _upsert_edges, cy.ctx, rows[start:start + size], cy.now))
    apply_changes(cy, changes)
    return counts
