"""Column view of a batch of episodes for the distiller, and conditions as row masks.

Owns: turning ``Episode`` records into numpy columns once per distillation
(hour of day in UTC, categorical fields, action sets, outcomes, metrics, the
tercile cut points of each metric), and the one interpreter of a claim's
``condition`` mapping, shared by mining (new findings) and by the check of
stored claims (evidence against). Must not: test or rank anything.

Condition vocabulary (JSON-safe, so that ``Claim.key`` is stable)::

    {"hour_window": [start, end]}   UTC hours, end exclusive, wraps midnight
    {"regime" | "token_pair" | "chain" | "tool": value}
    {"action": name}                name in episode.actions (else its tool)
    {"metric_band": [metric, "lower" | "upper"]}   the metric at or below / at or above
                                    a cut point: the claim's ``band_cut`` when it has one
                                    (the distiller scans several, ``band_cuts``), else the
                                    table's bottom / top third
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.records import Episode, EpisodeType, Outcome

__all__ = [
    "ATTRIBUTES",
    "Mask",
    "Table",
    "band_cuts",
    "build_table",
    "condition_mask",
    "days_per_hour",
    "hour_window_mask",
    "rate_population",
    "window_recurred",
    "window_width",
]

Mask = npt.NDArray[np.bool_]
ATTRIBUTES = ("regime", "token_pair", "chain", "tool")
_MS_PER_HOUR = 3_600_000
_RATED = frozenset({Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL})


@dataclass(frozen=True)
class Table:
    episodes: tuple[Episode, ...]
    timestamps: npt.NDArray[np.int64]
    hours: npt.NDArray[np.int64]
    attrs: Mapping[str, Mapping[str, Mask]]  # attribute -> value -> rows with that value
    action_masks: Mapping[str, Mask]
    rated: Mask  # action episodes whose outcome is positive, negative or neutral
    negative: Mask
    positive: Mask
    metrics: Mapping[str, npt.NDArray[np.float64]]  # NaN where an episode lacks the metric
    bands: Mapping[str, tuple[float, float]]  # metric -> (bottom-third cut, top-third cut)

    @property
    def size(self) -> int:
        return len(self.episodes)


def actions_of(episode: Episode) -> tuple[str, ...]:
    """What the episode did: its ``actions``, else the tool of an action episode."""
    if episode.actions:
        return tuple(dict.fromkeys(episode.actions))
    if episode.type is EpisodeType.ACTION and episode.tool:
        return (episode.tool,)
    return ()


def build_table(episodes: Sequence[Episode], min_band_values: int) -> Table:
    """Columns of ``episodes`` (kept in the given order)."""
    eps = tuple(episodes)
    n = len(eps)
    timestamps = np.fromiter((e.timestamp for e in eps), dtype=np.int64, count=n)
    hours = (timestamps // _MS_PER_HOUR) % 24
    attr_rows: dict[str, dict[str, list[int]]] = {name: {} for name in ATTRIBUTES}
    action_rows: dict[str, list[int]] = {}
    rated = np.zeros(n, dtype=bool)
    negative = np.zeros(n, dtype=bool)
    positive = np.zeros(n, dtype=bool)
    metric_rows: dict[str, list[tuple[int, float]]] = {}
    for i, e in enumerate(eps):
        for name, label in (("regime", e.regime), ("token_pair", e.token_pair),
                            ("chain", e.chain), ("tool", e.tool)):
            if label is not None:
                attr_rows[name].setdefault(str(label), []).append(i)
        for action in actions_of(e):
            action_rows.setdefault(action, []).append(i)
        if e.type is EpisodeType.ACTION and e.outcome in _RATED:
            rated[i] = True
            negative[i] = e.outcome is Outcome.NEGATIVE
            positive[i] = e.outcome is Outcome.POSITIVE
        for name, value in e.metrics.items():
            metric_rows.setdefault(name, []).append((i, float(value)))
    attrs = {name: {value: _rows_mask(n, rows) for value, rows in sorted(values.items())}
             for name, values in attr_rows.items()}
    action_masks = {action: _rows_mask(n, rows) for action, rows in sorted(action_rows.items())}
    metrics: dict[str, npt.NDArray[np.float64]] = {}
    bands: dict[str, tuple[float, float]] = {}
    for name, pairs in sorted(metric_rows.items()):
        column = np.full(n, np.nan)
        idx = np.fromiter((i for i, _ in pairs), dtype=np.int64, count=len(pairs))
        column[idx] = np.fromiter((v for _, v in pairs), dtype=np.float64, count=len(pairs))
        metrics[name] = column
        if len(pairs) >= min_band_values:
            present = column[idx]
            low, high = (float(q) for q in np.quantile(present, [1 / 3, 2 / 3]))
            if low < high:  # a metric with a single dominant value has no thirds
                bands[name] = (low, high)
    return Table(eps, timestamps, hours, attrs, action_masks, rated, negative, positive,
                 metrics, bands)


def _rows_mask(n: int, rows: list[int]) -> Mask:
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def days_per_hour(timestamps: Sequence[int] | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each UTC hour of the day (0-23), the number of different UTC days on which
    ``timestamps`` (ms) fall in that hour."""
    times = np.asarray(timestamps, dtype=np.int64)
    pairs = np.unique(np.stack([times // (24 * _MS_PER_HOUR), (times // _MS_PER_HOUR) % 24]),
                      axis=1) if times.size else np.zeros((2, 0), dtype=np.int64)
    return np.bincount(pairs[1], minlength=24).astype(np.int64)


def window_recurred(window: Sequence[int], seen: npt.NDArray[np.int64], days: float) -> bool:
    """True when every hour of ``window`` (``[start, end]`` UTC, end exclusive, wrapping
    midnight) was seen on at least ``days`` different days (``seen``: ``days_per_hour``)."""
    need = max(1, math.ceil(days))
    start, end = int(window[0]), int(window[1])
    return all(int(seen[(start + k) % 24]) >= need for k in range((end - start) % 24 or 24))


def hour_window_mask(hours: npt.NDArray[np.int64], start: int, width: int) -> Mask:
    mask: Mask = ((hours - start) % 24) < width
    return mask


def window_width(window: Sequence[int]) -> int:
    start, end = int(window[0]), int(window[1])
    return (end - start) % 24 or 24


def band_mask(table: Table, metric: str, part: str, cut: float | None = None) -> Mask | None:
    """Rows with ``metric`` at or below (``lower``) / at or above (``upper``) ``cut``; without
    a cut, the table's bottom / top third. None when the metric has no such cut here."""
    values = table.metrics.get(metric)
    if values is None:
        return None
    if cut is None:
        cuts = table.bands.get(metric)
        if cuts is None:
            return None
        cut = cuts[0] if part == "lower" else cuts[1]
    with np.errstate(invalid="ignore"):
        if part == "lower":
            lower: Mask = values <= cut
            return lower
        if part == "upper":
            upper: Mask = values >= cut
            return upper
    return None


def band_cuts(values: npt.NDArray[np.float64], within: Mask, quantiles: Sequence[float],
              min_values: int) -> list[float]:
    """The distinct cut points of a metric tried as a condition: its ``quantiles`` among the
    ``within`` rows that carry it (none when fewer than ``min_values`` do)."""
    present = within & ~np.isnan(values)
    if int(present.sum()) < min_values or not quantiles:
        return []
    return [float(c) for c in np.unique(np.quantile(values[present], list(quantiles)))]


def condition_mask(table: Table, condition: Mapping[str, Any],
                   band_cut: float | None = None) -> Mask | None:
    """Rows matching every item of ``condition``; None when it uses a term we cannot evaluate.

    A ``metric_band`` is read at ``band_cut`` (a stored claim's own cut) when given.
    A claim written by another extractor (the LLM path) may carry terms this
    vocabulary lacks: it is left alone rather than judged on a partial reading.
    """
    mask = np.ones(table.size, dtype=bool)
    for key, value in condition.items():
        part = _item_mask(table, key, value, band_cut)
        if part is None:
            return None
        mask &= part
    return mask


def _item_mask(table: Table, key: str, value: Any, band_cut: float | None) -> Mask | None:
    if key in ATTRIBUTES:
        if not isinstance(value, str):
            return None
        found_attr = table.attrs[key].get(value)
        return found_attr if found_attr is not None else np.zeros(table.size, dtype=bool)
    if key == "action":
        if not isinstance(value, str):
            return None
        found = table.action_masks.get(value)
        return found if found is not None else np.zeros(table.size, dtype=bool)
    if key == "hour_window":
        if (not isinstance(value, list | tuple) or len(value) != 2
                or not all(isinstance(v, int) and 0 <= v < 24 for v in value)):
            return None
        return hour_window_mask(table.hours, int(value[0]), window_width(value))
    if key == "metric_band":
        if (not isinstance(value, list | tuple) or len(value) != 2
                or not all(isinstance(v, str) for v in value)):
            return None
        return band_mask(table, str(value[0]), str(value[1]), band_cut)
    return None


def rate_population(table: Table, condition: Mapping[str, Any]) -> Mask:
    """What an outcome rate under ``condition`` is compared with.

    An action alone is compared with every rated action episode; a condition
    on an action (a regime, a window, a pair) with that action's own episodes.
    """
    action = condition.get("action")
    if isinstance(action, str) and len(condition) > 1:
        own = table.action_masks.get(action)
        if own is None:
            return np.zeros(table.size, dtype=bool)
        population: Mask = own & table.rated
        return population
    return table.rated
