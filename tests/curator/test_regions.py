"""Region MDP (SPEC §11, RFC-013 Part A): regions, transitions, P(success), persistence."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator.hierarchy.kmeans import kmeans
from curator.hierarchy.regions import RegionModel, action_types, episode_reward
from grimoire.config import CuratorConfig
from grimoire.errors import NotAvailableError, ValidationError
from grimoire.records import Episode, EpisodeType, Outcome

T0 = 1_767_225_600_000
DIM = 16


def centres(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, DIM))
    return c / np.linalg.norm(c, axis=1)[:, None]


class Stream:
    """Builds a time-ordered episode stream with vectors near chosen centres."""

    def __init__(self, centre_vectors: np.ndarray, seed: int = 1) -> None:
        self.c = centre_vectors
        self.rng = np.random.default_rng(seed)
        self.episodes: list[Episode] = []
        self.rows: list[np.ndarray] = []

    def add(self, where: int, type_: EpisodeType = EpisodeType.OBSERVATION,
            **fields: Any) -> None:
        i = len(self.episodes)
        self.episodes.append(Episode(id=f"ep-{i:05d}", text=f"e{i}", type=type_,
                                     timestamp=T0 + i * 40_000, **fields))
        self.rows.append(self.c[where] + 0.05 * self.rng.normal(size=DIM))

    def act(self, where: int, action: str, good: bool, gain: float | None = None) -> None:
        self.add(where)  # the state before
        self.add(where, EpisodeType.ACTION, actions=(action,),
                 outcome=Outcome.POSITIVE if good else Outcome.NEGATIVE, gain=gain)

    @property
    def vectors(self) -> np.ndarray:
        return np.array(self.rows)


def planted_stream(seed: int = 1) -> Stream:
    """Swap succeeds in region A (0) and fails in region B (1); hold succeeds in B."""
    s = Stream(centres(2), seed)
    rng = random.Random(seed)
    for _ in range(30):
        where = rng.randrange(2)
        if where == 0:
            s.act(0, "swap", True, gain=rng.uniform(0.5, 2.0))
        elif rng.random() < 0.5:
            s.act(1, "swap", False, gain=-rng.uniform(0.5, 2.0))
        else:
            s.act(1, "hold", True, gain=0.1)
    s.add(0)  # the state after the last action
    return s


def learned(stream: Stream, **kw: Any) -> RegionModel:
    model = RegionModel(kw.pop("k", 2), **kw)
    model.update_from_episodes(stream.episodes, stream.vectors)
    return model


def test_planted_structure_shows_in_best_action_and_p_success() -> None:
    stream = planted_stream()
    model = learned(stream)
    a, b = (model.assign(c) for c in centres(2))
    assert a != b
    assert model.p_success(a, "swap") > 0.9
    assert model.p_success(b, "swap") < 0.15
    top_a = model.best_action(a)
    assert top_a[0][0] == "swap" and top_a[0][1] > 0.5
    ranked_b = [action for action, _, _ in model.best_action(b)]
    assert ranked_b == ["hold", "swap"]
    assert model.region_quality(a) > model.region_quality(b)
    assert 0.7 < model.decay_factor(b) < model.decay_factor(a) < 0.95
    n_swaps_a = sum(n for act, _, n in top_a if act == "swap")
    assert n_swaps_a == sum(1 for e in stream.episodes
                            if e.actions == ("swap",) and e.outcome is Outcome.POSITIVE)


def test_no_data_gives_the_prior_not_an_error() -> None:
    model = RegionModel(4)
    assert model.p_success(0, "swap") == 0.5
    assert model.region_quality(3) == 0.5
    assert model.decay_factor(3) == pytest.approx(0.825)
    assert model.best_action(0) == []
    assert model.transition_probability(0, "swap", 1) == 0.0
    assert not model.fitted
    with pytest.raises(NotAvailableError):
        model.assign(np.ones(DIM))
    with pytest.raises(ValidationError) as info:
        model.record_transition(0, "swap", 0, 1.0)
    assert info.value.field == "region_from"
    assert model.update_from_episodes([], np.zeros((0, DIM))) == 0


def test_record_transition_counts_and_probabilities() -> None:
    model = RegionModel(3)
    model.fit(centres(3))
    model.record_transition(0, "Swap", 1, 2.0)
    model.record_transition(0, "swap", 1, -1.0)
    model.record_transition(np.int64(0), "swap", np.int64(2), 0.5, success=False)
    json.dumps(model.to_dict())  # numpy region ids were stored as plain ints
    assert model.transition_probability(0, "swap", 1) == pytest.approx(2 / 3)
    assert model.best_action(0) == [("swap", pytest.approx(0.5), 3)]
    assert model.p_success(0, "swap") == pytest.approx((1 + 1) / (3 + 2))
    for bad, field in (({"reward": float("inf")}, "reward"), ({"action_type": " "}, "action_type"),
                       ({"region_to": 7}, "region_to")):
        args: dict[str, Any] = {"region_from": 0, "action_type": "swap", "region_to": 1,
                                "reward": 1.0}
        args.update(bad)
        with pytest.raises(ValidationError) as info:
            model.record_transition(**args)
        assert info.value.field == field


def test_persistence_round_trips_exactly_through_json() -> None:
    stream = planted_stream()
    model = learned(stream)
    data = json.loads(json.dumps(model.to_dict()))
    again = RegionModel.from_dict(data)
    assert again.to_dict() == model.to_dict()
    probe = centres(2)[1] + 0.01
    assert again.assign(probe) == model.assign(probe)
    assert again.best_action(1) == model.best_action(1)
    # Both keep learning identically from the same next batch.
    more = planted_stream(seed=9)
    shifted = [replace(e, id="n" + e.id, timestamp=e.timestamp + 10**9) for e in more.episodes]
    model.update_from_episodes(shifted, more.vectors)
    again.update_from_episodes(shifted, more.vectors)
    assert again.to_dict() == model.to_dict()


def test_from_dict_rejects_malformed_state() -> None:
    data = learned(planted_stream()).to_dict()
    with pytest.raises(ValidationError):
        RegionModel.from_dict({**data, "format": 99})
    with pytest.raises(ValidationError):
        RegionModel.from_dict({k: v for k, v in data.items() if k != "stats"})
    with pytest.raises(ValidationError):
        RegionModel.from_dict({**data, "transitions": [[5, "swap", 0, 1]]})
    with pytest.raises(ValidationError):
        RegionModel.from_dict({**data, "centroids": data["centroids"][:1]})


def test_same_data_in_any_order_gives_the_same_model() -> None:
    stream = planted_stream()
    first = learned(stream, k=3).to_dict()
    assert learned(stream, k=3).to_dict() == first
    order = list(range(len(stream.episodes)))
    random.Random(4).shuffle(order)
    shuffled = RegionModel(3)
    shuffled.update_from_episodes([stream.episodes[i] for i in order], stream.vectors[order])
    assert shuffled.to_dict() == first


def test_overlapping_batches_are_not_counted_twice() -> None:
    stream = planted_stream()
    model = learned(stream)
    before = model.to_dict()
    assert model.update_from_episodes(stream.episodes, stream.vectors) == 0
    assert model.to_dict() == before


def test_an_action_waits_for_the_next_state_across_batches() -> None:
    s = Stream(centres(2))
    s.add(0)
    s.add(0)
    s.add(1)
    s.add(0, EpisodeType.ACTION, actions=("bridge",), outcome=Outcome.POSITIVE)
    s.add(1)
    model = RegionModel(2)
    model.update_from_episodes(s.episodes[:4], s.vectors[:4])
    a, b = (model.assign(c) for c in centres(2))
    assert model.best_action(b) == []  # the action has no next state yet
    model.update_from_episodes(s.episodes[4:], s.vectors[4:])
    # From the state before (the observation in B) to the state after (B again).
    assert model.best_action(b) == [("bridge", 1.0, 1)]
    assert model.transition_probability(b, "bridge", b) == 1.0
    assert model.best_action(a) == []


def test_large_drift_refits_and_keeps_what_was_learned() -> None:
    cs = centres(3, seed=5)
    s = Stream(cs)
    for i in range(12):
        s.act(i % 2, "swap", good=i % 2 == 0)
    s.add(0)
    model = RegionModel(3, min_drift_points=8)
    model.update_from_episodes(s.episodes, s.vectors)
    learned_before = model.to_dict()["stats"]
    refits = model.refits
    new = Stream(cs, seed=2)
    for _ in range(12):
        new.add(2)  # a part of the space never seen before
    shifted = [replace(e, id="n" + e.id, timestamp=e.timestamp + 10**9) for e in new.episodes]
    model.update_from_episodes(shifted, new.vectors)
    assert model.refits == refits + 1
    c = model.assign(cs[2])
    assert len({model.assign(cs[0]), model.assign(cs[1]), c}) == 3
    # Every transition learned before the refit is still counted, now in the
    # region that holds its state: 6 successful swaps from A, 6 failed from B.
    assert sum(row[2] for row in model.to_dict()["stats"]) == 12
    assert sum(row[2] for row in learned_before) == 12
    assert model.best_action(model.assign(cs[0])) == [("swap", 1.0, 6)]
    assert model.best_action(model.assign(cs[1])) == [("swap", -1.0, 6)]
    assert model.best_action(c) == []


def test_small_drift_only_moves_centroids() -> None:
    stream = planted_stream()
    model = learned(stream, min_drift_points=4)
    refits = model.refits
    labels = model.update(centres(2) + 0.01)
    assert model.refits == refits
    assert labels == [model.assign(c) for c in centres(2)]


def test_reward_and_action_type_from_episodes() -> None:
    def ep(**kw: Any) -> Episode:
        return Episode(id="x", text="t", type=EpisodeType.ACTION, timestamp=T0, **kw)

    assert episode_reward(ep(outcome=Outcome.POSITIVE)) == (1.0, True)
    assert episode_reward(ep(outcome=Outcome.NEGATIVE, gain=2.0)) == (2.0, False)
    assert episode_reward(ep(outcome=Outcome.NEUTRAL, gain=-3.0)) == (-3.0, False)
    assert episode_reward(ep(gain=0.5)) == (0.5, True)
    assert episode_reward(ep()) is None
    assert action_types(ep(actions=("Swap", "swap", "bridge"))) == ("swap", "bridge")
    assert action_types(ep(tool="Uniswap")) == ("uniswap",)
    assert action_types(ep()) == ("action",)


def test_from_config_uses_the_curator_section() -> None:
    cfg = CuratorConfig()
    model = RegionModel.from_config(cfg)
    assert (model.k, model.seed, model.refit_drift) == (cfg.regions, cfg.regions_seed,
                                                        cfg.regions_refit_drift)


@settings(max_examples=30, deadline=None)
@given(outcomes=st.lists(st.tuples(st.integers(0, 2), st.booleans(),
                                   st.floats(-5, 5, allow_nan=False)), max_size=40))
def test_property_probabilities_stay_inside_the_open_unit_interval(
    outcomes: list[tuple[int, bool, float]],
) -> None:
    model = RegionModel(3)
    model.fit(centres(3))
    for region, ok, reward in outcomes:
        model.record_transition(region, "swap", (region + 1) % 3, reward, success=ok)
    for region in range(3):
        assert 0.0 < model.p_success(region, "swap") < 1.0
        assert 0.0 < model.region_quality(region) < 1.0
        assert 0.7 < model.decay_factor(region) < 0.95
        total = sum(model.transition_probability(region, "swap", to) for to in range(3))
        assert total in (0.0, pytest.approx(1.0))


def test_identical_vectors_make_one_region_not_empty_ones() -> None:
    model = RegionModel(4)
    assert model.fit(np.tile(centres(1), (5, 1))) == [0] * 5
    assert model.n_regions == 1
    assert np.all(np.isfinite(model.to_dict()["centroids"]))


def test_kmeans_recovers_planted_groups_in_any_order() -> None:
    cs = centres(3, seed=2)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    points = cs[labels] + 0.05 * rng.normal(size=(60, DIM))
    points /= np.linalg.norm(points, axis=1)[:, None]
    means, counts, quality = kmeans(points, np.ones(60), 3, np.random.default_rng(7), 50)
    assert sorted(counts.tolist()) == [20.0, 20.0, 20.0]
    assert quality > 0.95
    perm = rng.permutation(60)
    again = kmeans(points[perm], np.ones(60), 3, np.random.default_rng(7), 50)
    assert np.array_equal(again[0], means) and again[2] == quality
