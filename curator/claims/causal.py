"""Judging a stored causal link (event A, then event B within its lag) on new episodes.

Owns: the index of event episodes by key (``EventIndex``), the count of lead→follow
occurrences after a point in time (each new lead episode counted once), and the
verdict on the observed follow rate (``causal_verdict``: the midpoint rule of
``curator.claims.judge``, or a binomial test at ``level`` when one is given). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from curator.claims.judge import Verdict, causal_verdict, midpoint_verdict, predictions
from curator.claims.window import event_keys
from grimoire.records import Claim, Episode

__all__ = ["CausalCheck", "EventIndex", "check_causal"]


@dataclass(frozen=True, slots=True)
class CausalCheck:
    """Occurrences of a causal link's cause whose lag window closed in this cycle."""

    occurrences: int
    followed: int
    pairs: tuple[tuple[str, str, int], ...]  # (cause id, effect id, lag ms), oldest first
    verdict: Verdict


@dataclass(frozen=True)
class EventIndex:
    """Episodes by (strategy, event name): sorted times and ids, built once per cycle so
    that each causal link is a few binary searches, not a pass over every episode."""

    events: Mapping[tuple[str | None, str], tuple[npt.NDArray[np.int64], tuple[str, ...]]]

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> EventIndex:
        rows: dict[tuple[str | None, str], list[tuple[int, str]]] = {}
        for e in episodes:
            for key in event_keys(e):
                rows.setdefault((e.strategy, key), []).append((e.timestamp, e.id))
        events = {}
        for k, found in rows.items():
            found.sort()
            events[k] = (np.array([t for t, _ in found], dtype=np.int64),
                         tuple(i for _, i in found))
        return cls(events)

    def get(self, strategy: str | None, key: str) -> tuple[npt.NDArray[np.int64],
                                                           tuple[str, ...]]:
        return self.events.get((strategy, key), (np.zeros(0, dtype=np.int64), ()))


def check_causal(index: EventIndex, claim: Claim, *, closed_after: int, closed_until: int,
                 min_support: int, max_predictions: int = 1,
                 level: float | None = None) -> CausalCheck | None:
    """Count cause A's occurrences whose window ``(t, t + within_ms]`` closed in
    ``(closed_after, closed_until]`` and how many were followed by effect B in it.

    Each occurrence is counted in exactly one cycle (the one in which its window
    closed), so consecutive cycles never count the same evidence twice. The index must
    cover ``(closed_after − within_ms, closed_until]``; a claim of strategy S is judged
    on S's episodes, a global one on those without a strategy (as the learner made it).
    None when the claim is not an event link (``{"event", "within_ms"}`` → ``event:B``).
    """
    cause = claim.condition.get("event")
    within = claim.condition.get("within_ms")
    if (not isinstance(cause, str) or isinstance(within, bool) or not isinstance(within, int)
            or within <= 0 or not claim.target.startswith("event:")):
        return None
    cause_times, cause_ids = index.get(claim.strategy, cause)
    effect_times, effect_ids = index.get(claim.strategy, claim.target.removeprefix("event:"))
    closes = cause_times + within
    chosen = np.flatnonzero((closes > closed_after) & (closes <= closed_until))
    n = int(chosen.size)
    pairs: list[tuple[str, str, int]] = []
    if n and effect_times.size:
        first = np.searchsorted(effect_times, cause_times[chosen], side="right")
        for j, at in zip(chosen.tolist(), first.tolist(), strict=True):
            if at < effect_times.size and effect_times[at] <= cause_times[j] + within:
                pairs.append((cause_ids[j], effect_ids[at],
                              int(effect_times[at] - cause_times[j])))
    followed = len(pairs)
    observed = followed / n if n else None
    right = None
    if observed is not None and n >= min_support:
        right = (midpoint_verdict(observed, claim.effect, claim.baseline) if level is None
                 else causal_verdict(followed, n, claim.effect, claim.baseline, level))
    verdict = Verdict(right, n, observed, claim.effect, claim.baseline, claim.target,
                      predictions(right, n, min_support, max_predictions),
                      episode_ids=tuple(cause_ids[j] for j in chosen.tolist()))
    return CausalCheck(n, followed, tuple(pairs), verdict)


