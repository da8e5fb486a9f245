"""The market regime of an action: the regime the record of the same moment names.

An agent may write its actions without a regime label (it did not estimate one, or its
action log does not carry it) while its observations of the market, and the regime
shifts it detected, do carry one. A claim conditioned on a regime ("rebalances lose in
high_vol") can then be learned and judged only by placing each such action in the regime
of that moment, read from the labelled episodes at or before the action and at most
``distiller.regime_context_ms`` older (a label that old no longer describes the market of
the action; nothing is placed then). A label written *after* the action is never used:
that market may already have moved on.

Of those, the newest ``distiller.regime_votes`` vote, back to the newest regime shift
(which votes too: the market it announced began there, and what came before described
the regime it ended); the regime most of them name places the action, a tie going to the
newest label among the tied. A regime lasts many observations while an agent's estimate
of one moment can be wrong, so one wrong label no longer places an action: at 15% of
labels wrong (scattered over the other regimes), five votes misplace about 1% of actions
where the newest label alone misplaced 15%. A vote lags each real change by a label or
two, so it is used only where it pays: where, each label held out in turn, the vote of
the labels before it names it more often than the newest label before it does (labels
that are wrong now and then); an agent whose labels are right keeps the newest label.
With ``regime_votes`` 1 the newest label places, as before.

An action that carries a regime is read the same way, its own label the newest vote: the
agent's estimate at the moment it acted is the market's record of that moment too, and as
likely wrong as any other. Its isolated wrong labels made a learned "WBTC swaps lose in
bear" look contradicted by swaps in a market that was not bear at all (simulated,
interaction seed 3: ✓0 ✗30, demoted). Where labels are right (no vote), or every label
agrees, it keeps its own. With ``regime_votes`` 1 an action keeps its own.

The placement is a reading for the learners (the distiller's window, the curator's
judgement of claims), never a change to the stored episode: what the agent wrote stays
as written.

Owns: ``placed`` (pure: episodes and the labelled ones around them in, episodes out),
``with_market_regimes`` (reads the labelled episodes of the same span from the episode
store when some action lacks a regime, and keeps each action's placement in memory) and
``read_placed`` (the curator's read of a window of episodes, placed). A
label delivered late (backfilled with an earlier timestamp) does not move an action
already placed.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

import numpy as np

from grimoire.context import Context
from grimoire.records import Episode, EpisodeType, Regime

__all__ = ["PLACED_KEY", "placed", "read_placed", "to_place", "with_market_regimes"]

_MARKET_RECORD = (EpisodeType.OBSERVATION, EpisodeType.REGIME_SHIFT)  # where labels are read
_MAX_LABELS = 20_000  # labelled episodes read for one placement, at most (the newest)
_MAX_KEPT = 200_000  # placements kept; past it the memo starts again
#: ctx.extras: {action episode id: the regime it was placed in}
PLACED_KEY = "market_regimes"


def to_place(episodes: Sequence[Episode], votes: int = 1) -> list[Episode]:
    """The action episodes of ``episodes`` to place: those that carry no regime, and with
    ``votes`` > 1 every action (its own label one of the votes)."""
    return [e for e in episodes if e.type is EpisodeType.ACTION
            and (e.regime is None or votes > 1)]


def placed(episodes: Sequence[Episode], labelled: Sequence[Episode], max_gap_ms: int,
           votes: int = 1) -> list[Episode]:
    """``episodes`` (same order), each action placed in the regime most of the newest
    ``votes`` labels of its moment name: its own label (if any) and the observations or
    regime shifts of ``labelled`` (or of ``episodes``) labelled at or before it, at most
    ``max_gap_ms`` older and not before the newest regime shift among them (see the
    module doc; a tie: the newest label of the tied). With ``votes`` 1 an action that
    carries a regime keeps it; ``max_gap_ms`` <= 0 places nothing. Another action's label
    is not read: the market's record of a moment is what places it."""
    if votes < 1:
        raise ValueError(f"votes must be at least 1, got {votes!r}")
    if max_gap_ms <= 0 or not to_place(episodes, votes):
        return list(episodes)
    marks: dict[tuple[int, str], tuple[Regime, bool]] = {}
    for e in (*labelled, *episodes):
        if e.regime is not None and e.type in _MARKET_RECORD:
            marks[(e.timestamp, e.id)] = (e.regime, e.type is EpisodeType.REGIME_SHIFT)
    keys = sorted(marks)
    times = [t for t, _ in keys]
    if votes > 1 and not _vote_predicts_better(marks, keys, times, max_gap_ms, votes):
        votes = 1  # these labels are not noisy enough for a vote to beat the newest one
    out: list[Episode] = []
    for e in episodes:
        if e.type is EpisodeType.ACTION and (e.regime is None or votes > 1):
            regime = _vote(marks, keys, times, bisect.bisect_right(times, e.timestamp) - 1,
                           e.timestamp - max_gap_ms, votes, e.regime)
            if regime is not None and regime is not e.regime:
                e = dataclasses.replace(e, regime=regime)
        out.append(e)
    return out


