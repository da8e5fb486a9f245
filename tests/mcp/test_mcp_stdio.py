"""The MCP server through the SDK's own client over stdio, against a live daemon subprocess."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.service.daemon_support import (
    REPO,
    daemon_env,
    raw_connect,
    rpc,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)

TOOLS = {"add_event", "query", "retrieve", "advise", "consequences", "report_outcome",
         "playbook", "explain", "kg_assert", "kg_query", "forget"}


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        value = result.structured_content
        return value.get("result", value) if set(value) == {"result"} else value
    return json.loads(result.content[0].text)


async def _session(data: Path, entry_id: str) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "grimoire", "mcp", "--data", str(data)],
                                   env=daemon_env(), cwd=str(REPO))
    out: dict[str, Any] = {}
    async with Client(params) as client:
        listed = await client.list_tools()
        out["tools"] = {t.name: t for t in listed.tools}
        out["event"] = _data(await client.call_tool(
            "add_event", {"effect": "the swap lost 3% to fees",
                          "cause": "gas jumped to 140 gwei during the NFT mint"}))
        out["query"] = _data(await client.call_tool(
            "query", {"query": "why did the swap lose to fees?"}))
        out["retrieve"] = _data(await client.call_tool("retrieve", {"query": "gas fees swap"}))
        out["outcome"] = _data(await client.call_tool(
            "report_outcome", {"retrieval_id": out["retrieve"]["retrieval_id"],
                               "outcome": "negative"}))
        out["playbook"] = (await client.call_tool("playbook", {})).content[0].text
        out["explain"] = _data(await client.call_tool("explain", {"id": entry_id}))
        out["kg_assert"] = _data(await client.call_tool(
            "kg_assert", {"subject_kind": "pool", "subject_id": "eth-usdc",
                          "predicate": "deployed_by",
                          "object": {"kind": "address_cluster", "id": "d1"},
                          "valid_from": 10}))
        out["kg_query"] = _data(await client.call_tool(
            "kg_query", {"subject_kind": "pool", "subject_id": "eth-usdc", "block": 20}))
        out["forget"] = _data(await client.call_tool(
            "forget", {"matching": "NFT mint", "dry_run": True}))
        out["bad"] = await client.call_tool("kg_query", {"subject_kind": "pool",
                                                          "subject_id": "x"})
    return out


@pytest.mark.slow
def test_every_tool_through_the_sdk_client_over_stdio() -> None:
    with short_dir() as base:
        data = base / "data"
        proc = start_daemon(data, "--feed", "none")
        try:
            wait_ready(proc, data / "grimoire.sock")
            with raw_connect(data / "grimoire.sock") as sock:
                entry = rpc(sock, "entry.add", {
                    "category": "warning",
                    "content": "Avoid swaps when gas is above 80 gwei because fees eat the "
                               "gain"})["result"]
            out = asyncio.run(_session(data, entry["id"]))
            with raw_connect(data / "grimoire.sock") as sock:
                effect = rpc(sock, "episode.get", {"id": out["event"]["id"]})["result"]
                book = rpc(sock, "playbook.get")["result"]["markdown"]
        finally:
            assert stop_daemon(proc) == 0
    assert set(out["tools"]) == TOOLS
    for tool in out["tools"].values():
        assert tool.description and tool.input_schema["type"] == "object"
    assert out["tools"]["add_event"].input_schema["required"] == ["effect"]
    assert out["event"]["cause_created"] is True
    assert effect["text"] == "the swap lost 3% to fees"
    assert effect["causal_hint"] == out["event"]["cause_id"]
    narrative = out["query"]["narrative"]
    assert "gas jumped to 140 gwei" in narrative and "fees" in narrative
    assert out["retrieve"]["items"]
    assert "updated" in out["outcome"]
    def untimed(markdown: str) -> list[str]:
        # The heartbeat may tick between the two reads: compare what the file lists.
        return [line for line in markdown.splitlines() if line.startswith(("#", "- `"))]

    assert untimed(out["playbook"]) == untimed(book)
    assert entry["id"] in json.dumps(out["explain"])
    assert out["kg_assert"]["id"]
    assert "eth-usdc" in json.dumps(out["kg_query"])
    # A dry run names the cause episode that quotes the phrase, and erases nothing.
    assert "NFT mint" in json.dumps(out["forget"])
    assert out["bad"].is_error and "exactly one" in out["bad"].content[0].text


@pytest.mark.slow
def test_stdout_carries_only_protocol_and_no_daemon_is_a_clear_tool_error() -> None:
    """Raw stdio: every stdout line is a JSON-RPC message, even with no daemon to talk to."""
    import subprocess

    with short_dir() as base:
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "playbook", "arguments": {}}},
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "grimoire", "mcp", "--data", str(base / "none")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=daemon_env(), cwd=str(REPO))
        assert proc.stdin is not None and proc.stdout is not None
        lines: list[dict[str, Any]] = []
        try:
            for request in requests:
                proc.stdin.write((json.dumps(request) + "\n").encode())
                proc.stdin.flush()
                if "id" in request:  # a request: read up to and including its answer
                    while not lines or lines[-1].get("id") != request["id"]:
                        raw = proc.stdout.readline()
                        assert raw, proc.stderr.read().decode() if proc.stderr else ""
                        lines.append(json.loads(raw))
            proc.stdin.close()
            assert proc.wait(60) == 0
            lines += [json.loads(x) for x in proc.stdout.read().decode().splitlines() if x]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(m.get("jsonrpc") == "2.0" for m in lines)
    answer = next(m for m in lines if m.get("id") == 2)
    assert answer["result"]["isError"] is True
    assert "grimoire run" in answer["result"]["content"][0]["text"]
