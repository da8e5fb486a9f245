"""Episode schema 3: ``marks`` are stored, returned, journaled, and version-2 stores migrate."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pytest

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.errors import ValidationError
from grimoire.records import episode_from_params
from grimoire.stores.episodes.schema import V3_FIELDS
from grimoire.stores.episodes.store import EpisodeStore
from tests.stores.episodes.test_episode_store import EMB, add, make_episode, open_store

MARK = "untrusted:instructions"


def test_marks_survive_buffer_journal_flush_and_reopen(tmp_path: Path) -> None:
    marked = make_episode(marks=(MARK,))
    plain = make_episode()
    with open_store(tmp_path) as store:
        add(store, marked, plain)
        assert store.get(marked.id) == marked  # buffered
    with open_store(tmp_path) as store:  # replayed from the journal if it was not flushed
        assert store.get(marked.id) == marked
        store.flush()
    with open_store(tmp_path) as store:  # from LanceDB
        got, other = store.get(marked.id), store.get(plain.id)
        assert got is not None and got.marks == (MARK,)
        assert other is not None and other.marks == ()


def test_params_take_marks_and_refuse_bad_ones() -> None:
    ep = episode_from_params({"text": "hi", "marks": [MARK]}, id="x", now_ms=1)
    assert ep.to_dict()["marks"] == [MARK]
    with pytest.raises(ValidationError, match="marks"):
        episode_from_params({"text": "hi", "marks": "untrusted"}, id="x", now_ms=1)


def test_a_version_2_table_gains_marks_and_is_readable_before_it(tmp_path: Path) -> None:
    """A store written before schema 3 opens read-only as it is (marks empty), and the
    writer's open adds the column; old rows read back unmarked, new ones keep theirs."""
    old = make_episode(text="before the migration", thread="t")
    with open_store(tmp_path) as store:
        add(store, old)
        store.flush()
    table = lancedb.connect(str(tmp_path)).open_table("episodes")
    table.drop_columns([f.name for f in V3_FIELDS])  # what a version-2 table looks like
    assert "marks" not in table.schema.names
    with EpisodeStore.open(tmp_path, model_id=EMB.model_id, dim=EMB.dim,
                           config=EpisodesConfig(), clock=FrozenClock(),
                           read_only=True) as reader:
        got = reader.get(old.id)
        assert got is not None and got.thread == "t" and got.marks == ()
    assert "marks" not in lancedb.connect(str(tmp_path)).open_table("episodes").schema.names
    new = make_episode(text="after it", marks=(MARK,))
    with open_store(tmp_path) as store:
        add(store, new)
        store.flush()
    assert "marks" in lancedb.connect(str(tmp_path)).open_table("episodes").schema.names
    with open_store(tmp_path) as store:
        got_old, got_new = store.get(old.id), store.get(new.id)
        assert got_old is not None and got_old.marks == () and got_old.thread == "t"
        assert got_new is not None and got_new.marks == (MARK,)
