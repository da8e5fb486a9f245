"""A window of episodes as columns, and where a claim's condition holds in it.

Owns: the column view of the episodes the curator has not judged yet
(``EpisodeWindow``), the per-episode reading of a claim's ``condition`` (the
distiller's vocabulary: regime, token_pair, chain, tool, action, hour_window, and
a metric band at the cut point the claim states: "when gas is above 31 gwei"),
and which episodes a claim speaks about at all (``scope``). Conditions this module
cannot read (a band with no cut, a term from another extractor) give None: the
claim is left to its own learner. Pure: episodes and claims in, masks out.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.distiller.features import ATTRIBUTES, actions_of
from curator.learn.causal_discovery import default_event_key
from grimoire.records import Claim, Episode, EpisodeType, Outcome

__all__ = ["ATTRIBUTES", "NEGATIVE_RATE", "POSITIVE_RATE", "EpisodeWindow", "Mask", "actions_of",
           "band_mask", "claim_mask", "condition_mask", "event_key", "event_keys",
           "last_pass_start", "scope", "term_field"]

Mask = npt.NDArray[np.bool_]
NEGATIVE_RATE = "outcome:negative_rate"
POSITIVE_RATE = "outcome:positive_rate"
_MS_PER_HOUR = 3_600_000
_RATED = frozenset({Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL})


def event_key(episode: Episode) -> str | None:
    """An episode's event type, exactly as causal discovery names the two ends of a link:
    observations are ticks (None), actions are ``action:<what>[:<outcome>]``, anything
    else its episode type."""
    return default_event_key(episode)


def event_keys(episode: Episode) -> frozenset[str]:
    """Every name a causal link may use for this episode: ``event_key``, and for a regime
    shift also ``regime_shift_to_<regime>`` (the learner may tell shifts apart by target)."""
    key = event_key(episode)
    if key is None:
        return frozenset()
    if episode.type is EpisodeType.REGIME_SHIFT and episode.regime is not None:
        return frozenset({key, f"regime_shift_to_{episode.regime.value}"})
    return frozenset({key})


@dataclass(frozen=True)
class EpisodeWindow:
    """Columns of a batch of episodes (in the given order) for vectorised condition checks."""

    episodes: tuple[Episode, ...]
    timestamps: npt.NDArray[np.int64]
    hours: npt.NDArray[np.int64]
    strategies: npt.NDArray[np.object_]
    global_rows: Mask  # episodes written without a strategy
    attrs: Mapping[str, npt.NDArray[np.object_]]
    actions: Mapping[str, Mask]
    rated: Mask
    negative: Mask
    positive: Mask
    metrics: Mapping[str, npt.NDArray[np.float64]]

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> EpisodeWindow:
        eps = tuple(episodes)
        n = len(eps)
        ts = np.fromiter((e.timestamp for e in eps), dtype=np.int64, count=n)
        attrs = {
            name: np.array([_label(getattr(e, name)) for e in eps] or [], dtype=object)
            for name in ATTRIBUTES
        }
        action_rows: dict[str, list[int]] = {}
        metric_rows: dict[str, list[tuple[int, float]]] = {}
        rated = np.zeros(n, dtype=bool)
        negative = np.zeros(n, dtype=bool)
        positive = np.zeros(n, dtype=bool)
        for i, e in enumerate(eps):
            for action in actions_of(e):
                action_rows.setdefault(action, []).append(i)
            for name, value in e.metrics.items():
                metric_rows.setdefault(name, []).append((i, float(value)))
            if e.type is EpisodeType.ACTION and e.outcome in _RATED:
                rated[i] = True
                negative[i] = e.outcome is Outcome.NEGATIVE
                positive[i] = e.outcome is Outcome.POSITIVE
        actions = {}
        for action, rows in action_rows.items():
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            actions[action] = mask
        metrics = {}
        for name, pairs in metric_rows.items():
            column = np.full(n, np.nan)
            for i, value in pairs:
                column[i] = value
            metrics[name] = column
        strategies = np.array([e.strategy for e in eps] or [], dtype=object)
        global_rows = np.fromiter((e.strategy is None for e in eps), dtype=bool, count=n)
        return cls(eps, ts, (ts // _MS_PER_HOUR) % 24, strategies, global_rows, attrs, actions,
                   rated, negative, positive, metrics)

    @property
    def size(self) -> int:
        return len(self.episodes)

    @functools.cached_property
    def events(self) -> tuple[frozenset[str], ...]:
        """Each episode's ``event_keys``, read once per window (every causal link asks)."""
        return tuple(event_keys(e) for e in self.episodes)

    def after(self, timestamp: int) -> EpisodeWindow:
        """The episodes later than ``timestamp``: those a claim learned up to then was not
        learned from."""
        keep = self.timestamps > timestamp
        if keep.all():
            return self
        idx = np.flatnonzero(keep)
        return EpisodeWindow(
            tuple(self.episodes[i] for i in idx.tolist()), self.timestamps[keep],
            self.hours[keep], self.strategies[keep], self.global_rows[keep],
            {k: v[keep] for k, v in self.attrs.items()},
            {k: v[keep] for k, v in self.actions.items()}, self.rated[keep],
            self.negative[keep], self.positive[keep],
            {k: v[keep] for k, v in self.metrics.items()})


