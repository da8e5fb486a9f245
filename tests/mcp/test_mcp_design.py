"""The MCP tools as seed 001 names them, on a real store in process (the SDK's server, a
writable Grimoire behind it): ``add_event(effect, cause?)`` that searches the causes it is
not given, ``query(query)``, ``consequences``; every parameter described, allowed values as
enums; answers sized for a model's context (retrieve k=3 < 2 KB, explain summarised)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.mcp.server import build_server
from grimoire.records import Category, EntryStatus
from grimoire.service.api import dispatch
from tests.curator.test_curator_support import put

MINUTE = 60_000


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Grimoire]:
    clock = FrozenClock()
    config = Config().replace(**{"embedding.model": "hash-384"})
    with Grimoire.open(tmp_path / "data", config=config, clock=clock) as grimoire:
        grimoire.context.extras["test_clock"] = clock
        yield grimoire


def _server(g: Grimoire) -> Any:
    return build_server(lambda method, params: dispatch(g, method, params))


def _run(server: Any, name: str, args: dict[str, Any]) -> tuple[Any, int]:
    """(the tool's answer as the model reads it, its size in bytes)."""
    result = asyncio.run(server.call_tool(name, args))
    text = "".join(getattr(b, "text", "") for b in result.content)
    assert not result.is_error, text
    return json.loads(text) if text[:1] in "{[" else text, len(text.encode())


def _tools(server: Any) -> dict[str, Any]:
    return {t.name: t for t in asyncio.run(server.list_tools())}


def test_every_parameter_is_described_and_allowed_values_are_enums(g: Grimoire) -> None:
    tools = _tools(_server(g))
    assert {"add_event", "query", "consequences", "advise"} <= set(tools)
    for tool in tools.values():
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)
    add = tools["add_event"].input_schema
    assert add["required"] == ["effect"]  # seed 001: add_event(effect, cause?)
    assert "observation" in add["properties"]["type"]["enum"]
    assert set(add["properties"]["outcome"]["enum"]) >= {"positive", "negative", None}
    assert tools["query"].input_schema["required"] == ["query"]  # seed 001: query(query)
    assert tools["retrieve"].input_schema["properties"]["mode"]["enum"] == [
        "deciding", "browse", "auto"]
    assert "high_vol" in tools["advise"].input_schema["properties"]["regime"]["enum"]
    assert "pool" in tools["kg_query"].input_schema["properties"]["subject_kind"]["enum"]
    assert tools["report_outcome"].input_schema["properties"]["outcome"]["enum"] == [
        "positive", "negative", "neutral"]


def test_add_event_without_a_cause_finds_and_names_the_likely_one(g: Grimoire) -> None:
    server, clock = _server(g), g.context.extras["test_clock"]
    cause, _ = _run(server, "add_event", {"effect": "eth oracle price lagging behind spot"})
    assert cause["likely_cause"] is None  # nothing before it
    clock.advance(MINUTE)
    effect, _ = _run(server, "add_event", {
        "effect": "eth oracle price lag caused a stale liquidation"})
    assert effect["likely_cause"]["id"] == cause["id"]
    assert 0.3 <= effect["likely_cause"]["weight"] <= 1.0
    # named causes are linked as given, and the forward walk finds both effects
    clock.advance(MINUTE)
    named, _ = _run(server, "add_event", {"effect": "position closed at a loss",
                                          "cause_id": effect["id"]})
    assert named["cause_id"] == effect["id"]
    forward, _ = _run(server, "consequences", {"id": cause["id"]})
    assert [c["id"] for c in forward["consequences"]][:2] == [effect["id"], named["id"]]
    assert [c["depth"] for c in forward["consequences"]][:2] == [1, 2]


def test_answers_are_sized_for_a_models_context(g: Grimoire) -> None:
    server, clock = _server(g), g.context.extras["test_clock"]
    for i in range(30):
        g.episode_write(text=f"eth-dca swap ${500 + i} on WETH/USDC via uniswap_v3: lost "
                             f"{i} bps to slippage in high volatility, gas {20 + i} gwei",
                        type="action", outcome="negative", token_pair="WETH/USDC",
                        tool="uniswap_v3", regime="high_vol")
        clock.advance(MINUTE)
    rule = put(g, category=Category.WARNING, status=EntryStatus.ACTIVE,
               content="Avoid swap when the regime is high_vol because slippage is high",
               parent_episode_ids=tuple(g.context.episodes.recent(30)[i].id
                                        for i in range(30)))
    compact, small = _run(server, "retrieve", {"query": "swap in high volatility", "k": 3})
    assert len(compact["items"]) == 3 and compact["retrieval_id"]
    assert small < 2048
    full, large = _run(server, "retrieve", {"query": "swap in high volatility", "k": 3,
                                            "detail": True})
    assert "factors" in full["items"][0] and large > small
    _, asked = _run(server, "query", {"query": "why did the swap lose money", "k": 3})
    assert asked < 2048
    summary, short = _run(server, "explain", {"id": rule.id})
    assert summary["sentence"] == rule.content and summary["category"] == "warning"
    everything, whole = _run(server, "explain", {"id": rule.id, "full": True})
    assert whole > short and "history" in everything
