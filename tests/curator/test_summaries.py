"""Hierarchical summaries (seed 002): clustering, extractive L1/L2, MUS pruning."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from curator.hierarchy.summaries import (
    SummaryDraft,
    cluster_episodes,
    l1_summary,
    l2_due,
    l2_summary,
    memory_utility_score,
    recency_score,
    retrieval_frequency_score,
    should_prune,
)
from grimoire.clock import MS_PER_DAY, MS_PER_HOUR
from grimoire.config import CuratorConfig
from grimoire.errors import LLMError, ValidationError
from grimoire.models.embedders import HashEmbedder
from grimoire.records import (
    Category,
    DecayClass,
    Episode,
    EpisodeType,
    GrimoireEntry,
    Outcome,
    Provenance,
    Regime,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def make_episode(i: int, **overrides: Any) -> Episode:
    values: dict[str, Any] = {
        "id": f"ep-{i:04d}",
        "text": f"episode {i}",
        "type": EpisodeType.ACTION,
        "timestamp": T0 + i * 60_000,
        "outcome": Outcome.POSITIVE,
    }
    values.update(overrides)
    return Episode(**values)


def planted(groups: int = 3, per_group: int = 8, noise: int = 4, dim: int = 32,
            spread: float = 0.15, seed: int = 0) -> tuple[list[Episode], np.ndarray, list[int]]:
    """Episodes around ``groups`` random centres, interleaved in time, plus isolated noise."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(groups + noise, dim))
    episodes, rows, labels = [], [], []
    for i in range(groups * per_group):
        g = i % groups
        rows.append(centres[g] / np.linalg.norm(centres[g]) + spread * rng.normal(size=dim)
                    / np.sqrt(dim))
        episodes.append(make_episode(i, text=f"group {g} item {i}"))
        labels.append(g)
    for j in range(noise):
        i = groups * per_group + j
        rows.append(centres[groups + j])
        episodes.append(make_episode(i, text=f"noise {j}"))
        labels.append(-1)
    return episodes, np.array(rows), labels


def ids_of(clusters: Sequence[Any], episodes: Sequence[Episode]) -> list[list[str]]:
    return [[episodes[i].id for i in c.indices] for c in clusters]


def brute_coherence(rows: np.ndarray) -> float:
    unit = rows / np.linalg.norm(rows, axis=1)[:, None]
    pairs = list(itertools.combinations(range(len(unit)), 2))
    return float(np.mean([unit[a] @ unit[b] for a, b in pairs]))


# ---------------------------------------------------------------- clustering


def test_planted_groups_are_recovered_and_noise_left_out() -> None:
    episodes, rows, labels = planted()
    clusters = cluster_episodes(episodes, rows, min_size=3, coherence=0.7)
    assert len(clusters) == 3
    for cluster in clusters:
        assert {labels[i] for i in cluster.indices} == {labels[cluster.indices[0]]}
        assert cluster.size == 8 and labels[cluster.indices[0]] >= 0
        assert cluster.coherence >= 0.7
        assert cluster.coherence == pytest.approx(brute_coherence(rows[list(cluster.indices)]))


def test_clusters_do_not_depend_on_input_order() -> None:
    episodes, rows, _ = planted(seed=3)
    expected = ids_of(cluster_episodes(episodes, rows, min_size=3, coherence=0.7), episodes)
    order = list(range(len(episodes)))
    random.Random(1).shuffle(order)
    shuffled = [episodes[i] for i in order]
    got = ids_of(cluster_episodes(shuffled, rows[order], min_size=3, coherence=0.7), shuffled)
    assert got == expected


def test_group_by_keeps_regimes_apart() -> None:
    rows = np.tile(np.eye(4)[0], (6, 1))  # identical vectors: one cluster without grouping
    episodes = [make_episode(i, regime=Regime.BULL if i < 3 else Regime.BEAR) for i in range(6)]
    assert len(cluster_episodes(episodes, rows, min_size=3, coherence=0.7)) == 1
    split = cluster_episodes(episodes, rows, min_size=3, coherence=0.7, group_by=("regime",))
    assert ids_of(split, episodes) == [["ep-0000", "ep-0001", "ep-0002"],
                                       ["ep-0003", "ep-0004", "ep-0005"]]


