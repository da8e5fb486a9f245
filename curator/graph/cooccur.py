"""Consolidation-time co-occurrence (seed 004 "Graph Maintenance", source 2).

"If episodes involving protocol A consistently co-occur with episodes involving protocol B
within a 3-block window, that implies a relationship." Read here over one curator window:

- each episode contributes its *anchors*: the entities it is about, a pool standing for its
  own tokens (an episode on WETH/USDC is about the pool, not separately about WETH);
- A co-occurs with B at an episode of A when another episode of B lies within
  ``window_ms`` of it (the same episode naming both is one event, not two: not counted);
- ``evidence`` = min(co-occurrences seen from A, seen from B);
- ``lift`` = the smaller of co_A / expected_A and co_B / expected_B, where expected_A is
  what chance gives: A's episodes times the share of the window's span that B's episodes
  cover (± ``window_ms`` around each). Two entities observed every tick cover everything:
  lift 1, no relation, however often they "co-occur".

A pair relates when ``evidence >= min_support`` and ``lift >= min_lift``. A relation
already in the graph *stopped holding* when both of its entities were seen at least
``min_support`` times in the window and their lift is below 1 (no more often together
than chance). Too few episodes of either says nothing: the relation stays.

Pure: no store, no clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

__all__ = ["Pair", "anchors", "co_occurrences", "pair_stats"]

_MAX_ANCHORS = 64  # the most frequent anchors of a window are paired (64² / 2 pairs at most)


@dataclass(frozen=True, slots=True)
class Pair:
    """What one window says about two anchors (keys sorted: ``a < b``)."""

    a: str
    b: str
    evidence: int
    lift: float
    first_at: int  # unix ms of the first co-occurrence (0 when there is none)
    n_a: int
    n_b: int


def anchors(keys: Iterable[str]) -> list[str]:
    """The entities an episode is about: its pools, and the tokens no pool of it holds."""
    keys = list(keys)
    pools = [k for k in keys if k.startswith("pool:")]
    held = {f"token:{t}" for p in pools for t in p.partition(":")[2].split("/")}
    return pools + [k for k in keys if k.startswith("token:") and k not in held]


def _covered(times: Sequence[int], window_ms: int, start: int, end: int) -> int:
    """Length of the union of [t - w, t + w] over ``times`` (sorted), clipped to [start, end]."""
    total, reach = 0, start
    for t in times:
        lo, hi = max(t - window_ms, reach), min(t + window_ms, end)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def _co(mine: Sequence[tuple[int, str]], other: Sequence[tuple[int, str]], other_times:
        Sequence[int], window_ms: int) -> tuple[int, int]:
    """(episodes of ``mine`` with another episode of ``other`` within the window, first time)."""
    count, first = 0, 0
    for t, ident in mine:
        lo = bisect.bisect_left(other_times, t - window_ms)
        hi = bisect.bisect_right(other_times, t + window_ms)
        if any(other[i][1] != ident for i in range(lo, min(hi, lo + 2))):
            count += 1
            first = first or t
    return count, first


def pair_stats(events: Mapping[str, Sequence[tuple[int, str]]], a: str, b: str,
               window_ms: int, span: tuple[int, int]) -> Pair:
    """The co-occurrence of anchors ``a`` and ``b`` (their (time, episode id) lists, sorted)."""
    ea, eb = events.get(a, ()), events.get(b, ())
    ta, tb = [t for t, _ in ea], [t for t, _ in eb]
    start, end = span
    length = max(end - start, window_ms)
    co_a, first_a = _co(ea, eb, tb, window_ms)
    co_b, first_b = _co(eb, ea, ta, window_ms)
    lifts = []
    for co, n, cover in ((co_a, len(ea), _covered(tb, window_ms, start, start + length)),
                         (co_b, len(eb), _covered(ta, window_ms, start, start + length))):
        expected = n * cover / length
        lifts.append(co / expected if expected > 0 else 0.0)
    firsts = [f for f in (first_a, first_b) if f]
    return Pair(a, b, min(co_a, co_b), round(min(lifts), 4), min(firsts) if firsts else 0,
                len(ea), len(eb))


def co_occurrences(episodes: Iterable[tuple[int, str, Iterable[str]]], window_ms: int,
                   min_support: int, min_lift: float) -> tuple[list[Pair], dict[str, list[
                       tuple[int, str]]], tuple[int, int]]:
    """The related pairs of one window of ``(time, episode id, anchors)``, oldest first.

    Returns the pairs that relate, every anchor's (time, id) list and the window's span
    (for judging relations already stored with ``pair_stats``)."""
    events: dict[str, list[tuple[int, str]]] = {}
    times: list[int] = []
    for t, ident, keys in episodes:
        times.append(t)
        for key in dict.fromkeys(keys):
            events.setdefault(key, []).append((t, ident))
    if not times:
        return [], events, (0, 0)
    for items in events.values():
        items.sort()
    span = (min(times), max(times))
    frequent = sorted((k for k, v in events.items() if len(v) >= min_support),
                      key=lambda k: (-len(events[k]), k))[:_MAX_ANCHORS]
    related = []
    for a, b in combinations(sorted(frequent), 2):
        pair = pair_stats(events, a, b, window_ms, span)
        if pair.evidence >= min_support and pair.lift >= min_lift:
            related.append(pair)
    return related, events, span
