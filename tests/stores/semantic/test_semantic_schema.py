"""Migrations, schema version and embedding-model checks of the semantic store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grimoire.errors import (
    EmbeddingMismatchError,
    SchemaVersionError,
    StoreError,
    ValidationError,
)
from grimoire.stores.semantic import schema as semantic_schema
from grimoire.stores.semantic.types import CausalEdge, EdgeKind
from grimoire.stores.sqlite import connect
from tests.stores.semantic.test_semantic_support import (
    DIM,
    MODEL,
    dump,
    make_entry,
    open_store,
    unit,
)


def _user_version(path: Path) -> int:
    conn = connect(path)
    try:
        return int(conn.pragma("user_version"))
    finally:
        conn.close()


def test_new_store_is_at_the_current_version_with_its_model_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION
    conn = connect(path)
    try:
        value = conn.execute("SELECT value FROM meta WHERE key = 'embedding'").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert json.loads(value) == {"model_id": MODEL, "dim": DIM}
    assert {"grimoire_entries", "entry_vectors", "entries_fts", "causal_edges",
            "quarantined_entries", "admission_log", "retrieval_log", "curator_deltas",
            "episode_state", "meta"} <= tables


def test_reopening_keeps_data_and_does_not_migrate_again(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(1)
    with open_store(path) as store:
        entry = make_entry()
        store.insert_entry(entry, unit(rng))
    with open_store(path) as store:
        assert store.get_entry(entry.id) == entry


def test_store_from_a_newer_grimoire_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    conn = connect(path)
    conn.pragma("user_version", semantic_schema.SCHEMA_VERSION + 5)
    conn.close()
    before = dump(path)
    with pytest.raises(SchemaVersionError) as info:
        open_store(path)
    message = str(info.value)
    assert str(semantic_schema.SCHEMA_VERSION + 5) in message
    assert "Upgrade grimoire" in message
    assert dump(path) == before
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION + 5


@pytest.mark.parametrize(("model_id", "dim"), [("other-model", DIM), (MODEL, DIM * 2)])
def test_store_built_with_another_embedding_is_refused_naming_both(
    tmp_path: Path, model_id: str, dim: int
) -> None:
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    with pytest.raises(EmbeddingMismatchError) as info:
        open_store(path, model_id=model_id, dim=dim)
    message = str(info.value)
    assert MODEL in message and model_id in message
    assert f"dim {DIM}" in message and f"dim {dim}" in message


def test_a_failing_migration_leaves_the_store_at_the_previous_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each migration runs in one transaction with its user_version bump."""
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(2)
    with open_store(path) as store:
        store.insert_entry(make_entry(), unit(rng))
    before = dump(path)
    broken = (
        "CREATE TABLE half_done (x INTEGER);"
        "INSERT INTO no_such_table VALUES (1);"
    )
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", (*semantic_schema.MIGRATIONS, broken))
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", semantic_schema.SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="no_such_table"):
        open_store(path)
    monkeypatch.undo()
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION
    conn = connect(path)
    try:
        assert conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    finally:
        conn.close()
    assert dump(path) == before


def test_a_new_migration_is_applied_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    extra = "CREATE TABLE added_later (x INTEGER);"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", (*semantic_schema.MIGRATIONS, extra))
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", semantic_schema.SCHEMA_VERSION + 1)
    open_store(path).close()
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION


def test_a_version_2_store_keeps_its_admission_log_through_migration_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 3 adds the gate's off-topic flag and reasons to admission_log: decisions
    logged before it read as not flagged with no reasons; new ones keep both."""
    path = tmp_path / "s.sqlite"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", semantic_schema.MIGRATIONS[:2])
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", 2)
    open_store(path).close()
    conn = connect(path)
    conn.execute(
        "INSERT INTO admission_log (decided_at, decision, future_utility, factual_confidence, "
        "semantic_novelty, temporal_recency, content_type_prior, composite, candidate, "
        "category, entry_id) VALUES (5, 'admitted', .5, .5, .5, .5, .5, .5, 'old', 'insight', "
        "'e1')")
    conn.close()
    monkeypatch.undo()
    assert _user_version(path) == 2
    with open_store(path) as store:
        (old,) = store.list_admissions()
        assert (old.candidate, old.off_topic, old.reasons) == ("old", False, ())
        factors = dict.fromkeys(old.factors, 0.4)
        store.log_admission(decision="rejected", factors=factors, composite=0.4,
                            candidate="moon soon", off_topic=True,
                            reasons=("off-topic: nearest entry at cosine 0.12 < 0.5",))
        with pytest.raises(ValidationError, match="reasons"):
            store.log_admission(decision="rejected", factors=factors, composite=0.4,
                                candidate="x", reasons="not a list")  # type: ignore[arg-type]
        new, _ = store.list_admissions()
        assert new.off_topic and new.reasons == ("off-topic: nearest entry at cosine 0.12 < 0.5",)
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION >= 3


def test_open_rejects_a_nonsense_dimension(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="dim"):
        open_store(tmp_path / "s.sqlite", dim=0)
    assert not (tmp_path / "s.sqlite").exists()


def test_a_version_3_store_gains_the_evidence_table_through_migrations_4_and_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 5 (issue 11) adds entry_evidence; a version-3 store opens, migrates through
    4 (the playbook history) and 5, and counts evidence afterwards."""
    path = tmp_path / "s.sqlite"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", semantic_schema.MIGRATIONS[:3])
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", 3)
    open_store(path).close()
    monkeypatch.undo()
    assert _user_version(path) == 3
    with open_store(path) as store:
        assert store.record_evidence("e", ["a"], "confirm", cycle=1, now=1) == ["a"]
        assert store.count_evidence("e") == (1, 0)
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION >= 5


def test_a_version_5_store_gains_edge_uses_through_migration_6(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 6 (issue 24) adds uses / used_at to causal_edges: an edge from before it
    reads as never used, then counts its uses."""
    path = tmp_path / "s.sqlite"
    monkeypatch.setattr(semantic_schema, "MIGRATIONS", semantic_schema.MIGRATIONS[:5])
    monkeypatch.setattr(semantic_schema, "SCHEMA_VERSION", 5)
    with open_store(path) as store:
        store.upsert_edge(CausalEdge("a", "b", EdgeKind.AUTO, 0.5), now=10)
    monkeypatch.undo()
    with open_store(path) as store:
        assert store.mark_edges_used([("a", "b"), ("a", "b"), ("x", "y")], now=30) == 1
        assert store.mark_edges_used([("a", "b")], now=20) == 1  # used_at never moves back
        assert store.prune_unused_edges(before=30) == 0
        assert store.prune_unused_edges(before=31) == 1
    assert _user_version(path) == semantic_schema.SCHEMA_VERSION >= 6