def test_real_text_embeddings_cluster_by_topic() -> None:
    """With the hash embedder, gas observations and LP rebalances land in different clusters."""
    texts = ([f"gas price low at night {i} gwei swap cheap" for i in range(4)]
             + [f"rebalance LP position WETH USDC range {i}" for i in range(4)])
    episodes = [make_episode(i, text=t) for i, t in enumerate(texts)]
    rows = HashEmbedder(dim=256).embed(texts)
    clusters = cluster_episodes(episodes, rows, min_size=3, coherence=0.3)
    assert sorted(sorted(c.indices) for c in clusters) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"vectors": np.zeros((2, 3))}, "vectors"), ({"vectors": np.ones((3, 3))}, "vectors"),
     ({"min_size": 0}, "min_size"), ({"coherence": 2.0}, "coherence"),
     ({"group_by": ("nope",)}, "group_by"), ({"vectors": np.full((2, 3), np.nan)}, "vectors")],
)
def test_bad_clustering_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"vectors": np.ones((2, 3)), "min_size": 2, "coherence": 0.5}
    args.update(kwargs)
    vectors = args.pop("vectors")
    with pytest.raises(ValidationError) as info:
        cluster_episodes([make_episode(0), make_episode(1)], vectors, **args)
    assert info.value.field == field


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 40), threshold=st.floats(0.0, 0.95),
       min_size=st.integers(1, 4))
def test_property_every_cluster_meets_its_thresholds(
    seed: int, n: int, threshold: float, min_size: int
) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, 6)) + rng.integers(0, 3, size=(n, 1)) * 2.0
    episodes = [make_episode(i) for i in range(n)]
    clusters = cluster_episodes(episodes, rows, min_size=min_size, coherence=threshold)
    seen: set[int] = set()
    for cluster in clusters:
        assert cluster.size >= min_size
        assert cluster.coherence >= threshold - 1e-9
        if cluster.size > 1:
            assert cluster.coherence == pytest.approx(
                brute_coherence(rows[list(cluster.indices)]), abs=1e-9)
        assert seen.isdisjoint(cluster.indices)
        seen.update(cluster.indices)


# ---------------------------------------------------------------- L1


def market_cluster() -> tuple[list[Episode], Any]:
    gas = [4.1, 5.0, 7.9, 6.2]
    episodes = [
        make_episode(i, text=f"swap {i} ETH on uniswap", tool="uniswap", regime=Regime.HIGH_VOL,
                     token_pair="WETH/USDC", strategy="eth-dca", gain=g,
                     outcome=Outcome.POSITIVE if g > 0 else Outcome.NEGATIVE,
                     metrics={"gas_gwei": gas[i], "slippage_bps": 3.0 + i})
        for i, g in enumerate([1.5, -0.5, 2.0, 0.25])
    ]
    rows = np.array([[1.0, 0.0, 0.1 * i] for i in range(4)])
    rows[2] = [1.0, 0.0, 0.12]  # episode 2 sits closest to the centroid
    [cluster] = cluster_episodes(episodes, rows, min_size=3, coherence=0.7)
    return episodes, cluster


def test_l1_names_shared_fields_ranges_and_quotes_the_central_episodes() -> None:
    episodes, cluster = market_cluster()
    draft = l1_summary(cluster, episodes, examples=2)
    assert draft.level == 1
    assert draft.parent_episode_ids == tuple(e.id for e in episodes)
    assert draft.parent_summary_ids == ()
    assert draft.regime is Regime.HIGH_VOL and draft.strategy == "eth-dca"
    assert "regime high_vol; strategy eth-dca; tool uniswap; token pair WETH/USDC" in draft.content
    assert "gas 4.1–7.9 gwei" in draft.content
    assert "slippage 3–6 bps" in draft.content
    assert "Outcomes: 3 positive, 1 negative; gain -0.5 to 2 (total 3.25)" in draft.content
    assert draft.content.startswith("4 episodes, 2026-01-01 00:00–00:03 UTC:")
    assert draft.content.endswith("Examples: “swap 2 ETH on uniswap”; “swap 1 ETH on uniswap”.")
    assert draft.tags == ("summary", "summary:l1", "regime:high_vol", "strategy:eth-dca",
                          "token_pair:WETH/USDC", "tool:uniswap")
    assert (draft.valid_from, draft.valid_until) == (T0, T0 + 3 * 60_000)


