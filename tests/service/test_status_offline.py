"""``grimoire status`` with no daemon reads the episode figures the writer saved at its
close, without importing LanceDB, while they are still the store's; once the episodes have
changed behind them it reads the store (issue 27 item 5: numbers stay true).

Through the installed ``grimoire`` in a subprocess; ``PYTHONPROFILEIMPORTTIME`` lists
every module the command imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.ids import new_id
from grimoire.models.embedders import HashEmbedder
from grimoire.records import episode_from_params
from grimoire.stores.episodes.store import EpisodeStore
from tests.service.test_cli_errors import GRIMOIRE

DAY = 86_400_000


def _clock(offset_ms: int = -3_600_000) -> FrozenClock:
    """The writer's time: by default an hour before the wall clock the CLI's status reads
    the metrics' windows at (a simulated store runs ahead of it instead)."""
    return FrozenClock(time.time_ns() // 1_000_000 + offset_ms)


def _fill(data: Path, offset_ms: int = -3_600_000) -> None:
    clock = _clock(offset_ms)
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder()) as g:
        for day in range(20):
            g.episode_write(text=f"swapped WETH for USDC on day {day}", type="action",
                            outcome="positive" if day % 3 else "negative",
                            gain=5.0 if day % 3 else -7.5, timestamp=clock() - day * DAY)
        g.episode_write(text="gas fell to 9 gwei overnight")


def _status(data: Path) -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIMOIRE_")}
    env.update(GRIMOIRE_EMBEDDING__MODEL="hash-384", PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([GRIMOIRE, "status", "--json", "--data", str(data)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer, proc.stderr


def _read(data: Path) -> dict[str, Any]:
    """status with the episodes read (a read-only open that has loaded them)."""
    with Grimoire.open(data, embedder=HashEmbedder(), read_only=True) as g:
        g.context.episodes.count()
        return g.status()


@pytest.mark.parametrize("offset_ms", [-3_600_000, 2 * DAY], ids=["behind", "ahead"])
def test_offline_status_uses_the_saved_figures_without_lancedb(tmp_path: Path,
                                                              offset_ms: int) -> None:
    data = tmp_path / "data"
    _fill(data, offset_ms)
    offline, imported = _status(data)
    assert "lancedb" not in imported  # the episodes were not opened
    assert "saved by the writer" in offline["episodes"]["figures"]
    full = _read(data)
    for key in ("rows", "flushed_rows", "buffered_rows", "fragments", "data_files",
                "versions", "lance_bytes", "journal_bytes", "embedding_model"):
        assert offline["episodes"][key] == full["episodes"][key], key
    assert offline["episodes"]["rows"] == 21
    assert offline["health"]["pnl_trend"] == full["health"]["pnl_trend"]
    assert offline["health"]["pnl_trend"]["n"] == 20
    assert offline["health"]["prediction_accuracy"] == full["health"]["prediction_accuracy"]


def test_a_change_since_the_save_is_read_from_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data)
    # a writer that did not save (the episode store alone, as after a crash): one more row
    cfg = Config().episodes
    clock = _clock()
    now = clock()
    with EpisodeStore.open(data / "episodes", model_id="hash-384", dim=384, config=cfg,
                           clock=clock) as store:
        episode = episode_from_params({"text": "a late episode", "type": "action",
                                       "gain": 100.0}, id=new_id(now), now_ms=now)
        store.append([episode], HashEmbedder().embed([episode.text]))
    offline, imported = _status(data)
    assert "lancedb" in imported and "figures" not in offline["episodes"]
    assert offline["episodes"]["rows"] == 22
    assert offline["health"]["pnl_trend"]["n"] == 21
