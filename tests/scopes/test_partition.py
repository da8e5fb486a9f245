"""Scopes are partitions: a scope's stores live in DATA/scopes/NAME, writes are stamped with
the scope they went to, and a record that names another scope is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import NotFoundError, ValidationError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.scopes.names import check_scope, scopes_on_disk
from grimoire.scopes.registry import registry


def test_a_scope_is_a_complete_set_of_stores_under_the_data_directory(g: Grimoire) -> None:
    root = g.context.data_dir
    g.episode_write(text="gas spiked on the alpha pool", scope="alpha")
    where = root / "scopes" / "alpha"
    assert (where / "semantic.sqlite").is_file() and (where / "graph.lmdb").exists()
    assert (where / "episodes").is_dir()
    assert (where.stat().st_mode & 0o777) == 0o700
    assert scopes_on_disk(root) == ["default", "alpha"]
    # the default scope is the data directory itself, as before scopes existed
    assert g.status()["scope"] == "default"
    assert g.context.episodes.count() == 0


def test_every_scope_shares_the_one_embedding_model(g: Grimoire) -> None:
    a = registry(g).get("alpha")
    b = registry(g).get("beta")
    assert a.context.embedder is g.context.embedder is b.context.embedder
    assert a.context.clock is g.context.clock


def test_writes_are_stamped_with_their_scope(g: Grimoire) -> None:
    written = g.episode_write(text="swap on pool p", type="action", scope="alpha")
    assert written["scope"] == "alpha"
    got = g.episode_get(written["id"], scope="alpha")
    assert got["scope"] == "alpha" and got["text"] == "swap on pool p"
    with pytest.raises(NotFoundError):
        g.episode_get(written["id"])  # not in the default scope
    entry = g.entry_add(category="warning", scope="beta",
                        content="Avoid swaps when gas_gwei > 80 because fees eat the gain")
    assert entry["scope"] == "beta"
    listed = g.entry_list(scope="beta")
    assert listed["entries"] and {e["scope"] for e in listed["entries"]} == {"beta"}
    assert g.entry_list(scope="alpha")["entries"] == []


def test_a_record_naming_another_scope_is_refused_and_nothing_is_written(g: Grimoire) -> None:
    with pytest.raises(ValidationError, match=r"episodes\[1\]\.scope"):
        g.episode_write_batch([{"text": "one"}, {"text": "two", "scope": "beta"}],
                              scope="alpha")
    assert registry(g).get("alpha").context.episodes.count() == 0
    ids = g.episode_write_batch([{"text": "one", "scope": "alpha"}], scope="alpha")["ids"]
    assert g.episode_get(ids[0], scope="alpha")["scope"] == "alpha"


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "UPPER", ".hidden", "x" * 65, 5, "a b"])
def test_a_scope_name_is_an_identifier_never_a_path(g: Grimoire, bad: object) -> None:
    with pytest.raises(ValidationError, match="bad scope"):
        check_scope(bad)
    with pytest.raises(ValidationError, match="bad scope"):
        g.health(scope=bad)  # type: ignore[arg-type]
    assert not (g.context.data_dir / "scopes").exists()


def test_a_scope_opened_from_a_scope_reaches_the_others(g: Grimoire) -> None:
    alpha = registry(g).get("alpha")
    assert alpha.health()["scope"] == "alpha"
    assert alpha.health(scope="default")["scope"] == "default"
    assert alpha.health(scope="beta")["scope"] == "beta"


def test_closing_closes_every_scope_and_a_read_only_open_reads_them(tmp_path: Path) -> None:
    clock, emb = FrozenClock(), HashEmbedder()
    with Grimoire.open(tmp_path / "d", clock=clock, embedder=emb) as g:
        wid = g.episode_write(text="oracle lagged", scope="alpha")["id"]
    # every lock was released: a writable open of the same directory and scope works
    with Grimoire.open(tmp_path / "d", clock=clock, embedder=emb) as g:
        assert g.episode_get(wid, scope="alpha")["id"] == wid
    with Grimoire.open(tmp_path / "d", clock=clock, embedder=emb, read_only=True) as ro:
        assert ro.episode_get(wid, scope="alpha")["scope"] == "alpha"
        with pytest.raises(NotFoundError, match="holds nothing yet"):
            ro.status(scope="never")
    assert not (tmp_path / "d" / "scopes" / "never").exists()


def test_a_backup_carries_every_scope_and_a_restore_brings_them_back(tmp_path: Path) -> None:
    from grimoire.portable.backup import backup, restore

    clock, emb = FrozenClock(), HashEmbedder()
    with Grimoire.open(tmp_path / "d", clock=clock, embedder=emb) as g:
        wid = g.episode_write(text="bridge delayed on arbitrum", scope="alpha")["id"]
        g.entry_add(category="warning", scope="alpha",
                    content="Avoid bridges when the queue is long because funds wait hours")
        g.curator_run(scope="alpha")
    made = backup(tmp_path / "d", tmp_path / "bak")
    assert set(made["stores"]["scopes"]) == {"alpha"}
    restore(tmp_path / "bak", tmp_path / "r")
    with Grimoire.open(tmp_path / "r", clock=clock, embedder=emb) as g:
        assert g.episode_get(wid, scope="alpha")["text"] == "bridge delayed on arbitrum"
        assert "funds wait hours" in g.playbook_get(scope="alpha")["markdown"]
        assert g.context.episodes.count() == 0
