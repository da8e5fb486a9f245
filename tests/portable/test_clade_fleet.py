"""Many agents on one Clade table (issue 29, part 4): concurrent publishers neither lose nor
duplicate items, a commit that lost its race is tried again without adding its rows twice,
a pull takes one row per key, and the table's files and versions stay bounded because the
writer whose commit makes every ``clade.compact_every``-th version compacts it. The fleet
itself (twenty processes on the S3-compatible server) is ``benches.fleet``, also
``scripts/bench_scale.py --part fleet``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest

from grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.portable import clade
from scripts.benches.fleet import run_fleet, table_objects
from tests.portable.test_clade import s3_server  # noqa: F401 - the fixture

WARNING = "Avoid swaps when gas_gwei is above 80 because fees eat the whole gain"


def _publish_one(path: Path, uri: str, **config: Any) -> dict[str, Any]:
    from grimoire.config import Config

    with Grimoire.open(path, config=Config().replace(**config),
                       embedder=HashEmbedder()) as g:
        g.entry_add(category="warning", content=WARNING, confidence=0.9)
        return g.clade_publish(uri)


def test_a_pull_takes_one_row_per_key(tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    assert _publish_one(tmp_path / "alpha", uri)["published"] == 1
    table = lancedb.connect(uri).open_table(clade.TABLE)
    table.add(table.to_arrow())  # what two racing inserts of one key leave behind
    with Grimoire.open(tmp_path / "beta", embedder=HashEmbedder()) as b:
        got = b.clade_pull(uri)
        assert got["rows"] == 2 and got["foreign"] == got["alerts"] == 1
        assert got["entries"] == {"already_imported": 0, "admitted": 1}
        assert len(b.context.episodes.recent(10, types=["clade_alert"])) == 1


def test_a_create_that_lost_the_race_puts_the_rows_back(tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    assert _publish_one(tmp_path / "alpha", uri)["published"] == 1
    # What a sibling's create that looked before alpha's and committed after does: LanceDB
    # rebases its Overwrite onto the latest version, an empty table on top of alpha's row.
    late = lancedb.connect(uri).create_table(clade.TABLE, schema=clade._SCHEMA,
                                             mode="overwrite")
    assert late.count_rows() == 0 and late.version == 3
    table = clade._put_back(late)
    assert table.to_arrow().column("content").to_pylist() == [WARNING]
    assert clade._put_back(table).count_rows() == 1  # merged by key: never doubled


class _AnswerLost:
    """A real LanceDB table whose first merge commits but answers as a lost race does (the
    commit landed; its answer did not), to show the retry adds nothing twice."""

    def __init__(self, table: Any) -> None:
        self.table, self.calls = table, 0

    def checkout_latest(self) -> None:
        self.table.checkout_latest()

    def merge_insert(self, on: str) -> Any:
        self.calls += 1
        builder = self.table.merge_insert(on)
        if self.calls > 1:
            return builder
        outer = self

        class _Builder:
            def when_not_matched_insert_all(self) -> _Builder:
                builder.when_not_matched_insert_all()
                return self

            def execute(self, data: pa.Table) -> Any:
                builder.execute(data)
                raise RuntimeError("lance error: Too many concurrent writers. Attempted 7 "
                                   "times, but failed on retry_timeout of 30.000 seconds.")

        assert outer.calls == 1
        return _Builder()


def test_a_lost_race_is_tried_again_without_adding_rows_twice(tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    table = clade._table(uri)
    rows = pa.Table.from_pylist([{"key": "a" * 64, "origin": "alpha", "content_hash": "x",
                                  "category": "warning", "content": WARNING}],
                                schema=clade._SCHEMA)
    racing = _AnswerLost(table)
    result = clade._merge(racing, rows, attempts=3)
    assert racing.calls == 2 and result.num_inserted_rows == 0  # it had landed already
    assert table.count_rows() == 1
    with pytest.raises(RuntimeError, match="concurrent writers"):
        clade._merge(_AnswerLost(table), rows, attempts=1)  # out of attempts: reported
    other = _AnswerLost(table)
    other.merge_insert = lambda on: (_ for _ in ()).throw(RuntimeError("disk on fire"))
    with pytest.raises(RuntimeError, match="disk on fire"):
        clade._merge(other, rows, attempts=3)  # not a lost race: not tried again


@pytest.mark.filterwarnings("ignore:optimize.cleanup_older_than=0:UserWarning")
def test_the_elected_writer_compacts_and_old_versions_go(tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    config = {"clade.compact_every": 4, "clade.keep_versions_s": 0.0}
    results = [_publish_one(tmp_path / f"agent{i}", uri, **config) for i in range(5)]
    # version 1 is the empty table; each publish makes one; a compaction two (5-6, 9-10)
    assert [r["version"] for r in results] == [2, 3, 4, 7, 8]
    assert [r.get("compacted") for r in results] == [None, None, True, None, True]
    table = lancedb.connect(uri).open_table(clade.TABLE)
    assert table.count_rows() == 5
    assert len(table.list_versions()) == 1  # nothing older than 0 s is kept
    assert table_objects(uri)["data"] == 1  # five files, one per publish, merged into one


@pytest.mark.slow
def test_twenty_agents_on_one_s3_table_lose_and_duplicate_nothing(
        s3_server: str, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    agents, cycles, per_cycle, every = 20, 3, 2, 10
    s = run_fleet(s3_server, tmp_path / "fleet", agents=agents, cycles=cycles,
                  per_cycle=per_cycle,
                  config={"clade.compact_every": every, "clade.keep_versions_s": 10.0})
    items = agents * cycles * per_cycle
    assert s["offered"] == s["acked"] == s["rows"] == items, s["pending_detail"]
    assert s["dup_rows"] == 0 and s["dup_alerts"] == 0
    assert s["lost_acked"] == 0 and s["lost_pulls"] == 0
    assert s["pulled"] == s["expected_pulls"] == items * (agents - 1)
    assert all(r["drained"] for r in s["reports"])
    assert s["unsettled"] == []  # every agent stopped because nothing was left to pull
    # bounded by work, compacted: one file per publish (agents * cycles of them) would be
    # read without it; the latest version reads those since the last compaction
    assert s["compactions"] >= 1
    assert s["fragments"] <= 2 * every < agents * cycles
    assert s["versions"] < s["version"]  # versions older than keep_versions_s are gone
