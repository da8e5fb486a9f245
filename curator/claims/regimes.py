"""The market regime of an action written without one: the regime the record of the same
moment names.

An agent may write its actions without a regime label (it did not estimate one, or its
action log does not carry it) while its observations of the market, and the regime
shifts it detected, do carry one. A claim conditioned on a regime ("rebalances lose in
high_vol") can then be learned and judged only by placing each such action in the regime
of that moment: the label of the newest episode carrying one at or before the action,
when it is at most ``distiller.regime_context_ms`` older (a label that old no longer
describes the market of the action; nothing is placed then). A label written *after* the
action is never used: that market may already have moved on.

The placement is a reading for the learners (the distiller's window, the curator's
judgement of claims), never a change to the stored episode: what the agent wrote stays
as written. An action that carries a regime keeps its own.

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

from grimoire.context import Context
from grimoire.records import Episode, EpisodeType, Regime

__all__ = ["PLACED_KEY", "placed", "read_placed", "unplaced", "with_market_regimes"]

_MARKET_RECORD = (EpisodeType.OBSERVATION, EpisodeType.REGIME_SHIFT)  # where labels are read
_MAX_LABELS = 20_000  # labelled episodes read for one placement, at most (the newest)
_MAX_KEPT = 200_000  # placements kept; past it the memo starts again
#: ctx.extras: {action episode id: the regime it was placed in}
PLACED_KEY = "market_regimes"


def unplaced(episodes: Sequence[Episode]) -> list[Episode]:
    """The action episodes of ``episodes`` that carry no regime."""
    return [e for e in episodes if e.type is EpisodeType.ACTION and e.regime is None]


def placed(episodes: Sequence[Episode], labelled: Sequence[Episode], max_gap_ms: int,
           ) -> list[Episode]:
    """``episodes`` (same order), each action without a regime given the regime of the newest
    observation or regime shift of ``labelled`` (or of ``episodes``) labelled with one at or
    before it, at most ``max_gap_ms`` older; ``max_gap_ms`` <= 0 places nothing. Another
    action's label is not read: the market's record of a moment is what places it."""
    if max_gap_ms <= 0 or not unplaced(episodes):
        return list(episodes)
    marks: dict[tuple[int, str], Regime] = {}
    for e in (*labelled, *episodes):
        if e.regime is not None and e.type in _MARKET_RECORD:
            marks[(e.timestamp, e.id)] = e.regime
    keys = sorted(marks)
    times = [t for t, _ in keys]
    out: list[Episode] = []
    for e in episodes:
        if e.type is EpisodeType.ACTION and e.regime is None:
            i = bisect.bisect_right(times, e.timestamp) - 1
            if i >= 0 and e.timestamp - times[i] <= max_gap_ms:
                e = dataclasses.replace(e, regime=marks[keys[i]])
        out.append(e)
    return out


def with_market_regimes(ctx: Context, episodes: Sequence[Episode]) -> list[Episode]:
    """``placed(episodes, ...)`` with the labelled episodes of the span of the actions to
    place (and ``distiller.regime_context_ms`` before it) read from the episode store.

    An action's placement is kept (``ctx.extras[PLACED_KEY]``, by episode id): the learner
    and the curator read the same actions run after run, and only the ones not placed yet
    are read around (a run's ten new actions, not the weeks its window spans). An action
    no label placed is tried again on the next read (its moment's observation may arrive
    later). No read at all when every action carries a regime."""
    gap = int(ctx.config.distiller.regime_context_ms)
    missing = unplaced(episodes)
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
        new = {e.id: e.regime for e in placed(todo, [*around, *episodes], gap)
               if e.regime is not None}
        found.update(new)
        with ctx.state_lock:
            if len(kept) + len(new) > _MAX_KEPT:
                kept.clear()
            kept.update(new)
    return [dataclasses.replace(e, regime=found[e.id])
            if e.type is EpisodeType.ACTION and e.regime is None and e.id in found else e
            for e in episodes]


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