def test_l1_counts_but_never_quotes_an_episode_marked_as_instructing() -> None:
    episodes, cluster = market_cluster()
    episodes[2] = dataclasses.replace(episodes[2], marks=("untrusted:instructions",))
    draft = l1_summary(cluster, episodes, examples=2)
    assert draft.content.startswith("4 episodes")
    assert "swap 2 ETH" not in draft.content  # the central one, marked: passed over
    assert draft.content.endswith("Examples: “swap 1 ETH on uniswap”; “swap 0 ETH on uniswap”.")


def test_l1_reports_mixed_fields_without_claiming_a_shared_one() -> None:
    episodes = [make_episode(i, regime=Regime.BULL if i else Regime.BEAR, tool="uniswap")
                for i in range(3)]
    [cluster] = cluster_episodes(episodes, np.ones((3, 2)), min_size=3, coherence=0.7)
    draft = l1_summary(cluster, episodes)
    assert draft.regime is None
    assert "regime mixed (bull 2, bear 1)" in draft.content
    assert "regime:" not in " ".join(draft.tags)


def test_l1_rejects_a_cluster_from_other_episodes() -> None:
    episodes, cluster = market_cluster()
    with pytest.raises(ValidationError) as info:
        l1_summary(cluster, episodes[:2])
    assert info.value.field == "cluster"


class _Writer:
    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.calls: list[tuple[int, str, list[str]]] = []

    def write_summary(self, level: int, facts: str, excerpts: Sequence[str]) -> str:
        self.calls.append((level, facts, list(excerpts)))
        if self.reply is None:
            raise LLMError("timeout")
        return self.reply


def test_llm_rewrites_the_prose_but_not_the_structure() -> None:
    episodes, cluster = market_cluster()
    plain = l1_summary(cluster, episodes)
    writer = _Writer("Gas was\ncheap;  swaps went well.")
    draft = l1_summary(cluster, episodes, llm=writer)
    assert draft.content == "Gas was cheap; swaps went well."
    assert writer.calls[0][0] == 1 and writer.calls[0][1] == plain.content
    assert len(writer.calls[0][2]) == 4
    assert draft.parent_episode_ids == plain.parent_episode_ids and draft.tags == plain.tags


def test_failing_llm_falls_back_to_the_extractive_summary_and_logs_it() -> None:
    episodes, cluster = market_cluster()
    with capture_logs() as logs:
        draft = l1_summary(cluster, episodes, llm=_Writer(None))
    assert draft.content == l1_summary(cluster, episodes).content
    assert [entry["event"] for entry in logs] == ["curator.summary.llm_failed"]


# ---------------------------------------------------------------- L2


def as_entry(id_: str, draft: SummaryDraft) -> GrimoireEntry:
    return GrimoireEntry(
        id=id_, category=Category.INSIGHT, content=draft.content, confidence=0.5,
        quality_score=0.5, decay_class=DecayClass.TACTICAL, provenance=Provenance.SELF_LEARNED,
        created_at=T0, last_accessed_at=T0, market_regime=draft.regime, strategy=draft.strategy,
        parent_episode_ids=draft.parent_episode_ids, tags=draft.tags,
        valid_from=draft.valid_from, valid_until=draft.valid_until)


def two_sessions() -> tuple[list[Episode], SummaryDraft, SummaryDraft]:
    episodes, cluster = market_cluster()
    first = l1_summary(cluster, episodes)
    later = [make_episode(10 + i, text=f"rebalance LP {i}", regime=Regime.SIDEWAYS,
                          strategy="eth-dca", metrics={"gas_gwei": 12.0 + i}) for i in range(3)]
    [c2] = cluster_episodes(later, np.ones((3, 2)), min_size=3, coherence=0.7)
    return episodes + later, first, l1_summary(c2, later)


