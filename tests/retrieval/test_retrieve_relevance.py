"""Relevance first (issue 24): boosts reorder relevant items, never lift others above them.

Real stores in tmp_path through the facade. The shape is the demo's: an alert whose
many auto-linked "causes" are unrelated trades, which the causal stream used to lift
above the alert itself.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import embed_one
from tests.retrieval.retrieve_support import HOUR, open_grimoire

MINUTE = 60_000
ALERT = "Clade alert: Chainlink WETH/USD oracle lagging 3 blocks behind spot"
TOPIC = ("chainlink", "oracle", "lagging", "blocks", "spot", "feed", "stale", "price")
NOISE = ("swap", "rebalance", "uniswap", "gas", "fees", "slippage", "liquidity", "volume")


def _noisy_store(g: Grimoire, clock: FrozenClock, trades: int = 30) -> str:
    """Trades (critical, recent) each linked as a cause of one alert; returns the alert."""
    start = clock()
    causes = [g.episode_write(
        text=f"eth-dca swap ${1000 + 37 * i:,} on WETH/USDC via uniswap_v3: "
             f"+${i}.10 ({i}.2 bps), gas {i % 9}.1 gwei", type="action",
        importance="critical", timestamp=start + i * MINUTE)["id"] for i in range(trades)]
    alert = g.episode_write(text=ALERT, type="clade_alert", importance="routine",
                            timestamp=start + trades * MINUTE)["id"]
    for cause in causes:
        g.causal_link(cause_id=cause, effect_id=alert, weight=1.0)
    clock.set(start + (trades + 1) * MINUTE)
    return alert


def test_the_episode_a_query_repeats_ranks_first_above_causal_noise(tmp_path: Path) -> None:
    clock = FrozenClock(1_767_225_600_000)
    with open_grimoire(tmp_path / "g", clock) as g:
        alert = _noisy_store(g, clock)
        for query in (ALERT, ALERT.lower() + "!"):
            items = g.retrieve(query=query, k=10, mode="browse")["items"]
            assert items[0]["id"] == alert, [i["content"][:40] for i in items[:3]]
            assert items[0]["factors"]["relevance"]["tier"] == 2
            # the trades did get their causal boost: it just cannot lift them past the alert
            assert any("causal" in i["factors"] for i in items[1:])
            assert all(items[0]["score"] > i["score"] for i in items[1:])


def test_a_relevant_episode_outranks_boosted_noise_without_repeating_it(
        tmp_path: Path) -> None:
    clock = FrozenClock(1_767_225_600_000)
    with open_grimoire(tmp_path / "g", clock) as g:
        alert = _noisy_store(g, clock)
        items = g.retrieve(query="Chainlink oracle lagging behind spot", k=10,
                           mode="browse")["items"]
        assert items[0]["id"] == alert
        assert items[0]["factors"]["relevance"]["tier"] == 1
        # The query neither asks why nor names the alert (it does not repeat its text): the
        # alert's causes are not what it asked about, so the causal stream lifts nothing.
        assert not any("causal" in i["factors"] for i in items)
        # Named (repeated) or asked why, the same causes are boosted (below the alert).
        for query in (ALERT, "Why is the Chainlink oracle lagging behind spot?"):
            asked = g.retrieve(query=query, k=10, mode="browse")["items"]
            assert any("causal" in i["factors"] for i in asked), query


def test_the_reranker_s_causal_feature_is_the_same_collected_as_served(
        tmp_path: Path) -> None:
    """The reranker reads the causal boost as a feature on every query; collecting its
    features for training (a feature sink, reranker off) must see the boost it is served
    with, or the model learns on a zero column."""
    from grimoire.retrieval.learned.features import FEATURES
    from grimoire.retrieval.stages.learned import FEATURE_SINK

    column = FEATURES.index("causal")
    clock = FrozenClock(1_767_225_600_000)
    with open_grimoire(tmp_path / "g", clock) as g:
        _noisy_store(g, clock)
        sink: list = []
        g.context.extras[FEATURE_SINK] = sink
        try:
            g.retrieve(query="Chainlink oracle lagging behind spot", k=10, mode="browse")
        finally:
            g.context.extras.pop(FEATURE_SINK, None)
        _, _, _, features = sink[-1]
        assert np.asarray(features)[:, column].max() > 0.0


def test_a_why_question_walks_the_chain_past_relevant_items(tmp_path: Path) -> None:
    """The exception: asked why, the cause outranks the event whose text it repeats."""
    clock = FrozenClock(1_767_225_600_000)
    with open_grimoire(tmp_path / "g", clock) as g:
        start = clock()
        cause = g.episode_write(text="The reservoir pumps of Ashford failed overnight",
                                timestamp=start)["id"]
        crisis = g.episode_write(text="Ashford ran out of drinking water",
                                 timestamp=start + HOUR)["id"]
        g.causal_link(cause_id=cause, effect_id=crisis)
        clock.set(start + 2 * HOUR)
        why = g.retrieve(query="Why: Ashford ran out of drinking water?", k=5,
                         mode="browse")["items"]
        assert [i["id"] for i in why[:2]] == [cause, crisis]
        plain = g.retrieve(query="Ashford ran out of drinking water", k=5,
                           mode="browse")["items"]
        assert plain[0]["id"] == crisis


words = st.lists(st.sampled_from(TOPIC), min_size=1, max_size=4, unique=True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topical=st.lists(st.lists(st.sampled_from(TOPIC), min_size=1, max_size=5),
                        min_size=1, max_size=5),
       noise=st.lists(st.tuples(st.lists(st.sampled_from(NOISE), min_size=1, max_size=5),
                                st.sampled_from(["routine", "notable", "critical"]),
                                st.integers(0, 120)), min_size=1, max_size=12),
       links=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 4),
                                st.floats(0.1, 1.0)), max_size=20),
       query=words, why_word=st.booleans())
def test_no_boost_lifts_an_unmatched_item_above_a_matched_one(
        topical: list[list[str]], noise: list[tuple[list[str], str, int]],
        links: list[tuple[int, int, float]], query: list[str], why_word: bool) -> None:
    """Items sharing no word with the query (cosine ≤ 0.1) never outrank items holding
    every query word, whatever their importance, recency or causal links; and the
    printed scores never increase down the ranking."""
    clock = FrozenClock(1_767_225_600_000)
    with tempfile.TemporaryDirectory() as tmp, open_grimoire(Path(tmp) / "g", clock) as g:
        start = clock()
        topical = [*topical, query]  # at least one item holds every query word
        # the noise comes first, so it can be linked as a cause of the topical items
        noise_ids = [g.episode_write(text=" ".join(t), importance=imp,
                                     timestamp=start + minute * MINUTE)["id"]
                     for t, imp, minute in noise]
        topic_ids = [g.episode_write(text=" ".join(t), importance="routine",
                                     timestamp=start + 3 * HOUR + i * MINUTE)["id"]
                     for i, t in enumerate(topical)]
        for n, t, weight in links:
            if n < len(noise_ids) and t < len(topic_ids):
                g.causal_link(cause_id=noise_ids[n], effect_id=topic_ids[t], weight=weight)
        clock.set(start + 4 * HOUR)
        text = " ".join(query)
        result = g.retrieve(query=("What made " if why_word else "") + text, k=20,
                            mode="browse", max_tokens=100_000)
        items = result["items"]
        scores = [i["score"] for i in items]
        assert scores == sorted(scores, reverse=True)
        if why_word:
            return  # a why question may walk the chain past them (the exception)
        q = embed_one(g.context.embedder, text)
        vectors = dict(zip(noise_ids, g.context.episodes.vectors_for(noise_ids), strict=True))
        rank = {i["id"]: r for r, i in enumerate(items)}
        full = [rank[i] for i, t in zip(topic_ids, topical, strict=True)
                if set(query) <= set(t) and i in rank]
        unmatched = [rank[i] for i in noise_ids
                     if i in rank and float(np.dot(vectors[i], q)) <= 0.1]
        if full and unmatched:
            assert max(full) < min(unmatched), items
