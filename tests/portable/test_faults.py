"""Faults with nothing lost (issue 28 part 5): each test makes the fault itself, in a child
process (``scripts/benches/fault_child.py``), then counts the acknowledged writes.

The scenarios are ``scripts/benches/faults.py``'s, which ``bench_privacy.py --part faults``
times; here they are asserted on. Slow: each starts Python processes that open the stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from grimoire.cli.app import main
from scripts.benches import faults


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()  # the commands configure logging for the process


pytestmark = pytest.mark.slow
EPISODES = 60


def test_disk_full_mid_batch_refuses_that_batch_whole_and_keeps_serving(tmp_path: Path) -> None:
    row = faults.disk_full(tmp_path, EPISODES)
    assert row.detail["failed_batch"] is not None  # the limit was really hit
    assert row.lost == 0 and row.acked > EPISODES
    assert row.detail["refused_rows_found"] == 0  # unacknowledged: cleanly absent
    assert row.detail["reads_served"] is True


def test_kill_during_backup_leaves_the_store_whole_and_no_backup(tmp_path: Path) -> None:
    row = faults.kill_backup(tmp_path, EPISODES)
    assert row.detail["dest_exists"] is False and row.detail["partial_exists"] is True
    assert row.lost == 0 and (tmp_path / "backup" / "manifest.json").is_file()


def test_kill_during_import_then_again_imports_each_item_once(tmp_path: Path) -> None:
    row = faults.kill_import(tmp_path, EPISODES)
    assert row.lost == 0
    assert row.detail["entries"] == row.detail["clean_entries"]
    assert row.detail["third_run"]["entries"].get("admitted", 0) == 0


def test_kill_during_compaction_loses_nothing(tmp_path: Path) -> None:
    row = faults.kill_compact(tmp_path, EPISODES)
    assert row.lost == 0 and row.acked > EPISODES


def test_kill_during_forget_is_finished_at_the_next_open(tmp_path: Path) -> None:
    row = faults.kill_forget(tmp_path, EPISODES)
    assert row.lost == 0 and row.detail["bot_a_left"] == 0


@pytest.mark.parametrize("store", ["episodes", "semantic", "graph"])
def test_a_corrupted_store_is_named_by_check_and_repair_brings_back_the_backup_and_more(
        tmp_path: Path, store: str) -> None:
    row = faults.corrupted(tmp_path, EPISODES, store)
    assert row.detail["check"]["damaged"] == [store]
    assert row.detail["repair"]["from_live"] == [s for s in faults_stores() if s != store]
    repaired = faults.check_of(tmp_path / "repaired")
    assert repaired["ok"], repaired
    # The writes acknowledged after the backup, which the damaged file alone held, came
    # back from its redo copy (stores.redo): nothing acknowledged is lost.
    assert faults.acked_after_backup(tmp_path)
    assert row.detail["missing"] == [] and row.lost == 0
    assert row.detail["repair"]["replayed"][store]


def test_check_names_the_damage_on_the_command_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    faults.corrupted(tmp_path, EPISODES, "semantic")
    capsys.readouterr()
    assert main(["check", "--data", str(tmp_path / "data")]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["damaged"] == ["semantic"] and "repair" in out["stores"]["semantic"]
    assert main(["check", "--data", str(tmp_path / "repaired")]) == 0


def faults_stores() -> list[str]:
    from grimoire.portable.check import STORES

    return list(STORES)
