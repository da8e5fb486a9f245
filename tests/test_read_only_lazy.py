"""A read-only open opens only what the command needs (issue 27, item 5).

The owner's commands without a daemon open the data directory read-only. Opening the
episode store (LanceDB's import and the table's load) and loading the embedding model cost
seconds; ``entry list`` / ``show``, ``playbook`` and the graph need neither. The speed is
measured in ``scripts/bench_daemon.py --part owner``; these tests check the mechanism.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.stores.episodes.store import EpisodeStore
from tests.curator.test_curator_support import curator_config, open_grimoire, put
from tests.service.daemon_support import daemon_env
from tests.service.test_cli_owner import GRIMOIRE

T0 = 1_767_225_600_000  # 2026-01-01


def _store(path: Path) -> str:
    with open_grimoire(path, FrozenClock(T0)) as g:
        entry = put(g, content="Gas averages 8 gwei between 02:00 and 04:00 UTC (n=40).")
        # Episodes arrive out of order, with their own past times: the newest is the max.
        for offset in (5_000, 9_000, 1_000):
            g.episode_write(text=f"swap at +{offset}", type="action", outcome="positive",
                            timestamp=T0 - 86_400_000 + offset)
        g.curator_run()  # writes PLAYBOOK.md, which the owner's playbook reads
        return entry.id


def test_owner_reads_open_neither_episodes_nor_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    entry_id = _store(data)
    config = curator_config(**{"embedding.model": "hash-384"}).replace(data_dir=str(data))
    with Grimoire.open(config=config, read_only=True) as g:
        ctx = g.context
        assert g.entry_list()["entries"][0]["id"] == entry_id
        assert g.entry_get(entry_id[:8])["id"] == entry_id
        g.playbook_get()
        g.kg_at({"kind": "token", "id": "WETH"}, 10)
        assert ctx.episode_store.peek() is None, "no episode was read: LanceDB stays closed"
        assert not ctx.embedder.loaded, "nothing was embedded: the model stays unloaded"
        # Confidence is read at the data's time, the newest episode, from the journal.
        assert ctx.newest_episode_time() == T0 - 86_400_000 + 9_000
        assert ctx.episode_store.peek() is None
        found = g.retrieve(query="gas at night", k=3)
        assert found["items"]
        assert ctx.episode_store.peek() is not None and ctx.embedder.loaded
        assert ctx.newest_episode_time() == T0 - 86_400_000 + 9_000  # the store agrees


def test_the_journal_keeps_the_newest_time_and_an_old_store_learns_it_at_open(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    episodes = data / "episodes"
    assert EpisodeStore.newest_on_disk(episodes) == (True, T0 - 86_400_000 + 9_000)
    import apsw

    db = apsw.Connection(str(episodes / "episodes_journal.sqlite"))
    db.execute("DELETE FROM meta WHERE key = 'newest_timestamp'")  # as an older Grimoire left it
    db.close()
    assert EpisodeStore.newest_on_disk(episodes) == (False, None)
    with Grimoire.open(config=curator_config(**{"embedding.model": "hash-384"}).replace(
            data_dir=str(data)),
                       read_only=True) as g:  # still right: it opens the store to ask
        assert g.context.newest_episode_time() == T0 - 86_400_000 + 9_000
    with open_grimoire(data, FrozenClock(T0)):  # the writer's open records it
        pass
    assert EpisodeStore.newest_on_disk(episodes) == (True, T0 - 86_400_000 + 9_000)


def test_entry_list_without_a_daemon_never_imports_lancedb(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    for command in (["entry", "list"], ["playbook", "--json"], ["kg", "at", "token", "WETH",
                                                                "10"]):
        p = subprocess.run([sys.executable, "-X", "importtime", str(GRIMOIRE), *command,
                            "--data", str(data)], capture_output=True, text=True,
                           env=daemon_env(), timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "lancedb" not in imported and "fastembed" not in imported, command


def test_explain_and_retrieve_without_a_daemon_read_the_saved_index_not_lancedb(
        tmp_path: Path) -> None:
    """The episode store the writer closed is read from its saved index (``episodes.index``)
    while the table is at the version it names: the episodes come without LanceDB."""
    data = tmp_path / "data"
    entry_id = _store(data)
    for command in (["explain", entry_id], ["retrieve", "swap", "-k", "3", "--json"]):
        p = subprocess.run([sys.executable, "-X", "importtime", str(GRIMOIRE), *command,
                            "--data", str(data)], capture_output=True, text=True,
                           env=daemon_env(), timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "grimoire.stores.episodes.store" in imported, command
        assert "lancedb" not in imported, command
        if command[0] == "retrieve":
            assert "swap at +" in p.stdout  # the episodes are there, read from the index
