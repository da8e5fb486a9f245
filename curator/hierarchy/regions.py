"""Region MDP over episode embeddings (SPEC §11, seed 003 RFC-013 Part A).

Owns ``RegionModel``: regions are clusters of episode embeddings (spherical
k-means, seeded, so the same data gives the same regions); consecutive
episodes give transitions (state region, action type) → next region with a
reward; from those, ``best_action``, ``p_success`` (Beta(1, 1) prior, so it
is defined before any data) and ``region_quality`` for context-aware decay
(0.7 + 0.25 · quality). It must not read stores or clocks: callers pass
episodes and vectors in, and persist ``to_dict()`` (JSON-safe, exact round
trip) in the semantic store's meta table.

The read side (regions, ``assign``, ``best_action``, ``p_success``,
``region_quality``, the persisted format's centroids and outcome counts)
lives in ``grimoire.retrieval.regions.RegionView``, which this class extends: retrieval
reads the persisted model through it without importing the curator.

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
from typing import Any

import numpy as np
import numpy.typing as npt

from curator.hierarchy.kmeans import kmeans, unit
from grimoire.config import CuratorConfig
from grimoire.errors import ValidationError
from grimoire.logs import get_logger
from grimoire.records import Episode, EpisodeType, Outcome
from grimoire.retrieval.regions import FORMAT, ActionStats, RegionView, action_name, check_format

__all__ = ["FORMAT", "RegionModel", "action_types", "episode_reward"]

log = get_logger(__name__)

Matrix = npt.NDArray[np.float64]
_MAX_PENDING = 32  # actions waiting for the next observed state; older ones are dropped
_OUTCOME_REWARD = {Outcome.POSITIVE: 1.0, Outcome.NEGATIVE: -1.0, Outcome.NEUTRAL: 0.0}


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


class RegionModel(RegionView):
    """Regions of embedding space and the action outcomes observed from each, learned."""

    def __init__(self, k: int, *, seed: int = 0, refit_drift: float = 0.1,
                 min_drift_points: int = 32, max_iter: int = 50) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError("must be an integer >= 1", field="regions")
        if not 0.0 < refit_drift <= 2.0:
            raise ValidationError("must be in (0, 2]", field="regions_refit_drift")
        super().__init__()  # regions (running means of unit vectors), outcome counts
        self.k, self.seed, self.refit_drift = k, int(seed), float(refit_drift)
        self.min_drift_points, self.max_iter = int(min_drift_points), int(max_iter)
        self._fit_quality = 1.0  # mean cosine of the fitted points to their centroid
        self._since_sum, self._since_n = 0.0, 0  # the same, for points assigned since
        self.refits = 0
        self.last_drift = 0.0
        self._transitions: dict[tuple[int, str], dict[int, int]] = {}
        self._last_state: int | None = None
        self._pending: list[tuple[int, tuple[str, ...], float, bool]] = []
        self._watermark: tuple[int, str] | None = None

    @classmethod
    def from_config(cls, cfg: CuratorConfig) -> RegionModel:
        return cls(cfg.regions, seed=cfg.regions_seed, refit_drift=cfg.regions_refit_drift,
                   min_drift_points=cfg.regions_min_drift_points)

    # ------------------------------------------------------------ regions

    def fit(self, vectors: npt.ArrayLike) -> list[int]:
        """(Re)fit the regions on these vectors; returns each vector's region.

        Transitions learned so far are carried over to the nearest new region.
        """
        rows = self._rows(vectors, "vectors")
        if len(rows) == 0:
            raise ValidationError("needs at least one vector", field="vectors")
        self._refit(rows, np.ones(len(rows)))
        return [int(x) for x in self._labels(rows)[0]]

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
        action = action_name(action_type)
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(
                reward):
            raise ValidationError("must be a finite number", field="reward")
        key = (int(region_from), action)  # plain ints: numpy ints are not JSON-safe
        nexts = self._transitions.setdefault(key, {})
        nexts[int(region_to)] = nexts.get(int(region_to), 0) + 1
        stats = self._stats.setdefault(key, ActionStats())
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

    def transition_probability(self, region: int, action_type: str, region_to: int) -> float:
        """P(region_to | region, action) = count / total (0 with no data)."""
        self._check_query(region)
        nexts = self._transitions.get((region, action_name(action_type)), {})
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
            check_format(data)
            model = cls(int(data["k"]), seed=int(data["seed"]),
                        refit_drift=float(data["refit_drift"]),
                        min_drift_points=int(data["min_drift_points"]),
                        max_iter=int(data["max_iter"]))
            model._load(data)  # centroids, counts and outcome counts (RegionView)
            model._fit_quality = float(data["fit_quality"])
            model._since_sum, model._since_n = float(data["since_sum"]), int(data["since_n"])
            model.refits, model.last_drift = int(data["refits"]), float(data["last_drift"])
            for r, a, to, n in data["transitions"]:
                model._check_region(int(r), "regions.transitions")
                model._check_region(int(to), "regions.transitions")
                model._transitions.setdefault((int(r), str(a)), {})[int(to)] = int(n)
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
        stats: dict[tuple[int, str], ActionStats] = {}
        for (r, a), s in sorted(self._stats.items()):
            merged = stats.setdefault((new_of[r], a), ActionStats())
            merged.n += s.n
            merged.reward_sum += s.reward_sum
            merged.successes += s.successes
        self._transitions, self._stats = transitions, stats
        if self._last_state is not None:
            self._last_state = new_of[self._last_state]
        self._pending = [(new_of[r], acts, rw, ok) for r, acts, rw, ok in self._pending]