def test_l2_from_entries_links_l1s_and_covers_every_episode() -> None:
    episodes, first, second = two_sessions()
    draft = l2_summary([as_entry("l1-b", second), as_entry("l1-a", first)], episodes)
    assert draft.level == 2
    assert draft.parent_summary_ids == ("l1-a", "l1-b")  # chronological, not input order
    assert draft.parent_episode_ids == first.parent_episode_ids + second.parent_episode_ids
    assert draft.regime is None and draft.strategy == "eth-dca"
    assert draft.content.startswith("Chapter of 2 session summaries covering 7 episodes, "
                                    "2026-01-01 00:00–00:12 UTC.")
    assert "Regimes: high_vol in 1 session, sideways in 1 session." in draft.content
    assert "Strategy eth-dca in 2 sessions." in draft.content
    assert "gas 4.1–14 gwei" in draft.content
    assert draft.content.endswith("Highlights: “swap 2 ETH on uniswap”; “rebalance LP 0”.")
    assert draft.tags == ("summary", "summary:l2", "strategy:eth-dca")


def test_l2_from_drafts_without_episodes_still_summarises() -> None:
    _, first, second = two_sessions()
    draft = l2_summary([("a", first), ("b", second)])
    assert "Metrics:" not in draft.content and "Highlights:" in draft.content
    assert draft.valid_from == first.valid_from and draft.valid_until == second.valid_until


def test_l2_refuses_empty_duplicate_or_l2_input() -> None:
    _, first, second = two_sessions()
    with pytest.raises(ValidationError):
        l2_summary([])
    with pytest.raises(ValidationError, match="twice"):
        l2_summary([("a", first), ("a", second)])
    chapter = l2_summary([("a", first), ("b", second)])
    with pytest.raises(ValidationError, match="L2"):
        l2_summary([as_entry("c", chapter)])
    with pytest.raises(ValidationError, match="level-2"):
        l2_summary([("c", chapter)])


def test_l2_is_due_every_configured_cycles() -> None:
    cfg = CuratorConfig()
    assert [c for c in range(0, 31) if l2_due(c, cfg)] == [10, 20, 30]


# ---------------------------------------------------------------- MUS and pruning


def test_mus_is_the_seed_formula() -> None:
    assert memory_utility_score(1.0, 0.0, 0.0) == pytest.approx(0.4)
    assert memory_utility_score(0.5, 0.5, 1.0) == pytest.approx(0.6)
    cfg = CuratorConfig()
    assert memory_utility_score(0.2, 0.3, 0.4, weights=cfg.mus_weights) == pytest.approx(
        0.4 * 0.2 + 0.4 * 0.3 + 0.2 * 0.4)


@pytest.mark.parametrize("bad", [-0.1, 1.1, float("nan")])
def test_mus_rejects_inputs_outside_unit_interval(bad: float) -> None:
    with pytest.raises(ValidationError) as info:
        memory_utility_score(0.5, bad, 0.5)
    assert info.value.field == "relevance"


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_property_mus_in_unit_interval_and_monotone(rf: float, rel: float, rec: float,
                                                    more: float) -> None:
    score = memory_utility_score(rf, rel, rec)
    assert 0.0 <= score <= 1.0
    assert memory_utility_score(max(rf, more), rel, rec) >= score


def test_normalisers_map_raw_signals_to_unit_interval() -> None:
    assert retrieval_frequency_score(0, 0) == 0.0
    assert retrieval_frequency_score(9, 9) == 1.0
    assert 0.0 < retrieval_frequency_score(2, 99) < 0.5
    assert recency_score(0, MS_PER_HOUR) == 1.0
    assert recency_score(MS_PER_HOUR, MS_PER_HOUR) == pytest.approx(0.5)
    with pytest.raises(ValidationError):
        recency_score(1, 0)


def test_prune_only_old_summaries_below_their_level_threshold() -> None:
    cfg = CuratorConfig()
    old, young = 8 * MS_PER_DAY, 6 * MS_PER_DAY
    assert should_prune(1, 0.19, old, cfg) and not should_prune(1, 0.21, old, cfg)
    assert should_prune(2, 0.29, old, cfg) and not should_prune(2, 0.31, old, cfg)
    assert not should_prune(1, 0.0, young, cfg)
    with pytest.raises(ValidationError) as info:
        should_prune(3, 0.0, old, cfg)
    assert info.value.field == "level"
