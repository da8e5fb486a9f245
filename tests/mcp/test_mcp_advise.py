"""The MCP ``advise`` tool (and ``retrieve``'s ``situation``) through the SDK's own client
over stdio, served from the data directory with no daemon running: the rules that apply to
the situation the model describes, warnings first; every parameter described. And the
curator's L1/L2 summaries left out of ``query`` and ``retrieve`` unless asked for."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.mcp.server import DirectoryCaller, build_server
from grimoire.records import Category, EntryStatus
from tests.curator.test_curator_support import open_grimoire, put
from tests.mcp.test_mcp_stdio import _data
from tests.methods.advise_support import SWAP_HIGH_VOL, Rules, fill_rules
from tests.service.daemon_support import REPO, daemon_env, short_dir


async def _session(data: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "grimoire", "mcp", "--data", str(data)],
                                   env=daemon_env(), cwd=str(REPO))
    out: dict[str, Any] = {}
    async with Client(params) as client:
        out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        out["advise"] = _data(await client.call_tool("advise", SWAP_HIGH_VOL))
        out["mine"] = _data(await client.call_tool(
            "advise", {**SWAP_HIGH_VOL, "strategy": "eth-dca", "timestamp": 1_767_232_800_000}))
        out["retrieve"] = _data(await client.call_tool(
            "retrieve", {"situation": SWAP_HIGH_VOL, "k": 3}))
        out["bad"] = await client.call_tool("advise", {"regime": "stormy"})
        out["empty"] = await client.call_tool("retrieve", {})
    return out


def test_advise_over_mcp_serves_the_high_vol_swap_warnings_first() -> None:
    with short_dir() as base:
        data = base / "data"
        with open_grimoire(data, FrozenClock()) as g:
            rules: Rules = fill_rules(g)
        out = asyncio.run(_session(data))
    tool = out["tools"]["advise"]
    props = tool.input_schema["properties"]
    assert {"actions", "tool", "token_pair", "chain", "regime", "strategy", "metrics",
            "timestamp", "limit"} <= set(props)
    assert all(p.get("description") for p in props.values()), props
    assert "situation" in out["tools"]["retrieve"].input_schema["properties"]
    advised = out["advise"]
    assert [(r["id"], r["match"]) for r in advised["rules"][:2]] == [
        (rules.slippage_warning, "applies"), (rules.swap_warning, "may_apply")]
    # 2026-01-01 02:00 UTC, strategy eth-dca: both warnings and the night heuristic apply.
    assert [r["match"] for r in out["mine"]["rules"]] == ["applies"] * 3
    assert out["mine"]["rules"][2]["id"] == rules.night_heuristic
    assert out["retrieve"]["items"][0]["id"] == rules.slippage_warning
    assert out["retrieve"]["items"][0]["rule"]["match"] == "applies"
    assert out["bad"].is_error and "situation.regime" in out["bad"].content[0].text
    assert out["empty"].is_error and "a query, a situation" in out["empty"].content[0].text


def test_mcp_query_and_retrieve_leave_summaries_out_unless_asked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_grimoire(data, FrozenClock()) as g:
        rule = put(g, category=Category.WARNING, content="Avoid swaps on WETH/USDC when gas "
                   "is above 80 gwei: fees eat the gain").id
        summary = put(g, tags=("summary", "summary:l1"), status=EntryStatus.CANDIDATE,
                      content="14 episodes of swaps on WETH/USDC: gas 5.9-58 gwei, fees").id
    caller = DirectoryCaller(Config().replace(**{"data_dir": str(data),
                                                 "embedding.model": "hash-384"}))
    server = build_server(caller)

    async def ask(tool: str, args: dict[str, Any]) -> set[str]:
        found = _data(await server.call_tool(tool, args))
        return {i["id"] for i in found["items"]}

    async def session() -> dict[str, set[str]]:
        words = "swaps on WETH/USDC gas fees"
        return {"query": await ask("query", {"query": words, "k": 10}),
                "retrieve": await ask("retrieve", {"query": words, "k": 10}),
                "asked": await ask("retrieve", {"query": words, "k": 10, "summaries": True})}

    try:
        out = asyncio.run(session())
    finally:
        caller.close()
    assert rule in out["query"] and summary not in out["query"]
    assert rule in out["retrieve"] and summary not in out["retrieve"]
    assert {rule, summary} <= out["asked"]