def _label(value: object) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _hours(value: object) -> tuple[int, int] | None:
    """An hour window's first hour and width in hours ([20, 0]: 20, 4; [22, 2]: 22, 4),
    or None when ``value`` is not an hour window."""
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 24
                       for v in value)):
        return None
    start, end = int(value[0]) % 24, int(value[1]) % 24
    return start, (end - start) % 24 or 24


def _hour_window(hours: npt.NDArray[np.int64], value: object) -> Mask | None:
    window = _hours(value)
    if window is None:
        return None
    start, width = window
    mask: Mask = ((hours - start) % 24) < width
    return mask


def last_pass_start(value: object, now: int) -> int | None:
    """When the latest pass of the hour window ``value`` that has ended by ``now`` began
    (epoch ms, UTC hours as ``condition_mask`` reads them): for [20, 0] at 02:00, 20:00 the
    day before. None when ``value`` is not an hour window."""
    window = _hours(value)
    if window is None:
        return None
    start, width = window
    end = (start + width) % 24 * _MS_PER_HOUR
    day = 24 * _MS_PER_HOUR
    ended = (now - end) // day * day + end  # the latest end of a pass at or before now
    return ended - width * _MS_PER_HOUR


def band_mask(window: EpisodeWindow, value: object, cut: float | None) -> Mask | None:
    """Episodes in the band ``[metric, "upper" | "lower"]`` cut at ``cut``: the metric at or
    above it (upper), at or below it (lower), as the distiller drew the band. An episode
    without the metric is in no band. None without a cut, or for a malformed band."""
    if (cut is None or not np.isfinite(cut) or not isinstance(value, list | tuple)
            or len(value) != 2 or value[1] not in ("upper", "lower")
            or not isinstance(value[0], str)):
        return None
    column = window.metrics.get(value[0])
    if column is None:
        return np.zeros(window.size, dtype=bool)
    with np.errstate(invalid="ignore"):
        mask: Mask = column >= cut if value[1] == "upper" else column <= cut
    return mask


def condition_mask(window: EpisodeWindow, condition: Mapping[str, Any], *,
                   scope: bool = False, strategy: str | None = None,
                   band_cut: float | None = None) -> Mask | None:
    """Episodes matching every term of ``condition``; with ``scope``, only those of
    ``strategy`` (None: the episodes written without one), as the learner scopes a claim.

    None when a term cannot be read here (a ``metric_band`` without the claim's
    ``band_cut``; unknown terms come from another extractor): no verdict then.
    """
    mask = np.ones(window.size, dtype=bool)
    if scope:
        mask &= window.global_rows if strategy is None else window.strategies == strategy
    for key, value in condition.items():
        if key in ATTRIBUTES:
            if not isinstance(value, str):
                return None
            mask &= window.attrs[key] == value
        elif key == "action":
            if not isinstance(value, str):
                return None
            found = window.actions.get(value)
            if found is None:
                return np.zeros(window.size, dtype=bool)
            mask &= found
        elif key == "hour_window":
            part = _hour_window(window.hours, value)
            if part is None:
                return None
            mask &= part
        elif key == "metric_band":
            part = band_mask(window, value, band_cut)
            if part is None:
                return None
            mask &= part
        else:
            return None
    return mask


def term_field(key: str, value: object) -> str | None:
    """The episode field that ``condition_mask`` reads for one condition term: an attribute
    its own name, ``action`` the episode's actions (else its tool: ``"action"``), an hour
    window its ``timestamp``, a band ``metrics.<metric>``. None for a term it cannot read.

    It lets a caller holding a partial episode (a situation the agent describes before it
    acts) tell a term that fails from one it cannot judge for want of that field."""
    if key in ATTRIBUTES:
        return key
    if key == "action":
        return "action"
    if key == "hour_window":
        return "timestamp"
    if (key == "metric_band" and isinstance(value, list | tuple) and len(value) == 2
            and isinstance(value[0], str)):
        return f"metrics.{value[0]}"
    return None


def claim_mask(window: EpisodeWindow, claim: Claim) -> Mask | None:
    """The episodes of ``claim``'s scope that match its condition (its band at its cut)."""
    return condition_mask(window, claim.condition, scope=True, strategy=claim.strategy,
                          band_cut=claim.band_cut)


def scope(window: EpisodeWindow, claim: Claim) -> Mask:
    """The episodes ``claim`` speaks about, in its condition or outside it: its strategy's,
    and for a band only those that carry the band's metric (an episode without gas is not
    'outside the high-gas band', it says nothing about gas)."""
    scope = condition_mask(window, {}, scope=True, strategy=claim.strategy)
    assert scope is not None
    band = claim.condition.get("metric_band")
    if isinstance(band, list | tuple) and band and isinstance(band[0], str):
        column = window.metrics.get(band[0])
        scope = scope & ~np.isnan(column) if column is not None else scope & False
    return scope

