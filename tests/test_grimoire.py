"""The facade's current methods, on real stores in tmp_path with the test embedder and clock."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import (
    EmbeddingMismatchError,
    NotAvailableError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder

POOL = {"kind": "pool", "id": "0xpool"}
WARNING = ("Avoid swaps on WETH/USDC when gas_gwei is above 80 because fees eat 40% of the "
           "gain")


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Any:
    with Grimoire.open(tmp_path / "data", clock=clock, embedder=HashEmbedder()) as opened:
        yield opened


def make_episode(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"text": "swapped 2 ETH for USDC at 21 gwei", "type": "action",
                              "outcome": "positive", "strategy": "momentum",
                              "metrics": {"gas_gwei": 21.0}}
    params.update(overrides)
    return params


# -- episodes ---------------------------------------------------------------------------------


def test_episode_write_then_get_round_trips_every_given_field(g: Grimoire) -> None:
    """episode.write answers an id; episode.get returns the stored episode with its fields."""
    params = make_episode(ref="0xtx1", regime="bull", gain=12.5, actions=["swap"],
                          importance="notable", chain="base", token_pair="WETH/USDC")
    got = g.episode_get(g.episode_write(**params)["id"])
    for key in ("text", "type", "outcome", "strategy", "ref", "regime", "gain", "importance",
                "chain", "token_pair"):
        assert got[key] == params[key], key
    assert got["metrics"] == {"gas_gwei": 21.0}
    assert list(got["actions"]) == ["swap"]
    assert got["timestamp"] == g.context.now()


def test_episode_write_refuses_bad_input_naming_the_field(g: Grimoire) -> None:
    """Bad values raise ValidationError naming the field; nothing is stored."""
    for params, field in [({"text": ""}, "text"), ({"text": "x", "outcome": "great"}, "outcome"),
                          ({"text": "x", "metrics": {"gas": "high"}}, "metrics"),
                          ({"text": "x", "metric": {}}, "episode")]:
        with pytest.raises(ValidationError) as info:
            g.episode_write(**params)
        assert info.value.field is not None and info.value.field.startswith(field), params
    assert g.context.episodes.count() == 0


def test_write_batch_is_all_or_nothing_and_names_the_bad_item(g: Grimoire) -> None:
    """One bad item in a batch writes nothing, and the error names episodes[i].field."""
    g.episode_write(**make_episode())
    batch = [make_episode(text=f"ep {i}") for i in range(5)]
    batch[3] = make_episode(outcome="splendid")
    with pytest.raises(ValidationError) as info:
        g.episode_write_batch(episodes=batch)
    assert info.value.field == "episodes[3].outcome"
    assert "episodes[3].outcome" in str(info.value)
    assert g.context.episodes.count() == 1

    batch[3] = make_episode(text="ep 3")
    ids = g.episode_write_batch(episodes=batch)["ids"]
    assert len(ids) == len(set(ids)) == 5
    assert [g.episode_get(i)["text"] for i in ids] == [f"ep {i}" for i in range(5)]
    assert g.context.episodes.count() == 6


def test_write_batch_refuses_non_lists_and_empty_lists(g: Grimoire) -> None:
    for value in ([], "text", {"text": "x"}, None):
        with pytest.raises(ValidationError) as info:
            g.episode_write_batch(episodes=value)  # type: ignore[arg-type]
        assert info.value.field == "episodes"
    with pytest.raises(ValidationError) as info:
        g.episode_write_batch(episodes=[make_episode(), 5])  # type: ignore[list-item]
    assert info.value.field == "episodes[1]"


def test_episode_get_of_an_unknown_id_is_not_found(g: Grimoire) -> None:
    with pytest.raises(NotFoundError, match="no episode with id nope"):
        g.episode_get("nope")
    with pytest.raises(ValidationError):
        g.episode_get("")


def test_write_emits_grimoire_write_and_counts_for_distillation(g: Grimoire) -> None:
    g.episode_write_batch(episodes=[make_episode(), make_episode(strategy=None)])
    event = g.events.recent(1, "GrimoireWrite")[0]
    assert event["kind"] == "episode" and event["count"] == 2
    assert g.context.since_distill == {"momentum": 1, "": 1}


# -- entries ----------------------------------------------------------------------------------


def test_entry_add_admits_then_skips_the_duplicate(g: Grimoire) -> None:
    """The admission gate admits a specific warning and skips the same text as a duplicate."""
    first = g.entry_add(category="warning", content=WARNING)
    assert first["decision"] == "admitted" and first["id"]
    assert set(first["factors"]) == {"future_utility", "factual_confidence", "semantic_novelty",
                                     "temporal_recency", "content_type_prior"}
    again = g.entry_add(category="warning", content=WARNING)
    assert again["decision"] == "skipped" and again["id"] is None
    assert again["nearest_id"] == first["id"]
    entries = g.entry_list()["entries"]
    assert [e["id"] for e in entries] == [first["id"]]


def test_entry_get_and_list_filters(g: Grimoire) -> None:
    warning = g.entry_add(category="warning", content=WARNING, strategy="momentum")["id"]
    insight = g.entry_add(category="insight", content="Slippage on WETH/USDC doubles between "
                          "02:00 and 04:00 UTC when liquidity is thin (measured 18 bps vs 9 bps)"
                          )["id"]
    got = g.entry_get(warning)
    assert got["content"] == WARNING and got["category"] == "warning"
    assert 0.05 <= got["effective_confidence"] <= 0.99
    assert [e["id"] for e in g.entry_list(category="insight")["entries"]] == [insight]
    assert [e["id"] for e in g.entry_list(strategy="momentum")["entries"]] == [warning]
    assert len(g.entry_list(limit=1)["entries"]) == 1
    with pytest.raises(NotFoundError):
        g.entry_get("01a00000-0000-7000-8000-000000000000")
    with pytest.raises(ValidationError) as info:
        g.entry_list(limit=0)
    assert info.value.field == "limit"
    with pytest.raises(ValidationError) as info:
        g.entry_add(category="rumour", content="swaps revert when gas is above 80 gwei")
    assert info.value.field == "category"


# -- knowledge graph --------------------------------------------------------------------------


def test_kg_assert_closes_the_old_fact_and_queries_see_both_times(g: Grimoire,
                                                                  clock: FrozenClock) -> None:
    t0 = clock.now
    first = g.kg_assert(subject=POOL, predicate="oracle_dependency",
                        object={"kind": "oracle", "id": "chainlink"}, valid_from=100)
    clock.advance(60_000)
    second = g.kg_assert(subject=POOL, predicate="oracle_dependency",
                         object={"kind": "oracle", "id": "pyth"}, valid_from=200)
    assert second["closed"] == [first["id"]]

    def objects(result: dict[str, Any]) -> list[str]:
        return [t["object"]["value"]["id"] for t in result["triples"]]

    assert objects(g.kg_at(POOL, 150)) == ["chainlink"]
    assert objects(g.kg_at(POOL, 250)) == ["pyth"]
    assert objects(g.kg_known_at(POOL, t0)) == ["chainlink"]  # before we learnt of pyth
    assert g.kg_known_at(POOL, t0)["triples"][0]["valid_to"] is None  # as it stood then
    hood = g.kg_neighbors(POOL, 250)["neighbors"]
    assert [(n["entity"]["id"], n["hops"]) for n in hood] == [("pyth", 1)]

    invalidated = g.kg_invalidate(second["id"], 300)["triple"]
    assert invalidated["valid_to"] == 300
    assert g.kg_at(POOL, 350)["triples"] == []
    assert objects(g.kg_at(POOL, 250)) == ["pyth"]


def test_kg_plain_objects_and_bad_input(g: Grimoire) -> None:
    """A plain JSON number or string is accepted as an object; bad fields are named."""
    g.kg_assert(subject=POOL, predicate="custom:tvl_usd", object=1_250_000, valid_from=10)
    triple = g.kg_at(POOL, 10)["triples"][0]
    assert triple["object"] == {"kind": "number", "value": 1_250_000.0}
    with pytest.raises(ValidationError) as info:
        g.kg_assert(subject={"kind": "planet", "id": "x"}, predicate="deployed_by", object="a",
                    valid_from=1)
    assert info.value.field is not None and info.value.field.startswith("subject")
    with pytest.raises(ValidationError) as info:
        g.kg_at(POOL, -1)
    assert info.value.field == "block"
    with pytest.raises(NotFoundError):
        g.kg_invalidate("01a00000-0000-7000-8000-000000000000", 5)


# -- health, status, machinery not built yet -------------------------------------------------


def test_health_and_status_shape(g: Grimoire) -> None:
    g.episode_write(**make_episode())
    health = g.health()
    assert health["ok"] is True and health["tick"] == 0 and health["uptime_s"] >= 0
    assert isinstance(health["version"], str)
    status = g.status()
    for key in ("version", "data_dir", "tick", "embedding", "episodes", "entries", "graph",
                "writer", "last_curator_cycle", "health", "llm", "events", "last_events"):
        assert key in status, key
    assert status["embedding"] == {"model": "hash-384", "dim": 384}
    assert status["episodes"]["rows"] == 1
    assert status["entries"]["total"] == 0
    assert status["graph"]["triples"] == 0
    assert status["last_events"]["GrimoireWrite"]["kind"] == "episode"
    assert status["daemon"] is None  # no daemon around this facade


def test_methods_without_their_machinery_say_so(g: Grimoire) -> None:
    """Until their issue lands, these raise NotAvailableError naming the method, never a fake.

    Once a method is implemented (by another issue) it either answers a dict or
    refuses the made-up ids below as not found / invalid.
    """
    calls = {"retrieve": lambda: g.retrieve(query="gas"),
             "outcome.report": lambda: g.outcome_report(retrieval_id="r", outcome="positive"),
             "causal.link": lambda: g.causal_link(cause_id="a", effect_id="b"),
             "causal.chain": lambda: g.causal_chain(id="a"),
             "playbook.get": g.playbook_get, "curator.run": g.curator_run,
             "entry.explain": lambda: g.entry_explain("x")}
    for name, call in calls.items():
        try:
            result = call()
        except NotAvailableError as exc:
            assert name in str(exc), (name, str(exc))
        except (ValidationError, NotFoundError):
            pass
        else:
            assert isinstance(result, dict) and result, name


# -- persistence, locking, embedding identity ------------------------------------------------


def test_tick_and_data_persist_across_reopen(tmp_path: Path, clock: FrozenClock) -> None:
    with Grimoire.open(tmp_path, clock=clock, embedder=HashEmbedder()) as g:
        ep = g.episode_write(**make_episode())["id"]
        for _ in range(3):
            clock.advance(40_000)
            g.tick()
        assert g.health()["tick"] == 3
    with Grimoire.open(tmp_path, clock=clock, embedder=HashEmbedder()) as g:
        assert g.health()["tick"] == 3
        assert g.context.semantic.get_meta("last_tick_ms") == clock.now
        assert g.episode_get(ep)["text"] == make_episode()["text"]
        g.tick()
        assert g.status()["tick"] == 4


def test_a_second_open_of_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path, embedder=HashEmbedder()), pytest.raises(
            StoreError, match=f"in use by process {os.getpid()} "):
        Grimoire.open(tmp_path, embedder=HashEmbedder())
    with Grimoire.open(tmp_path, embedder=HashEmbedder()) as g:  # released on close
        assert g.health()["ok"]


def test_store_refuses_another_embedding_model(tmp_path: Path) -> None:
    """A data dir built with one model is refused with another, naming both."""
    with Grimoire.open(tmp_path, embedder=HashEmbedder(dim=384)) as g:
        g.episode_write(**make_episode())
    with pytest.raises(EmbeddingMismatchError) as info:
        Grimoire.open(tmp_path, embedder=HashEmbedder(dim=384, model_id="hash-other"))
    assert "hash-384" in str(info.value) and "hash-other" in str(info.value)
    with pytest.raises(EmbeddingMismatchError, match="256"):
        Grimoire.open(tmp_path, embedder=HashEmbedder(dim=256, model_id="hash-384"))
    with Grimoire.open(tmp_path, embedder=HashEmbedder()) as g:  # and nothing was harmed
        assert g.context.episodes.count() == 1


def test_config_embedding_model_hash_selects_the_test_embedder(tmp_path: Path) -> None:
    """``embedding.model: hash-384`` (what subprocess tests use) needs no model files."""
    config = Config().replace(**{"embedding.model": "hash-384"})
    with Grimoire.open(tmp_path, config=config) as g:
        assert g.status()["embedding"] == {"model": "hash-384", "dim": 384}


def test_told_knowledge_is_labelled_as_told_and_contentless_text_is_refused(g: Grimoire) -> None:
    """entry.add records who told it (the agent by default; the CLI says the owner), never
    self_learned; a word or two is not knowledge and is refused, leaving nothing stored."""
    by_agent = g.entry_add(category="warning", content=WARNING)["id"]
    assert g.entry_get(by_agent)["provenance"] == "agent"
    by_owner = g.entry_add(category="insight", provenance="owner",
                           content="Bridging to Base is slow on Friday evenings")["id"]
    assert g.entry_get(by_owner)["provenance"] == "owner"
    for text in ("ok", "gas high", "  todo  ", "1 2 3 4 5"):
        with pytest.raises(ValidationError, match="states no claim") as info:
            g.entry_add(category="warning", content=text)
        assert info.value.field == "content"
    assert len(g.entry_list()["entries"]) == 2
