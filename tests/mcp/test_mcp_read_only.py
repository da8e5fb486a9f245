"""The MCP server with no daemon: read tools from a read-only open, write tools refused.

Through the SDK's own client over stdio (``python -m grimoire mcp``, this checkout's code).
The data directory is written first by an in-process Grimoire, then served by the MCP
server alone: the read tools answer from the stores, the write tools answer an error that
says to start the daemon, and no file in the directory changes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver.exceptions import ToolError

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.grimoire import Grimoire
from grimoire.mcp.server import DirectoryCaller
from grimoire.models.embedders import HashEmbedder
from tests.mcp.test_mcp_stdio import _data
from tests.service.daemon_support import REPO, daemon_env, short_dir
from tests.stores.test_read_only_stores import tree_digest


def fill(data: Path) -> dict[str, str]:
    clock = FrozenClock()
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder(dim=384)) as g:
        cause = g.episode_write(text="gas jumped to 140 gwei during the NFT mint")["id"]
        effect = g.episode_write(text="the swap lost 3% to fees", type="action",
                                 outcome="negative")["id"]
        g.causal_link(cause_id=cause, effect_id=effect)
        entry = g.entry_add(category="warning", content="Avoid swaps when gas is above 80 "
                            "gwei because fees eat the gain")["id"]
        g.kg_assert(subject={"kind": "pool", "id": "eth-usdc"}, predicate="deployed_by",
                    object={"kind": "address_cluster", "id": "d1"}, valid_from=10)
        clock.advance(60_000)
        g.curator_run()
    return {"cause": cause, "effect": effect, "entry": entry}


async def _session(data: Path, entry_id: str) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "grimoire", "mcp", "--data", str(data)],
                                   env=daemon_env(), cwd=str(REPO))
    out: dict[str, Any] = {}
    async with Client(params) as client:
        out["query"] = _data(await client.call_tool(
            "query", {"query": "why did the swap lose to fees?"}))
        out["retrieve"] = _data(await client.call_tool("retrieve", {"query": "gas fees swap"}))
        out["playbook"] = (await client.call_tool("playbook", {})).content[0].text
        out["explain"] = _data(await client.call_tool("explain", {"id": entry_id[:8]}))
        out["kg_query"] = _data(await client.call_tool(
            "kg_query", {"subject_kind": "pool", "subject_id": "eth-usdc", "block": 20}))
        out["add_event"] = await client.call_tool("add_event", {"effect": "a new event"})
        out["report_outcome"] = await client.call_tool(
            "report_outcome", {"retrieval_id": out["retrieve"]["retrieval_id"],
                               "outcome": "negative"})
        out["kg_assert"] = await client.call_tool(
            "kg_assert", {"subject_kind": "pool", "subject_id": "eth-usdc",
                          "predicate": "deployed_by", "object": "x", "valid_from": 30})
    return out


def test_read_tools_without_a_daemon_and_write_tools_say_to_start_one() -> None:
    with short_dir() as base:
        data = base / "data"
        ids = fill(data)
        before = tree_digest(data)
        out = asyncio.run(_session(data, ids["entry"]))
        assert tree_digest(data) == before  # read-only: not a byte changed
    narrative = out["query"]["narrative"]
    assert "gas jumped to 140 gwei" in narrative and "fees" in narrative
    assert out["retrieve"]["items"] and out["retrieve"]["retrieval_id"]
    assert "Avoid swaps when gas is above 80 gwei" in out["playbook"]
    assert ids["entry"] in json.dumps(out["explain"])
    assert "d1" in json.dumps(out["kg_query"])
    for tool, method in (("add_event", "episode.write"), ("report_outcome", "outcome.report"),
                         ("kg_assert", "kg.assert")):
        result = out[tool]
        assert result.is_error, (tool, result.content)
        text = result.content[0].text
        assert method in text and "needs the Grimoire daemon" in text
        assert "grimoire run --data" in text


WRITE_ONE = """
import sys
from grimoire.models.embedders import HashEmbedder
from grimoire.grimoire import Grimoire
with Grimoire.open(sys.argv[1], embedder=HashEmbedder(dim=384)) as g:
    g.episode_write(text="written by another process while the MCP server was idle")
"""


def test_the_read_only_open_is_reopened_when_episodes_changed_on_disk(tmp_path: Path) -> None:
    """The open is a snapshot of the episodes: a write by another process (here a writable
    open, as a daemon's run would be) is seen by the next call, not missed forever."""
    data = tmp_path / "data"
    fill(data)
    caller = DirectoryCaller(Config().replace(**{"data_dir": str(data),
                                                 "embedding.model": "hash-384"}))
    try:
        assert caller("status", {})["episodes"]["rows"] == 2
        assert caller("status", {})["episodes"]["rows"] == 2  # unchanged: the same open
        first = caller._reader
        subprocess.run([sys.executable, "-c", WRITE_ONE, str(data)], check=True, cwd=str(REPO),
                       env=daemon_env(), timeout=120)
        assert caller("status", {})["episodes"]["rows"] == 3
        assert caller._reader is not first
        with pytest.raises(ToolError, match="needs the Grimoire daemon"):
            caller("episode.write", {"text": "x"})
    finally:
        caller.close()
