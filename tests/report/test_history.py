"""The history the report reads: PLAYBOOK.md listings per cycle, retrieval latencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire.errors import ValidationError
from grimoire.stores.semantic import schema as semantic_schema
from grimoire.stores.sqlite import connect
from tests.stores.semantic.test_semantic_support import open_store


def test_a_cycle_listing_is_recorded_and_a_retried_cycle_replaces_it(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.sqlite") as store:
        assert store.record_playbook_listing(1, [("a", 0.5, 0, 0), ("b", 0.9, 3, 1)],
                                             now=10) == 2
        store.record_playbook_listing(2, [("a", 0.6, 1, 0)], now=20)
        store.record_playbook_listing(2, [("a", 0.7, 2, 0)], now=21)  # cycle 2 retried
        rows = store.playbook_listings()
        assert [(r.cycle, r.entry_id, r.recorded_at, r.confidence, r.validated,
                 r.contradicted) for r in rows] == [
            (1, "a", 10, 0.5, 0, 0), (1, "b", 10, 0.9, 3, 1), (2, "a", 21, 0.7, 2, 0)]
        assert [r.cycle for r in store.playbook_listings(since_cycle=2)] == [2]
        store.record_playbook_listing(3, [], now=30)  # a cycle that listed nothing
        assert store.playbook_cycles() == [(1, 10, 2), (2, 21, 1), (3, 30, 0)]


@pytest.mark.parametrize(("rows", "field"), [
    ([("a", 1.5, 0, 0)], "confidence"), ([("a", 0.5, -1, 0)], "validated"),
    ([("a", 0.5, 0, True)], "contradicted"), ([("", 0.5, 0, 0)], "entry_id")])
def test_a_bad_listing_is_refused_and_the_cycle_keeps_its_rows(
        tmp_path: Path, rows: list[tuple[str, float, int, int]], field: str) -> None:
    with open_store(tmp_path / "s.sqlite") as store:
        store.record_playbook_listing(4, [("a", 0.5, 2, 0)], now=1)
        with pytest.raises(ValidationError, match=field):
            store.record_playbook_listing(4, [("b", 0.5, 0, 0), *rows], now=2)
        assert [(r.entry_id, r.recorded_at) for r in store.playbook_listings()] == [("a", 1)]
        assert store.playbook_cycles() == [(4, 1, 1)]


def test_retrievals_keep_their_latency_and_outcome_as_a_series(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.sqlite") as store:
        store.log_retrieval("r1", query="q", mode="deciding", items=[], now=5, latency_ms=4.5)
        store.log_retrieval("r2", query="q", mode="browse", items=[], now=7)
        store.set_retrieval_outcome("r1", "positive")
        with pytest.raises(ValidationError, match="latency_ms"):
            store.log_retrieval("r3", query="q", mode="browse", items=[], now=9,
                                latency_ms=float("nan"))
        series = store.retrieval_series()
        assert [(p.created_at, p.latency_ms, p.mode, p.outcome) for p in series] == [
            (5, 4.5, "deciding", "positive"), (7, None, "browse", None)]
        assert [p.created_at for p in store.retrieval_series(since=6)] == [7]


def test_a_version_3_store_keeps_its_retrieval_log_through_migration_4(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.sqlite"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", semantic_schema.MIGRATIONS[:3])
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", 3)
    open_store(path).close()
    conn = connect(path)
    conn.execute("INSERT INTO retrieval_log (retrieval_id, created_at, query, mode, items) "
                 "VALUES ('old', 3, 'q', 'deciding', '[]')")
    conn.close()
    monkeypatch.undo()
    with open_store(path) as store:
        (old,) = store.retrieval_series()
        assert (old.created_at, old.latency_ms) == (3, None)
        store.record_playbook_listing(1, [("a", 0.5, 0, 0)], now=4)
    conn = connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 4
    finally:
        conn.close()
