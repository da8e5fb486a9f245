"""A read-only open of a table still at the version its saved index names reads the
index alone: no LanceDB import (a second of an offline owner command, issue 27); a table
that moved on since the save is read through LanceDB, so nothing stale is served."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from grimoire.stores.episodes.lance import LanceEpisodes
from tests.stores.episodes.test_episode_sidecar import EMB, REPO, fill, open_store

READ = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tests.stores.episodes.test_episode_sidecar import EMB, open_store
    with open_store(Path(sys.argv[1]), read_only=True) as store:
        query = EMB.embed(["sidecar swap number 17 on pool 3"])[0]
        out = {"count": store.count(),
               "get": [e.text for e in (store.get("s-3"), store.get("s-120")) if e],
               "search": [e.id for e, _ in store.search(query, 5)],
               "text": [e.id for e, _ in store.text_search("swap 17 pool", 5)],
               "lancedb": "lancedb" in sys.modules}
    print(json.dumps(out))
""")


def read_elsewhere(path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", READ, str(path)], cwd=REPO, check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_a_reader_of_an_unchanged_table_does_not_import_lancedb(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 200)
        query = EMB.embed(["sidecar swap number 17 on pool 3"])[0]
        want = {"count": 200, "get": [store.get("s-3").text, store.get("s-120").text],  # type: ignore[union-attr]
                "search": [e.id for e, _ in store.search(query, 5)],
                "text": [e.id for e, _ in store.text_search("swap 17 pool", 5)]}
    got = read_elsewhere(tmp_path)
    assert got.pop("lancedb") is False
    assert got == want


def test_a_table_written_after_the_save_is_read_through_lancedb(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 100)
    with open_store(tmp_path) as writer:  # appends and flushes; the save is still at 100
        fill(writer, 100, 200)
        writer.flush()
        got = read_elsewhere(tmp_path)
        assert got["lancedb"] is True
        assert got["count"] == 200 and len(got["get"]) == 2  # type: ignore[arg-type]


def test_version_on_disk_is_the_tables_version(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 0, 120)
        store.flush()
    lance = LanceEpisodes(tmp_path, model_id=EMB.model_id, dim=EMB.dim, read_only=True)
    assert lance.version_on_disk() == int(lance.table.version)
    assert LanceEpisodes(tmp_path / "none", model_id=EMB.model_id, dim=EMB.dim,
                         read_only=True).version_on_disk() is None
