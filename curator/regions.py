"""Region MDP over episode embeddings (SPEC §11, seed 003 RFC-013 Part A).

Owns ``RegionModel``: regions are clusters of episode embeddings (spherical
k-means, seeded, so the same data gives the same regions); consecutive
episodes give transitions (state region, action type) → next region with a
reward; from those, ``best_action``, ``p_success`` (Beta(1, 1) prior, so it
is defined before any data) and ``region_quality`` for context-aware decay
(0.7 + 0.25 · quality). It must not read stores or clocks: callers pass
episodes and vectors in, and persist ``to_dict()`` (JSON-safe, exact round
trip) in the semantic store's meta table.

Incremental by design: each curator cycle assigns its new episodes to the
nearest region and moves that region's centroid by a running mean. When the
new episodes fit the regions clearly worse than the data they were fitted on
(mean cosine to their centroid down by ``refit_drift``), the regions are
refitted on the old centroids (weighted by their sizes) plus the new points,
and the learned transitions are carried over to the nearest new region.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from curator.kmeans import kmeans, unit
from grimoire.config import CuratorConfig
from grimoire.errors import NotAvailableError, ValidationError
from grimoire.records import Episode, EpisodeType, Outcome

__all__ = ["FORMAT", "RegionModel", "action_types", "episode_reward"]

log = structlog.get_logger()

Matrix = npt.NDArray[np.float64]
FORMAT = 1
_MAX_PENDING = 32  # actions waiting for the next observed state; older ones are dropped
_OUTCOME_REWARD = {Outcome.POSITIVE: 1.0, Outcome.NEGATIVE: -1.0, Outcome.NEUTRAL: 0.0}


@dataclass(slots=True)
class _Stats:
    n: int = 0
    reward_sum: float = 0.0
    successes: int = 0


def episode_reward(episode: Episode) -> tuple[float, bool] | None:
    """(reward, success) of an action episode: reward is the gain (P&L) when given, else
    +1 / −1 / 0 from the outcome; success is a positive outcome (or, when the outcome
    says neither, a positive gain). None when the episode carries no outcome signal."""
    if episode.gain is None and episode.outcome not in _OUTCOME_REWARD:
        return None
    reward = episode.gain if episode.gain is not None else _OUTCOME_REWARD[episode.outcome]
    if episode.outcome is Outcome.POSITIVE:
        return reward, True
    if episode.outcome is Outcome.NEGATIVE:
        return reward, False
    return reward, reward > 0


def action_types(episode: Episode) -> tuple[str, ...]:
    """The action types an action episode performed: its ``actions``, else its tool."""
    names = tuple(dict.fromkeys(a.strip().lower() for a in episode.actions if a.strip()))
    if names:
        return names
    return (episode.tool.strip().lower(),) if episode.tool and episode.tool.strip() else ("action",)


class RegionModel:
    """Regions of embedding space and the action outcomes observed from each."""

    def __init__(self, k: int, *, seed: int = 0, refit_drift: float = 0.1,
                 min_drift_points: int = 32, max_iter: int = 50) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError("must be an integer >= 1", field="regions")
        if not 0.0 < refit_drift <= 2.0:
            raise ValidationError("must be in (0, 2]", field="regions_refit_drift")
        self.k, self.seed, self.refit_drift = k, int(seed), float(refit_drift)
        self.min_drift_points, self.max_iter = int(min_drift_points), int(max_iter)
        self._centroids: Matrix = np.zeros((0, 0))  # running means of unit vectors
        self._counts: list[int] = []
        self._fit_quality = 1.0  # mean cosine of the fitted points to their centroid
        self._since_sum, self._since_n = 0.0, 0  # the same, for points assigned since
        self.refits = 0
        self.last_drift = 0.0
        self._transitions: dict[tuple[int, str], dict[int, int]] = {}
        self._stats: dict[tuple[int, str], _Stats] = {}
        self._last_state: int | None = None
        self._pending: list[tuple[int, tuple[str, ...], float, bool]] = []
        self._watermark: tuple[int, str] | None = None

    @classmethod
    def from_config(cls, cfg: CuratorConfig) -> RegionModel:
        return cls(cfg.regions, seed=cfg.regions_seed, refit_drift=cfg.regions_refit_drift,
                   min_drift_points=cfg.regions_min_drift_points)

    # ------------------------------------------------------------ regions

    @property
    def fitted(self) -> bool:
        return len(self._counts) > 0

    @property
    def n_regions(self) -> int:
        return len(self._counts)

    def fit(self, vectors: npt.ArrayLike) -> list[int]:
        """(Re)fit the regions on these vectors; returns each vector's region.

        Transitions learned so far are carried over to the nearest new region.
        """
        rows = self._rows(vectors, "vectors")
        if len(rows) == 0:
            raise ValidationError("needs at least one vector", field="vectors")
        self._refit(rows, np.ones(len(rows)))
        return [int(x) for x in self._labels(rows)[0]]

    def assign(self, vector: npt.ArrayLike) -> int:
        """The region of one embedding (nearest centroid by cosine)."""
        row = np.asarray(vector, dtype=np.float64)
        if row.ndim != 1:
            raise ValidationError("must be one vector", field="vector")
        return int(self._labels(self._rows(row[None, :], "vector"))[0][0])

    def update(self, vectors: npt.ArrayLike) -> list[int]:
        """Assign new vectors, move centroids by running means, refit on large drift."""
        rows = self._rows(vectors, "vectors")
        if len(rows) == 0:
            return []
        if not self.fitted:
            return self.fit(rows)
        labels, best = self._labels(rows)
        n = self._since_n + len(rows)
        self.last_drift = self._fit_quality - (self._since_sum + float(best.sum())) / n
        if self.last_drift > self.refit_drift and (
            n >= self.min_drift_points or self.n_regions < self.k
        ):
            log.info("curator.regions.refit", drift=round(self.last_drift, 4), points=n,
                     regions=self.n_regions)
            weights = np.concatenate([np.asarray(self._counts, dtype=np.float64),
                                      np.ones(len(rows))])
            self._refit(np.vstack([self._centroids, rows]), weights)
            return [int(x) for x in self._labels(rows)[0]]
        for region in sorted(set(labels.tolist())):
            members = rows[labels == region]
            old = self._counts[region]
            self._centroids[region] = (self._centroids[region] * old + members.sum(axis=0)) / (
                old + len(members))
            self._counts[region] = old + len(members)
        self._since_sum += float(best.sum())
        self._since_n = n
        return [int(x) for x in labels]

    # ------------------------------------------------------------ transitions

    def record_transition(self, region_from: int, action_type: str, region_to: int,
                          reward: float, *, success: bool | None = None) -> None:
        """One observed step: from ``region_from``, ``action_type`` led to ``region_to``."""
        self._check_region(region_from, "region_from")
        self._check_region(region_to, "region_to")
        action = _action(action_type)
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(
                reward):
            raise ValidationError("must be a finite number", field="reward")
        key = (int(region_from), action)  # plain ints: numpy ints are not JSON-safe
        nexts = self._transitions.setdefault(key, {})
        nexts[int(region_to)] = nexts.get(int(region_to), 0) + 1
        stats = self._stats.setdefault(key, _Stats())
        stats.n += 1
        stats.reward_sum += float(reward)
        stats.successes += int(reward > 0 if success is None else success)

    def update_from_episodes(self, episodes: Sequence[Episode], vectors: npt.ArrayLike) -> int:
        """Learn from a batch: update regions, then derive transitions in time order.

        The state before an action is the latest non-action episode (an
        observation, a regime shift, ...) before it, or the action's own region
        if there is none yet; the state after is the next non-action episode,
        which may arrive in a later batch (pending actions are kept). Episodes
        at or before the last one already learned are skipped, so overlapping
        batches do not count twice. Returns the number of new episodes used.
        """
        if not episodes:
            return 0
        rows = self._rows(vectors, "vectors")
        if len(rows) != len(episodes):
            raise ValidationError(f"has {len(rows)} rows for {len(episodes)} episodes",
                                  field="vectors")
        order = sorted(range(len(episodes)), key=lambda i: (episodes[i].timestamp, episodes[i].id))
        if self._watermark is not None:
            mark = self._watermark
            order = [i for i in order if (episodes[i].timestamp, episodes[i].id) > mark]
        if not order:
            return 0
        labels = self.update(rows[order])
        for i, region in zip(order, labels, strict=True):
            episode = episodes[i]
            if episode.type is EpisodeType.ACTION:
                signal = episode_reward(episode)
                if signal is not None:
                    start = self._last_state if self._last_state is not None else region
                    self._pending.append((start, action_types(episode), *signal))
                    if len(self._pending) > _MAX_PENDING:
                        self._pending.pop(0)
                continue
            for start, actions, reward, success in self._pending:
                for action in actions:
                    self.record_transition(start, action, region, reward, success=success)
            self._pending = []
            self._last_state = region
        last = episodes[order[-1]]
        self._watermark = (last.timestamp, last.id)
        return len(order)

    # ------------------------------------------------------------ queries

    def best_action(self, region: int) -> list[tuple[str, float, int]]:
        """Actions tried from ``region`` as (action, mean reward, n), best mean first."""
        self._check_query(region)
        ranked = [(a, s.reward_sum / s.n, s.n) for (r, a), s in self._stats.items()
                  if r == region and s.n]
        return sorted(ranked, key=lambda x: (-x[1], -x[2], x[0]))

    def p_success(self, region: int, action_type: str) -> float:
        """P(success | region, action) with a Beta(1, 1) prior: 0.5 with no data."""
        self._check_query(region)
        stats = self._stats.get((region, _action(action_type)), _Stats())
        return (stats.successes + 1) / (stats.n + 2)

    def region_quality(self, region: int) -> float:
        """P(an action taken from this region succeeds), pooled over actions, Beta(1, 1) prior."""
        self._check_query(region)
        n = successes = 0
        for (r, _), stats in self._stats.items():
            if r == region:
                n += stats.n
                successes += stats.successes
        return (successes + 1) / (n + 2)

    def decay_factor(self, region: int) -> float:
        """Context-aware decay multiplier 0.7 + 0.25 · region_quality (RFC-013 Part E)."""
        return 0.7 + 0.25 * self.region_quality(region)

    def transition_probability(self, region: int, action_type: str, region_to: int) -> float:
        """P(region_to | region, action) = count / total (0 with no data)."""
        self._check_query(region)
        nexts = self._transitions.get((region, _action(action_type)), {})
        total = sum(nexts.values())
        return nexts.get(region_to, 0) / total if total else 0.0

    # ------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state; ``from_dict(to_dict())`` behaves identically (floats round-trip)."""
        return {
            "format": FORMAT,
            "k": self.k,
            "seed": self.seed,
            "refit_drift": self.refit_drift,
            "min_drift_points": self.min_drift_points,
            "max_iter": self.max_iter,
            "centroids": self._centroids.tolist() if self.fitted else [],
            "counts": list(self._counts),
            "fit_quality": self._fit_quality,
            "since_sum": self._since_sum,
            "since_n": self._since_n,
            "refits": self.refits,
            "last_drift": self.last_drift,
            "transitions": [[r, a, to, n] for (r, a), nexts in sorted(self._transitions.items())
                            for to, n in sorted(nexts.items())],
            "stats": [[r, a, s.n, s.reward_sum, s.successes]
                      for (r, a), s in sorted(self._stats.items())],
            "last_state": self._last_state,
            "pending": [[r, list(acts), reward, ok] for r, acts, reward, ok in self._pending],
            "watermark": list(self._watermark) if self._watermark else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegionModel:
        """Rebuild a model from ``to_dict()`` output; malformed data raises ValidationError."""
        try:
            if data["format"] != FORMAT:
                raise ValidationError(f"unknown format {data['format']!r}", field="regions.format")
            model = cls(int(data["k"]), seed=int(data["seed"]),
                        refit_drift=float(data["refit_drift"]),
                        min_drift_points=int(data["min_drift_points"]),
                        max_iter=int(data["max_iter"]))
            counts = [int(c) for c in data["counts"]]
            centroids = np.asarray(data["centroids"], dtype=np.float64)
            if counts:
                if centroids.shape[0] != len(counts) or centroids.ndim != 2 or not np.all(
                        np.isfinite(centroids)):
                    raise ValidationError("do not match counts", field="regions.centroids")
                model._centroids, model._counts = centroids, counts
            model._fit_quality = float(data["fit_quality"])
            model._since_sum, model._since_n = float(data["since_sum"]), int(data["since_n"])
            model.refits, model.last_drift = int(data["refits"]), float(data["last_drift"])
            for r, a, to, n in data["transitions"]:
                model._check_region(int(r), "regions.transitions")
                model._check_region(int(to), "regions.transitions")
                model._transitions.setdefault((int(r), str(a)), {})[int(to)] = int(n)
            for r, a, n, total, successes in data["stats"]:
                model._check_region(int(r), "regions.stats")
                model._stats[(int(r), str(a))] = _Stats(int(n), float(total), int(successes))
            state = data["last_state"]
            model._last_state = None if state is None else int(state)
            model._pending = [(int(r), tuple(str(a) for a in acts), float(reward), bool(ok))
                              for r, acts, reward, ok in data["pending"]]
            mark = data["watermark"]
            model._watermark = None if mark is None else (int(mark[0]), str(mark[1]))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(f"malformed region model: {exc!r}", field="regions") from exc
        return model

    # ------------------------------------------------------------ internals

    def _rows(self, vectors: npt.ArrayLike, field: str) -> Matrix:
        rows = np.asarray(vectors, dtype=np.float64)
        if rows.ndim != 2:
            raise ValidationError(f"must be a matrix, got shape {rows.shape}", field=field)
        if self.fitted and len(rows) and rows.shape[1] != self._centroids.shape[1]:
            raise ValidationError(f"has dimension {rows.shape[1]}, the regions "
                                  f"{self._centroids.shape[1]}", field=field)
        if not np.all(np.isfinite(rows)):
            raise ValidationError("must be finite", field=field)
        norms = np.linalg.norm(rows, axis=1)
        if np.any(norms == 0):
            raise ValidationError("has an all-zero row", field=field)
        unit: Matrix = rows / norms[:, None]
        return unit

    def _labels(self, rows: Matrix) -> tuple[npt.NDArray[np.int64], Matrix]:
        if not self.fitted:
            raise NotAvailableError("the region model has no regions yet: fit it on episodes")
        sims = rows @ unit(self._centroids).T
        labels = np.argmax(sims, axis=1)
        best: Matrix = sims[np.arange(len(rows)), labels]
        return labels, best

    def _refit(self, points: Matrix, weights: npt.NDArray[np.float64]) -> None:
        old = self._centroids if self.fitted else None
        rng = np.random.default_rng([self.seed, self.refits])
        means, counts, quality = kmeans(points, weights, self.k, rng, self.max_iter)
        self._centroids, self._counts = means, [round(float(c)) for c in counts]
        self._fit_quality, self._since_sum, self._since_n = quality, 0.0, 0
        self.refits += 1
        if old is not None:
            self._remap(np.argmax(unit(old) @ unit(means).T, axis=1).tolist())

    def _remap(self, new_of: list[int]) -> None:
        """Carry transitions to the new region nearest each old centroid (merging counts)."""
        transitions: dict[tuple[int, str], dict[int, int]] = {}
        for (r, a), nexts in self._transitions.items():
            target = transitions.setdefault((new_of[r], a), {})
            for to, n in nexts.items():
                target[new_of[to]] = target.get(new_of[to], 0) + n
        stats: dict[tuple[int, str], _Stats] = {}
        for (r, a), s in sorted(self._stats.items()):
            merged = stats.setdefault((new_of[r], a), _Stats())
            merged.n += s.n
            merged.reward_sum += s.reward_sum
            merged.successes += s.successes
        self._transitions, self._stats = transitions, stats
        if self._last_state is not None:
            self._last_state = new_of[self._last_state]
        self._pending = [(new_of[r], acts, rw, ok) for r, acts, rw, ok in self._pending]

    def _check_region(self, region: int, field: str) -> None:
        if isinstance(region, bool) or not isinstance(region, int | np.integer) or not (
                0 <= region < self.n_regions):
            raise ValidationError(f"no region {region!r} (the model has {self.n_regions})",
                                  field=field)

    @staticmethod
    def _check_query(region: int) -> None:
        if isinstance(region, bool) or not isinstance(region, int | np.integer) or region < 0:
            raise ValidationError(f"must be a region id (int >= 0), got {region!r}",
                                  field="region")


def _action(action_type: object) -> str:
    if not isinstance(action_type, str) or not action_type.strip():
        raise ValidationError("must be a non-empty string", field="action_type")
    return action_type.strip().lower()
