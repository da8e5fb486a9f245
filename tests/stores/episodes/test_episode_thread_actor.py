"""Episode schema 2: ``thread`` and ``actor`` are stored, returned, and old stores migrate."""

from __future__ import annotations

from pathlib import Path

import lancedb

from grimoire.records import episode_from_params
from grimoire.stores.episodes.schema import V2_FIELDS, V3_FIELDS
from tests.stores.episodes.test_episode_store import add, make_episode, open_store


def test_thread_and_actor_survive_buffer_flush_and_reopen(tmp_path: Path) -> None:
    ep = make_episode(thread="session_3", actor="Caroline")
    with open_store(tmp_path) as store:
        add(store, ep)
        assert store.get(ep.id) == ep  # buffered
        store.flush()
        assert store.get(ep.id) == ep  # from LanceDB
    with open_store(tmp_path) as store:
        got = store.get(ep.id)
        assert got is not None and (got.thread, got.actor) == ("session_3", "Caroline")


def test_params_accept_thread_and_actor() -> None:
    ep = episode_from_params({"text": "hi", "thread": "t1", "actor": "Mel"}, id="x", now_ms=1)
    assert ep.to_dict()["thread"] == "t1" and ep.to_dict()["actor"] == "Mel"


def test_a_version_1_table_gains_the_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    """A store written before schema 2 (no thread/actor columns) is migrated on open: its
    rows read back with thread/actor None and new rows carry them."""
    old = make_episode(text="before the migration")
    with open_store(tmp_path) as store:
        add(store, old)
        store.flush()
    table = lancedb.connect(str(tmp_path)).open_table("episodes")
    table.drop_columns([f.name for f in (*V2_FIELDS, *V3_FIELDS)])  # a version-1 table
    assert "thread" not in table.schema.names
    new = make_episode(text="after it", thread="t", actor="a")
    with open_store(tmp_path) as store:
        got = store.get(old.id)
        assert got is not None and got.text == old.text and got.thread is None
        add(store, new)
        store.flush()
    with open_store(tmp_path) as store:
        got_new = store.get(new.id)
        assert got_new is not None and got_new.thread == "t" and got_new.actor == "a"
        assert store.count() == 2
