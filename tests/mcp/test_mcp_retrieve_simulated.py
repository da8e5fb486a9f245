"""The MCP ``retrieve`` tool says when the memory is simulated and gives its items' times in
words (simulated time, never real UTC, for the market simulator's memory), as ``explain``
does; real memory's times are UTC and carry no label.

Through the SDK's own client over stdio (``python -m grimoire mcp``), no daemon running.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.mcp.test_mcp_stdio import _data
from tests.portable.test_marker_carried import _store
from tests.service.daemon_support import REPO, daemon_env


async def _retrieve(data: Path, **extra: Any) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "grimoire", "mcp", "--data", str(data)],
                                   env=daemon_env(), cwd=str(REPO))
    async with Client(params) as client:
        found: dict[str, Any] = _data(await client.call_tool(
            "retrieve", {"query": "gas fees swap", "mode": "browse", **extra}))
    return found


def test_retrieve_labels_simulated_memory_and_gives_readable_times(tmp_path: Path) -> None:
    for name, feed in (("demo", "sim"), ("live", "none")):
        _store(tmp_path / name, feed)
    sim = asyncio.run(_retrieve(tmp_path / "demo"))
    assert "simulated memory" in sim["memory"] and "simulated time" in sim["memory"]
    timed = [item for item in sim["items"] if "timestamp" in item]
    assert timed, sim["items"]  # the episode has its time
    for item in timed:
        assert item["time"].endswith(" simulated time"), item
        assert "UTC" not in item["time"]
        assert item["time"][:4].isdigit() and ":" in item["time"]  # a date and a clock time

    real = asyncio.run(_retrieve(tmp_path / "live"))
    assert "memory" not in real
    timed = [item for item in real["items"] if "timestamp" in item]
    assert timed and all(item["time"].endswith(" UTC") for item in timed), real["items"]

    detail = asyncio.run(_retrieve(tmp_path / "demo", detail=True))  # the full answer too
    assert "simulated time" in detail["memory"]