def _vote_predicts_better(marks: dict[tuple[int, str], tuple[Regime, bool]],
                          keys: list[tuple[int, str]], times: list[int], max_gap_ms: int,
                          votes: int) -> bool:
    """Whether the vote names each label from the labels before it more often than the
    newest label before it does (each label held out in turn). A vote only pays where
    labels are wrong now and then: where they are right, it lags each real change by a
    few labels that the newest label follows at once, so the labels themselves choose.

    The same vote as ``_vote`` (without an own label), for every label at once: a window
    of thousands of labels is read on every learner run that places new actions, and a
    call of ``_vote`` per label cost 26 ms at 10,000 labels."""
    n = len(keys)
    if n < 2:
        return False
    index = {r: c for c, r in enumerate(Regime)}
    code = np.array([index[marks[k][0]] for k in keys], dtype=np.int64)
    shift = np.array([marks[k][1] for k in keys], dtype=bool)
    at = np.asarray(times, dtype=np.int64)
    held = np.arange(1, n)  # each label held out in turn
    oldest = at[held] - max_gap_ms
    judged = at[held - 1] >= oldest  # the newest label before it is not too old
    counts = np.zeros((n - 1, len(index)), dtype=np.int64)
    first = np.full((n - 1, len(index)), votes, dtype=np.int64)  # newest vote's position
    alive = np.ones(n - 1, dtype=bool)  # no regime shift passed yet
    rows = np.arange(n - 1)
    for k in range(votes):
        j = held - 1 - k
        inside = j >= 0
        jc = np.maximum(j, 0)
        ok = alive & inside & (at[jc] >= oldest)
        counts[rows[ok], code[jc[ok]]] += 1
        first[rows[ok], code[jc[ok]]] = np.minimum(first[rows[ok], code[jc[ok]]], k)
        alive &= ~(ok & shift[jc])
    # most votes, a tie the newest (first position smallest): as ``_vote``'s max
    winner = np.argmax(counts * (votes + 1) - first, axis=1)
    voted = counts.max(axis=1) > 0
    by_vote = int(np.sum(judged & voted & (winner == code[held])))
    by_newest = int(np.sum(judged & (code[held - 1] == code[held])))
    return by_vote > by_newest


def _vote(marks: dict[tuple[int, str], tuple[Regime, bool]], keys: list[tuple[int, str]],
          times: list[int], newest: int, oldest_ms: int, votes: int,
          own: Regime | None) -> Regime | None:
    """The regime most of ``own`` and the labels ``newest``, ``newest - 1``, ... name (at
    most ``votes`` in all, none older than ``oldest_ms``, none before the newest regime
    shift; ``own`` the newest); None when there is none."""
    tally: dict[Regime, int] = {}
    last: dict[Regime, int] = {}  # how recent each regime's newest vote is (0: newest)
    cast = 0
    if own is not None:
        tally[own], last[own], cast = 1, 0, 1
    i = newest
    while i >= 0 and cast < votes and times[i] >= oldest_ms:
        regime, shift = marks[keys[i]]
        tally[regime] = tally.get(regime, 0) + 1
        last.setdefault(regime, cast)
        cast += 1
        if shift:
            break
        i -= 1
    if not tally:
        return None
    return max(tally, key=lambda r: (tally[r], -last[r]))


def with_market_regimes(ctx: Context, episodes: Sequence[Episode]) -> list[Episode]:
    """``placed(episodes, ...)`` with the labelled episodes of the span of the actions to
    place (and ``distiller.regime_context_ms`` before it) read from the episode store.

    An action's placement is kept (``ctx.extras[PLACED_KEY]``, by episode id): the learner
    and the curator read the same actions run after run, and only the ones not placed yet
    are read around (a run's ten new actions, not the weeks its window spans). An action
    no label placed is tried again on the next read (its moment's observation may arrive
    later). No read at all when every action carries a regime and ``regime_votes`` is 1."""
    gap = int(ctx.config.distiller.regime_context_ms)
    votes = int(ctx.config.distiller.regime_votes)
    missing = to_place(episodes, votes)
    if gap <= 0 or not missing:
        return list(episodes)
    with ctx.state_lock:
        kept: dict[str, Regime] = ctx.extras.setdefault(PLACED_KEY, {})
        found = {e.id: kept[e.id] for e in missing if e.id in kept}
    todo = [e for e in missing if e.id not in found]
    if todo:
        first = min(e.timestamp for e in todo)
        last = max(e.timestamp for e in todo)
        around = ctx.episodes.recent(_MAX_LABELS, since=first - gap, until=last + 1,
                                     types=_MARKET_RECORD)
        new = {e.id: e.regime for e in placed(todo, [*around, *episodes], gap, votes)
               if e.regime is not None}
        found.update(new)
        with ctx.state_lock:
            if len(kept) + len(new) > _MAX_KEPT:
                kept.clear()
            kept.update(new)
    return [dataclasses.replace(e, regime=found[e.id])
            if e.type is EpisodeType.ACTION and e.id in found and found[e.id] is not e.regime
            else e for e in episodes]


def read_placed(ctx: Context, limit: int, *, since: int | None, actions: bool,
                alongside: Sequence[Episode]) -> list[Episode]:
    """The newest ``limit`` episodes since ``since`` (only actions when ``actions``) and those
    of ``alongside`` (a cycle's own window) the read did not return, of the same types, in
    time order, each action without a regime placed (``with_market_regimes``)."""
    read = ctx.episodes.recent(limit, since=since,
                               types=[EpisodeType.ACTION] if actions else None)
    seen = {e.id for e in read}
    extra = [e for e in alongside
             if e.id not in seen and (not actions or e.type is EpisodeType.ACTION)]
    return with_market_regimes(ctx, sorted([*read, *extra], key=lambda e: (e.timestamp, e.id)))
