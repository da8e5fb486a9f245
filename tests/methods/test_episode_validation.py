"""Bad input to the episodic store raises ValidationError, names the field, writes nothing;
property tests: any valid episode round-trips exactly, and filtered search equals a
brute-force ranking."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.errors import ValidationError
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Importance, Outcome, Regime
from grimoire.stores.episodes.schema import episode_from_json, episode_to_json
from grimoire.stores.episodes.store import EpisodeFilter, EpisodeStore

EMB = HashEmbedder(dim=32)
_counter = itertools.count()


def make_episode(**overrides: Any) -> Episode:
    n = next(_counter)
    fields: dict[str, Any] = {"id": f"v-{n}", "text": f"episode text {n}",
                              "type": EpisodeType.OBSERVATION, "timestamp": 1_000 + n}
    fields.update(overrides)
    return Episode(**fields)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=EMB.dim,
                           config=EpisodesConfig(flush_rows=3), clock=FrozenClock()) as s:
        good = [make_episode() for _ in range(4)]
        s.append(good, EMB.embed([e.text for e in good]))
        yield s


def _snapshot(s: EpisodeStore) -> tuple[int, list[Episode], int]:
    return s.count(), list(s.scan()), len(s.text_search("episode", 100))


BAD_VECTOR_CASES = [
    ("dimension", lambda v: v[:, :16], "shape"),
    ("dtype", lambda v: v.astype(np.float64), "float32"),
    ("nan", lambda v: np.where(np.arange(v.shape[1]) == 3, np.float32("nan"), v), "NaN"),
    ("inf", lambda v: np.full_like(v, np.inf), "NaN or infinite"),
    ("zero", lambda v: np.zeros_like(v), "all-zero"),
    ("count", lambda v: np.vstack([v, v]), "count mismatch"),
    ("list", lambda v: v.tolist(), "numpy array"),
    ("1-d", lambda v: v[0], "shape"),
]


@pytest.mark.parametrize(("case", "mangle", "message"), BAD_VECTOR_CASES,
                         ids=[c[0] for c in BAD_VECTOR_CASES])
def test_bad_vectors_are_refused_and_nothing_is_written(
    store: EpisodeStore, case: str, mangle: Any, message: str
) -> None:
    before = _snapshot(store)
    eps = [make_episode()]
    with pytest.raises(ValidationError, match=message) as err:
        store.append(eps, mangle(EMB.embed([eps[0].text])))
    assert err.value.field == "vectors"
    assert _snapshot(store) == before
    assert store.get(eps[0].id) is None
    store.append(eps, EMB.embed([eps[0].text]))  # the same id is still free
    assert store.get(eps[0].id) == eps[0]


BAD_EPISODES = [
    ("not-episode", {"_raw": {"text": "a dict"}}, "episodes[0]"),
    ("empty-text", {"text": "   "}, "text"),
    ("empty-id", {"id": ""}, "id"),
    ("type-str", {"type": "observation"}, "type"),
    ("regime-str", {"regime": "bull"}, "regime"),
    ("negative-ts", {"timestamp": -1}, "timestamp"),
    ("float-ts", {"timestamp": 1.5}, "timestamp"),
    ("huge-tick", {"tick_id": 2**64}, "tick_id"),
    ("bool-gain", {"gain": True}, "gain"),
    ("nan-gain", {"gain": math.nan}, "gain"),
    ("metric-inf", {"metrics": {"gas": math.inf}}, "metrics.gas"),
    ("metric-key", {"metrics": {"": 1.0}}, "metrics"),
    ("metric-str", {"prediction": {"x": "1"}}, "prediction.x"),
    ("actions", {"actions": ("swap", 3)}, "actions"),
    ("surrogate", {"text": "bad \ud800 text"}, "text"),
    ("tool-type", {"tool": 5}, "tool"),
]


@pytest.mark.parametrize(("case", "override", "field"), BAD_EPISODES,
                         ids=[c[0] for c in BAD_EPISODES])
def test_bad_episodes_are_refused_and_nothing_is_written(
    store: EpisodeStore, case: str, override: dict[str, Any], field: str
) -> None:
    before = _snapshot(store)
    good = make_episode()
    bad: Any = override["_raw"] if "_raw" in override else make_episode(**override)
    batch = [bad, good] if "_raw" in override else [good, bad]
    with pytest.raises(ValidationError) as err:
        store.append(batch, EMB.embed(["x", "y"]))
    assert err.value.field == field
    assert _snapshot(store) == before
    assert store.get(good.id) is None


def test_duplicate_ids_in_batch_or_store_are_refused(store: EpisodeStore) -> None:
    before = _snapshot(store)
    a = make_episode()
    with pytest.raises(ValidationError, match="duplicate") as err:
        store.append([a, dataclasses.replace(a, text="other")], EMB.embed(["x", "y"]))
    assert err.value.field == "id"
    existing = store.recent(1)[0]
    with pytest.raises(ValidationError, match="already exists"):
        store.append([make_episode(), existing], EMB.embed(["x", "y"]))
    assert _snapshot(store) == before


def test_episodes_must_be_a_sequence(store: EpisodeStore) -> None:
    with pytest.raises(ValidationError, match="sequence"):
        store.append(make_episode(), EMB.embed(["x"]))  # type: ignore[arg-type]
    store.append([], np.zeros((0, EMB.dim), dtype=np.float32))  # an empty batch is a no-op
    assert store.count() == 4


def test_bad_queries_are_refused(store: EpisodeStore) -> None:
    q = EMB.embed(["q"])[0]
    with pytest.raises(ValidationError, match="k"):
        store.search(q, -1)
    with pytest.raises(ValidationError, match="k"):
        store.text_search("q", True)
    with pytest.raises(ValidationError, match="shape"):
        store.search(q[:5], 3)
    with pytest.raises(ValidationError, match="NaN"):
        store.search(np.full_like(q, np.nan), 3)
    with pytest.raises(ValidationError, match="query"):
        store.text_search(b"bytes", 3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="filters"):
        store.search(q, 3, {"regime": "bull"})  # type: ignore[arg-type]


def test_unnormalised_vectors_are_stored_normalised(store: EpisodeStore) -> None:
    ep = make_episode()
    v = EMB.embed([ep.text]) * 7.0
    store.append([ep], v)
    got = store.vectors_for([ep.id])  # int8 in memory: its norm is 1 within ~1e-3
    assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-3)
    stored = store.lance_table().to_arrow()["vector"].to_pylist()[-1]
    assert np.linalg.norm(np.asarray(stored, np.float32)) == pytest.approx(1.0, abs=1e-6)
    assert store.search(v[0], 1)[0][1] == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------- properties

_opt_text = st.one_of(st.none(), st.text(max_size=20))
_ints = st.integers(min_value=0, max_value=2**63 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_maps = st.dictionaries(st.text(min_size=1, max_size=10), _floats, max_size=4)

episodes_strategy = st.builds(
    Episode,
    id=st.just("set-by-test"),
    text=st.text(min_size=1, max_size=200).filter(lambda t: t.strip() != ""),
    type=st.sampled_from(EpisodeType),
    timestamp=_ints,
    outcome=st.sampled_from(Outcome),
    ref=_opt_text, tool=_opt_text, chain=_opt_text, token_pair=_opt_text,
    importance=st.sampled_from(Importance),
    tick_id=st.one_of(st.none(), _ints),
    regime=st.one_of(st.none(), st.sampled_from(Regime)),
    strategy=_opt_text,
    actions=st.lists(st.text(max_size=10), max_size=3).map(tuple),
    emotional_tag=_opt_text,
    gain=st.one_of(st.none(), _floats),
    valid_from=st.one_of(st.none(), _ints), valid_until=st.one_of(st.none(), _ints),
    metrics=_maps, prediction=_maps, causal_hint=_opt_text,
)


@settings(max_examples=60, deadline=None)
@given(episodes_strategy)
def test_journal_json_roundtrip_is_exact(ep: Episode) -> None:
    assert episode_from_json(episode_to_json(ep)) == ep


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(episodes_strategy, min_size=1, max_size=5))
def test_any_valid_episode_roundtrips_through_buffer_and_lancedb(
    store: EpisodeStore, batch: list[Episode]
) -> None:
    """One store across examples: each batch reads back equal, buffered and flushed."""
    # Fresh ids: the store outlives examples, and hypothesis replays examples when shrinking.
    batch = [dataclasses.replace(e, id=f"h-{next(_counter)}") for e in batch]
    store.append(batch, EMB.embed([e.text for e in batch]))
    assert [store.get(e.id) for e in batch] == batch
    store.flush()
    assert [store.get(e.id) for e in batch] == batch


BF_N = 60
_BF_RNG = np.random.default_rng(7)
BF_EPISODES = [Episode(id=f"b{i}", text=f"t{i}", type=EpisodeType.ACTION, timestamp=i,
                       regime=[Regime.BULL, Regime.BEAR, None][i % 3], strategy="ab"[i % 2])
               for i in range(BF_N)]
BF_VECTORS = _BF_RNG.standard_normal((BF_N, EMB.dim)).astype(np.float32)
BF_VECTORS /= np.linalg.norm(BF_VECTORS, axis=1, keepdims=True)


@pytest.fixture
def bf_store(tmp_path: Path) -> Any:
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=EMB.dim,
                           config=EpisodesConfig(flush_rows=7), clock=FrozenClock()) as s:
        for start in range(0, BF_N, 9):  # most rows flushed, the last few buffered
            s.append(BF_EPISODES[start:start + 9], BF_VECTORS[start:start + 9])
        assert 0 < s.buffered < BF_N
        yield s


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 70),
    regime=st.one_of(st.none(), st.sampled_from([Regime.BULL, Regime.BEAR])),
    strategy=st.one_of(st.none(), st.sampled_from(["a", "b", "zzz"])),
    since=st.one_of(st.none(), st.integers(0, 70)),
    until=st.one_of(st.none(), st.integers(0, 70)),
)
def test_filtered_search_equals_brute_force(
    bf_store: EpisodeStore, seed: int, k: int, regime: Regime | None,
    strategy: str | None, since: int | None, until: int | None,
) -> None:
    query = np.random.default_rng(seed).standard_normal(EMB.dim).astype(np.float32)
    flt = EpisodeFilter(regime=regime, strategy=strategy, since_ms=since, until_ms=until)
    got = bf_store.search(query, k, flt)
    keep = [i for i, e in enumerate(BF_EPISODES)
            if (regime is None or e.regime == regime)
            and (strategy is None or e.strategy == strategy)
            and (since is None or e.timestamp >= since)
            and (until is None or e.timestamp < until)]
    unit = query / np.linalg.norm(query)
    # ranked on the vectors as the store holds them (int8: episodes_index), which are
    # within ~0.001 of the exact cosines
    rows = bf_store.all_vectors()[1].dequantize()
    held = rows @ unit
    want = sorted(keep, key=lambda i: (-held[i], i))[:k]
    assert [e.id for e, _ in got] == [f"b{i}" for i in want]
    np.testing.assert_allclose([s for _, s in got], held[want], atol=1e-5)
    # Each held row is the written vector up to int8 rounding, within one step (max |x| / 127)
    # per component; a cosine with a unit query then moves by at most that row's error norm
    # (Cauchy-Schwarz), whatever the query.
    row_error = np.linalg.norm(rows - BF_VECTORS, axis=1)
    assert np.all(row_error <= np.sqrt(EMB.dim) * np.abs(BF_VECTORS).max(axis=1) / 127)
    exact = (BF_VECTORS @ unit)[want]
    assert np.all(np.abs(np.array([s for _, s in got]) - exact) <= row_error[want] + 1e-6)
