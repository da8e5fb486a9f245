"""The knowledge graph fills itself: the curator's ``graph`` phase on a real store.

Facts from episodes' structured fields and texts, co-occurrence relations with their
evidence, and the close of a relation that stopped holding, all on the data's own time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from curator.graph.cooccur import anchors, co_occurrences
from curator.graph.facts import episode_facts
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.records import Episode, EpisodeType
from grimoire.records.graph import MAX_BLOCK, EntityKind, EntityRef, ObjectValue
from tests.curator.test_curator_support import T0, grimoire_at

MIN = 60_000


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


def _facts(g: Grimoire, kind: str, ident: str, block: int = MAX_BLOCK) -> dict[str, dict]:
    out = g.kg_at({"kind": kind, "id": ident}, block)["triples"]
    return {t["predicate"]: t for t in out}


def test_an_action_states_its_pool_tokens_and_venue(g: Grimoire) -> None:
    first = g.episode_write(text="swap 2 ETH", type="action", token_pair="WETH/USDC",
                            tool="uniswap_v3", chain="Ethereum", timestamp=T0 + MIN)["id"]
    g.episode_write(text="swap 1 ETH", type="action", token_pair="USDC/WETH",
                    tool="uniswap_v3", chain="ethereum", timestamp=T0 + 2 * MIN)
    g.curator_run()
    pool = _facts(g, "pool", "USDC/WETH")
    assert pool["custom:token0"]["object"]["value"] == {"kind": "token", "id": "USDC"}
    assert pool["custom:token1"]["object"]["value"] == {"kind": "token", "id": "WETH"}
    # provenance and data time: the first episode that showed it, at its own timestamp
    assert pool["custom:token0"]["source_episode"] == first
    assert pool["custom:token0"]["valid_from"] == T0 + MIN
    venue = _facts(g, "contract", "uniswap_v3@ethereum:USDC/WETH")
    assert venue["custom:venue_pool"]["object"]["value"] == {"kind": "pool", "id": "USDC/WETH"}
    assert venue["custom:venue_protocol"]["object"]["value"] == {"kind": "contract",
                                                                 "id": "uniswap_v3"}
    assert venue["custom:venue_chain"]["object"] == {"kind": "string", "value": "ethereum"}
    # both spellings of the pair are one pool, asserted once per cycle
    assert pool["custom:token0"]["evidence_count"] == 1
    # a later cycle that sees it again adds one piece of evidence, no new triple
    count = g.context.graph.count()
    g.episode_write(text="swap 3 ETH", type="action", token_pair="WETH/USDC",
                    tool="uniswap_v3", chain="ethereum", timestamp=T0 + 3 * MIN)
    g.curator_run()
    assert g.context.graph.count() == count
    assert _facts(g, "pool", "USDC/WETH")["custom:token0"]["evidence_count"] == 2
    # the graph leg now reaches the pool's other token from a question about one token
    near = g.kg_neighbors({"kind": "token", "id": "WETH"}, MAX_BLOCK, 2, "both")["neighbors"]
    assert {"kind": "token", "id": "USDC"} in [n["entity"] for n in near]


def test_an_oracle_feed_named_in_text_is_linked_to_its_pair(g: Grimoire) -> None:
    g.episode_write(text="Clade alert: Chainlink WETH/USD oracle lagging 3 blocks behind spot",
                    type="clade_alert", timestamp=T0 + MIN)
    g.curator_run()
    feed = _facts(g, "oracle", "Chainlink WETH/USD")
    assert feed["custom:feed_for"]["object"]["value"] == {"kind": "pool", "id": "USD/WETH"}


def test_a_protocol_named_in_text_is_the_venue_of_its_pool() -> None:
    episode = Episode(id="e1", text="Liquidity left the Uniswap v3 WETH/USDC pool overnight",
                      type=EpisodeType.OBSERVATION, timestamp=T0, chain="Arbitrum")
    facts = {(f.subject.id, f.predicate): f.object for f in episode_facts(episode)}
    venue = "uniswap_v3@arbitrum:USDC/WETH"
    assert facts[(venue, "custom:venue_pool")] == ObjectValue.entity(
        EntityRef(EntityKind.POOL, "USDC/WETH"))
    assert facts[(venue, "custom:venue_protocol")] == ObjectValue.entity(
        EntityRef(EntityKind.CONTRACT, "uniswap_v3"))


def test_prose_without_the_pattern_states_nothing() -> None:
    episode = Episode(id="e1", text="gas is cheap and/or the oracle is fine 24/7",
                      type=EpisodeType.OBSERVATION, timestamp=T0)
    assert episode_facts(episode) == []


def _bursts(g: Grimoire, start: int, together: bool, bursts: int = 4) -> None:
    """An hour apart, an ARB/USDC episode and an OP/USDC one a minute later (``together``)
    or half an hour later."""
    for i in range(bursts):
        t = start + i * 60 * MIN
        g.episode_write(text="ARB/USDC spread widened", type="observation",
                        token_pair="ARB/USDC", timestamp=t)
        g.episode_write(text="OP/USDC spread widened", type="observation",
                        token_pair="OP/USDC", timestamp=t + (MIN if together else 30 * MIN))


def test_co_occurrence_relates_bursts_and_closes_when_it_stops(g: Grimoire) -> None:
    _bursts(g, T0, together=True)
    g.curator_run()
    rel = _facts(g, "pool", "ARB/USDC")
    relation = rel["custom:co_occurs.pool-OP-USDC"]
    assert relation["object"]["value"] == {"kind": "pool", "id": "OP/USDC"}
    assert relation["valid_from"] == T0  # the first co-occurrence, data time
    assert relation["valid_to"] is None
    first_known = g.context.graph.count()
    # the same entities, now half an hour apart: no more together than chance
    later = T0 + 10 * 60 * MIN
    _bursts(g, later, together=False)
    g.curator_run()
    closed = g.context.graph.get(relation["id"])
    assert closed.valid_to == later + 3 * 60 * MIN + 30 * MIN  # the cycle's data time
    assert g.context.graph.count() == first_known  # closed, not deleted
    assert "custom:co_occurs.pool-OP-USDC" not in _facts(g, "pool", "ARB/USDC")
    # what was believed before the close is still readable as it stood
    assert "custom:co_occurs.pool-OP-USDC" in _facts(g, "pool", "ARB/USDC", block=T0 + MIN)


def test_entities_seen_at_every_tick_are_not_related_by_chance() -> None:
    rows = []
    for i in range(60):
        rows.append((T0 + i * MIN, f"a{i}", ["pool:USDC/WETH"]))
        rows.append((T0 + i * MIN + 1, f"b{i}", ["pool:USDC/WBTC"]))
    related, _, _ = co_occurrences(rows, 2 * MIN, 3, 2.0)
    assert related == []


def test_a_pool_stands_for_its_own_tokens() -> None:
    assert anchors(["pool:USDC/WETH", "token:USDC", "token:WETH", "token:ARB",
                    "chain:base"]) == ["pool:USDC/WETH", "token:ARB"]


def test_the_phase_can_be_switched_off(tmp_path: Path, clock: FrozenClock) -> None:
    for g in grimoire_at(tmp_path, clock, **{"curator.graph_fill": False}):
        g.episode_write(text="swap", type="action", token_pair="WETH/USDC", tool="uni",
                        timestamp=T0 + MIN)
        g.curator_run()
        assert g.context.graph.count() == 0
        assert g.context.graph.query_at(EntityRef(EntityKind.POOL, "USDC/WETH"), MAX_BLOCK) == []
