"""``retrieve`` through the facade on real stores: shape, filters, modes, bookkeeping, errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import NotFoundError, ValidationError
from grimoire.records import Category, Regime
from tests.retrieval.retrieve_support import DAY, HOUR, entry, ids, open_grimoire, put_entry, settle


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_grimoire(tmp_path / "data", clock) as grimoire:
        yield grimoire


def _world(g: Grimoire, clock: FrozenClock) -> dict[str, str]:
    out = {}
    out["swap"] = g.episode_write(text="swap 2 ETH for USDC on uniswap filled at 3010",
                                  type="action", outcome="positive", ref="tx-0xabc",
                                  token_pair="WETH/USDC", strategy="dca", gain=4.0)["id"]
    clock.advance(HOUR)
    out["gas"] = g.episode_write(text="gas price is 80 gwei, swap costs are high",
                                 regime="high_vol")["id"]
    clock.advance(HOUR)
    out["warn"] = put_entry(g, "Avoid swaps when gas is above 60 gwei: they cost more than "
                               "they earn", category=Category.WARNING).id
    out["insight"] = put_entry(g, "Gas is cheapest between 02:00 and 04:00 UTC on base",
                               strategy="dca").id
    return out


def test_items_carry_factors_provenance_and_ref(g: Grimoire, clock: FrozenClock) -> None:
    """Every item says why it ranks there and where it came from."""
    world = _world(g, clock)
    result = g.retrieve(query="swap gas cost", k=5)
    assert result["retrieval_id"] and result["mode"] == "deciding"
    by_id = {item["id"]: item for item in result["items"]}
    assert set(by_id) == set(world.values())
    swap = by_id[world["swap"]]
    assert swap["ref"] == "tx-0xabc" and swap["provenance"]["ref"] == "tx-0xabc"
    assert swap["kind"] == "episode" and "category" not in swap
    warn = by_id[world["warn"]]
    assert warn["category"] == "warning" and warn["provenance"]["parent_episode_ids"] == []
    for item in result["items"]:
        factors = item["factors"]
        assert {"rrf", "confidence", "quality", "recency", "regime"} <= set(factors)
        total = sum(f["contribution"] for f in factors.values() if "contribution" in f)
        multiplier = 1.0
        for f in factors.values():
            multiplier *= f.get("multiplier", 1.0)
        # the boosted score, then the relevance gate: tier first, the boosted score inside
        boosted = total * multiplier
        relevance = factors["relevance"]
        assert relevance["boosted"] == pytest.approx(boosted, abs=1e-5)
        assert item["score"] == pytest.approx(
            relevance["tier"] + boosted / (1 + boosted), abs=1e-5)
    assert [i["rank"] for i in result["items"]] == list(range(1, len(result["items"]) + 1))
    assert swap["backend_ranks"]["vector"] >= 1
    assert {"embed", "candidates", "rank", "respond", "total"} <= set(result["trace"]["ms"])


def test_kinds_categories_strategy_and_min_confidence(g: Grimoire, clock: FrozenClock) -> None:
    world = _world(g, clock)
    only_entries = g.retrieve(query="gas swap", kinds=["entry"])
    assert set(ids(only_entries)) == {world["warn"], world["insight"]}
    warnings = g.retrieve(query="gas swap", kinds=["entry"], categories=["warning"])
    assert ids(warnings) == [world["warn"]]
    dca = g.retrieve(query="gas swap", strategy="dca")
    # The strategy's own items and global entries; another strategy's or none's episodes out.
    assert set(ids(dca)) == {world["swap"], world["warn"], world["insight"]}
    confident = g.retrieve(query="gas swap", min_confidence=0.6)
    assert confident["items"] == []


def test_budget_keeps_what_fits(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    small = g.retrieve(query="gas swap", max_tokens=12)
    assert small["tokens"] <= 12 or (len(small["items"]) == 1 and small["items"][0]["truncated"])
    assert len(small["items"]) < len(g.retrieve(query="gas swap")["items"])


def test_context_format_renders_seed_000_block(g: Grimoire, clock: FrozenClock) -> None:
    world = _world(g, clock)
    clock.advance(HOUR)
    effect = g.episode_write(text="swap reverted after the gas spike",
                             causal_hint=world["gas"])["id"]
    result = g.retrieve(query="swap reverted gas", format="context", event_id=effect)
    block = result["context"]
    assert block.startswith("QUERY: swap reverted gas\n\nEVIDENCE (ranked):\n1. [")
    assert "swap 2 ETH" in block
    assert "CAUSAL CHAIN (oldest first):\n[2026-01-01 01:00 UTC] gas price is 80 gwei" in block
    chain = result["causal_chain"]
    assert [link["id"] for link in chain["chain"]] == [world["gas"], effect]


def test_deciding_updates_bookkeeping_and_browse_changes_nothing(
        g: Grimoire, clock: FrozenClock) -> None:
    """Deciding: access counts and last-served times move; strength and decay clock do not."""
    world = _world(g, clock)
    before = entry(g, world["warn"])
    clock.advance(DAY)
    browse = g.retrieve(query="gas swap", mode="browse")
    settle(g)
    assert entry(g, world["warn"]).access_count == before.access_count
    assert g.context.semantic.get_episode_state(world["swap"]).access_count == 0
    record = g.context.semantic.get_retrieval(browse["retrieval_id"])
    assert record is not None and record.mode == "browse"

    deciding = g.retrieve(query="gas swap")
    settle(g)
    after = entry(g, world["warn"])
    assert after.access_count == before.access_count + 1
    assert after.strength == before.strength
    assert after.last_accessed_at == before.last_accessed_at
    state = g.context.semantic.get_episode_state(world["swap"])
    assert state.access_count == 1 and state.last_accessed_at == clock.now
    logged = g.context.semantic.get_retrieval(deciding["retrieval_id"])
    assert logged is not None and logged.mode == "deciding"
    assert [i["id"] for i in logged.items] == ids(deciding)
    assert all("factors" in i and "context" in i for i in logged.items)


def test_auto_mode_returns_its_decision(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    novel = g.retrieve(query="completely unrelated volcano ash", mode="auto")
    assert novel["decision"]["mode"] == "full"
    for word in ["costs", "timing", "fees", "windows", "congestion", "limits"]:
        put_entry(g, f"gas swap {word}")
    covered = g.retrieve(query="gas swap", mode="auto")
    assert covered["decision"]["mode"] == "semantic_only"
    assert {i["kind"] for i in covered["items"]} == {"entry"}
    stressed = g.retrieve(query="volcano", mode="auto",
                          mood={"pleasure": -0.5, "arousal": 0.9, "dominance": 0.0})
    assert stressed["decision"]["mode"] == "full"


def test_mood_adds_the_emotion_factor(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    happy = put_entry(g, "gas swap went great", emotional_tag=None)
    result = g.retrieve(query="gas swap", mood={"pleasure": 0.8, "arousal": 0.1,
                                                "dominance": 0.2})
    item = next(i for i in result["items"] if i["id"] == happy.id)
    assert item["factors"]["emotion"]["weight"] == pytest.approx(0.15 / 1.15)


def test_contrarian_injection_once_per_block_of_ticks(tmp_path: Path, clock: FrozenClock) -> None:
    """At tick 100, an anxious agent gets one confident item it would not have ranked."""
    from grimoire.records import PAD

    with open_grimoire(tmp_path / "d", clock, **{"retrieval.contrarian_every_ticks": 2}) as g:
        anxious = PAD(-0.8, 0.6, -0.4)
        for i in range(6):
            put_entry(g, f"gas swap loss number {i} hurt", emotional_tag=anxious)
        calm = put_entry(g, "steady confident trading", emotional_tag=PAD(0.8, 0.1, 0.5))
        mood = {"pleasure": -0.8, "arousal": 0.6, "dominance": -0.4}
        g.context.tick = 1
        assert calm.id not in ids(g.retrieve(query="gas swap loss", k=3, mood=mood))
        g.context.tick = 2
        first = g.retrieve(query="gas swap loss", k=3, mood=mood)
        assert ids(first)[-1] == calm.id and len(first["items"]) == 3
        assert first["items"][-1]["factors"]["contrarian"] == {"value": 1.0}
        assert calm.id not in ids(g.retrieve(query="gas swap loss", k=3, mood=mood))
        g.context.tick = 4
        assert calm.id in ids(g.retrieve(query="gas swap loss", k=3, mood=mood))


def test_event_id_must_exist(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    with pytest.raises(NotFoundError, match="event_id"):
        g.retrieve(query="gas", event_id="nope")


BAD: list[tuple[dict[str, Any], str]] = [
    ({}, "query"),
    ({"query": ""}, "query"),
    ({"query": 3}, "query"),
    ({"query": "q", "k": 0}, "k"),
    ({"query": "q", "k": "5"}, "k"),
    ({"query": "q", "max_tokens": -1}, "max_tokens"),
    ({"query": "q", "kinds": ["episodes"]}, "kinds"),
    ({"query": "q", "kinds": []}, "kinds"),
    ({"query": "q", "categories": ["rumour"]}, "categories"),
    ({"query": "q", "regime": "sunny"}, "regime"),
    ({"query": "q", "strategy": ""}, "strategy"),
    ({"query": "q", "min_confidence": 1.5}, "min_confidence"),
    ({"query": "q", "event_id": 7}, "event_id"),
    ({"query": "q", "entities": [{"kind": "planet", "id": "x"}]}, "entities[0].kind"),
    ({"query": "q", "entities": [{"kind": "token"}]}, "entities[0]"),
    ({"query": "q", "mood": {"pleasure": 2, "arousal": 0, "dominance": 0}}, "mood.pleasure"),
    ({"query": "q", "mode": "decide"}, "mode"),
    ({"query": "q", "at": -5}, "at"),
    ({"query": "q", "format": "xml"}, "format"),
    ({"query": "q", "kind": ["entry"]}, "params"),
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grimoire]:
    """One store for the validation cases: a refused call must leave it untouched."""
    with open_grimoire(tmp_path_factory.mktemp("bad")) as grimoire:
        grimoire.episode_write(text="gas swap")
        yield grimoire


@pytest.mark.parametrize(("params", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_params_name_the_field(shared: Grimoire, params: dict[str, Any],
                                   field: str) -> None:
    with pytest.raises(ValidationError) as info:
        shared.retrieve(**params)
    assert info.value.field == field
    settle(shared)
    assert shared.context.semantic.retrieval_counts()["total"] == 0


def test_regime_is_a_signal_not_a_filter(g: Grimoire, clock: FrozenClock) -> None:
    world = _world(g, clock)
    result = g.retrieve(query="gas swap", regime=Regime.BULL.value)
    assert world["gas"] in ids(result)  # a high_vol episode is still served, ranked lower


def test_explain_off_answers_plain_factor_values_and_the_log_keeps_the_breakdown(
        g: Grimoire, clock: FrozenClock) -> None:
    """``explain: false`` trims the answer (factor values only, no ranks, no trace); the
    retrieval log still holds every factor's value, weight and contribution and the pool's
    baseline, which ``outcome.report`` credits from."""
    _world(g, clock)
    full = g.retrieve(query="swap gas cost", k=5, mode="browse")
    lean = g.retrieve(query="swap gas cost", k=5, explain=False)
    assert ids(lean) == ids(full)
    assert "trace" not in lean and "trace" in full
    for thin, rich in zip(lean["items"], full["items"], strict=True):
        assert "backend_ranks" not in thin and "backend_ranks" in rich
        assert thin["factors"] == {name: pytest.approx(parts["value"], abs=1e-6)
                                   for name, parts in rich["factors"].items()}
        assert thin["score"] == rich["score"]
    settle(g)
    logged = g.context.semantic.get_retrieval(lean["retrieval_id"])
    assert logged is not None
    first = logged.items[0]
    assert set(first["factors"]["rrf"]) == {"value", "weight", "contribution"}
    baseline = first["context"]["baseline"]
    assert set(baseline) == {"rrf", "confidence", "quality", "recency", "regime"}
    assert all(0.0 <= v <= 1.0 for v in baseline.values())
    with pytest.raises(ValidationError) as info:
        g.retrieve(query="gas", explain="yes")
    assert info.value.field == "explain"
