"""Entity mentions and the graph backend: the KG neighbourhood brings in what names it."""

from __future__ import annotations

from pathlib import Path

from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.ids import new_id
from grimoire.records import Episode, EpisodeType
from grimoire.retrieval.stages.mentions import episode_keys, parse_entities, query_keys, text_keys
from tests.retrieval.retrieve_support import ids, open_grimoire, put_entry, settle

ADDR = "0x" + "Ab" * 20


def _episode(**fields: object) -> Episode:
    values: dict[str, object] = {"id": new_id(1), "text": "x", "type": EpisodeType.OBSERVATION,
                                 "timestamp": 1}
    values.update(fields)
    return Episode(**values)  # type: ignore[arg-type]


def test_recognition() -> None:
    assert text_keys(f"swapped on WETH/USDC via {ADDR}; and/or 24/7 are prose") == [
        f"address:{ADDR.lower()}", "pool:USDC/WETH", "token:WETH", "token:USDC"]
    assert episode_keys(_episode(token_pair="weth/usdc", chain="Base", text="hi")) == [
        "pool:USDC/WETH", "token:WETH", "token:USDC", "chain:base"]
    assert query_keys("is LINK safe on USDC/WETH?", ["chain:base"]) == [
        "chain:base", "pool:USDC/WETH", "token:USDC", "token:WETH", "token:LINK"]
    assert parse_entities([{"kind": "pool", "id": "USDC/WETH"},
                           {"kind": "address", "id": ADDR}]) == [
        "pool:USDC/WETH", f"address:{ADDR.lower()}"]


def test_bad_entities_name_the_field() -> None:
    for value, field in [("WETH", "entities"), ([{"kind": "token", "id": ""}], "entities[0].id"),
                         ([{"kind": "x", "id": "y"}], "entities[0].kind")]:
        try:
            parse_entities(value)
        except ValidationError as exc:
            assert exc.field == field
        else:  # pragma: no cover - the assertion below documents the failure
            raise AssertionError(f"{value!r} was accepted")


def test_graph_backend_reaches_items_through_the_kg(tmp_path: Path) -> None:
    """LINK is two KG hops from WETH; an episode about LINK/DAI comes in by the graph alone."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        g.kg_assert(subject={"kind": "token", "id": "WETH"}, predicate="price_correlation",
                    object={"kind": "oracle", "id": "chainlink-eth"}, valid_from=1)
        g.kg_assert(subject={"kind": "oracle", "id": "chainlink-eth"},
                    predicate="oracle_dependency", object={"kind": "token", "id": "LINK"},
                    valid_from=1)
        far = g.episode_write(text="position rebalanced again", token_pair="LINK/DAI")["id"]
        unrelated = g.episode_write(text="position rebalanced", token_pair="UNI/DAI")["id"]
        result = g.retrieve(query="position report", entities=[{"kind": "token", "id": "WETH"}],
                            mode="browse")
        # Without the graph the other one ranks first (by vector alone).
        assert ids(result) == [far, unrelated]
        assert result["trace"]["backends"]["graph.episode"] == 1
        keys = {e["key"]: e["hops"] for e in result["trace"]["graph"]["entities"]}
        assert keys["token:WETH"] == 0 and keys["token:LINK"] == 2
        without = g.retrieve(query="position report", mode="browse")
        assert "graph.episode" not in without["trace"]["backends"]
        assert ids(without) == [unrelated, far]


def test_entry_mentions_are_indexed_and_found_by_symbol(tmp_path: Path) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        warn = put_entry(g, f"Avoid the router {ADDR} on WETH/USDC: it front-runs")
        g.episode_write(text="tick")  # the post-write hook catches entries up
        found = g.context.semantic.mentions_of("token:WETH")
        assert (warn.id, "entry") in [(i, k) for i, k, _ in found]
        late = put_entry(g, "USDC/WETH liquidity is thin at night")
        g.retrieve(query="thin WETH", mode="browse")  # schedules the catch-up, no wait
        settle(g)
        result = g.retrieve(query="what about WETH", mode="browse", kinds=["entry"])
        assert {warn.id, late.id} <= set(ids(result))
        by_address = g.retrieve(query=f"is {ADDR} safe", mode="browse", kinds=["entry"])
        assert ids(by_address)[0] == warn.id


def test_entry_add_records_its_mentions_at_write_time(tmp_path: Path) -> None:
    """An entry added through the API is in the mention index when entry.add returns: the
    very next query reaches it through the graph backend, with no episode written between."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        added = g.entry_add(category="warning", content=(
            f"Avoid routing WETH/USDC swaps through {ADDR}: it front-ran 3 of 4 fills"))
        assert added["decision"] == "admitted"
        found = g.context.semantic.mentions_of(f"address:{ADDR.lower()}")
        assert [(i, k) for i, k, _ in found] == [(added["id"], "entry")]
        result = g.retrieve(query="anything", mode="browse", kinds=["entry"],
                            entities=[{"kind": "pool", "id": "USDC/WETH"}])
        assert result["trace"]["backends"]["graph.entry"] == 1


def test_new_mentions_are_seen_by_the_next_query(tmp_path: Path) -> None:
    """The graph backend caches an entity's newest mentions; a write naming it refreshes them."""
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock) as g:
        first = g.episode_write(text="filled", token_pair="WETH/USDC")["id"]
        query = {"query": "what happened", "mode": "browse",
                 "entities": [{"kind": "token", "id": "WETH"}]}
        before = g.retrieve(**query)
        assert before["trace"]["backends"]["graph.episode"] == 1
        clock.advance(60_000)
        second = g.episode_write(text="filled again", token_pair="WETH/DAI")["id"]
        after = g.retrieve(**query)
        assert after["trace"]["backends"]["graph.episode"] == 2
        assert {first, second} <= set(ids(after))
