"""``grimoire reembed``: a copy of a data directory with every vector from another model.

A store remembers the model that embedded it and refuses another one (its vectors would
be compared with a different model's queries), so moving to a stronger embedder
(``embedding.model``) means re-embedding. This writes ``OUT`` from ``DIR``, which is
left as it was:

1. ``semantic.sqlite``: an online-backup copy; each entry's vector recomputed from its
   content (``UPDATE entry_vectors``, same rid), the recorded model replaced, and the
   curator's region model (centroids in the old embedding space) dropped, so the next
   cycle refits it;
2. ``graph.lmdb``: copied as it is (no vectors);
3. ``episodes``: every episode in append order, with the same id and fields, appended to
   a new episode store under the new model, each embedded as the writer embeds it
   (``retrieval.neighbour_context_chars`` of the previous turn in its thread);
4. PLAYBOOK.md, when there is one.

The episode store's lock makes it refuse while a daemon holds ``DIR``: stop it first.
The new model must keep the dimension (the vec0 table is declared with it): both
models offered today are 384-d. Everything is written to ``OUT.partial`` and renamed.

Owns: building the re-embedded copy. Must not modify ``DIR`` nor run beside a daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from grimoire.clock import SystemClock
from grimoire.config import Config
from grimoire.errors import StoreError, ValidationError
from grimoire.models.embedders import Embedder
from grimoire.portable.backup import _lmdb_backup, _sqlite_backup
from grimoire.retrieval.regions import REGIONS_META
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.semantic.codec import vector_to_blob
from grimoire.stores.semantic.schema import META_MODEL
from grimoire.stores.sqlite import connect

__all__ = ["reembed"]

_BATCH = 256


def _recorded_model(path: Path) -> tuple[str, int]:
    conn = connect(path, readonly=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_MODEL,)).fetchone()
    finally:
        conn.close()
    if row is None:
        raise StoreError(f"{path} records no embedding model")
    stored = json.loads(row[0])
    return str(stored["model_id"]), int(stored["dim"])


def _entries(path: Path, embedder: Embedder) -> int:
    conn = connect(path)
    try:
        rows = conn.execute("SELECT rid, content FROM grimoire_entries ORDER BY rid").fetchall()
        with conn:
            for start in range(0, len(rows), _BATCH):
                batch = rows[start:start + _BATCH]
                vectors = embedder.embed([str(content) for _, content in batch])
                for (rid, _), vector in zip(batch, vectors, strict=True):
                    conn.execute("UPDATE entry_vectors SET embedding = ? WHERE rid = ?",
                                 (vector_to_blob(np.asarray(vector, dtype=np.float32)), rid))
            conn.execute("UPDATE meta SET value = ? WHERE key = ?",
                         (json.dumps({"model_id": embedder.model_id, "dim": embedder.dim}),
                          META_MODEL))
            conn.execute("DELETE FROM meta WHERE key = ?", (REGIONS_META,))
    finally:
        conn.close()
    return len(rows)


def _episodes(src: Path, dest: Path, old: tuple[str, int], embedder: Embedder,
              config: Config) -> int:
    clock = SystemClock()
    chars = config.retrieval.neighbour_context_chars
    source = EpisodeStore.open(src, model_id=old[0], dim=old[1], config=config.episodes,
                               clock=clock)
    try:
        target = EpisodeStore.open(dest, model_id=embedder.model_id, dim=embedder.dim,
                                   config=config.episodes, clock=clock)
        try:
            last: dict[str, str] = {}
            batch: list[Any] = []
            count = 0

            def flush() -> None:
                texts = []
                for episode in batch:  # as grimoire.methods.thread_context embeds a turn
                    previous = last.get(episode.thread) if episode.thread else None
                    texts.append(episode.text if not previous or chars <= 0
                                 else f"{episode.text}\n{previous[:chars]}")
                    if episode.thread:
                        last[episode.thread] = episode.text
                target.append(batch, embedder.embed(texts))
                batch.clear()

            for episode in source.scan():
                batch.append(episode)
                count += 1
                if len(batch) >= _BATCH:
                    flush()
            if batch:
                flush()
        finally:
            target.close()
    finally:
        source.close()
    return count


def reembed(data_dir: str | Path, out: str | Path, embedder: Embedder,
            config: Config) -> dict[str, Any]:
    """Write ``out``: ``data_dir`` with every vector from ``embedder`` (see module doc)."""
    started = time.perf_counter()
    root, dest = Path(data_dir), Path(out)
    for need in ("semantic.sqlite", "graph.lmdb", "episodes"):
        if not (root / need).exists():
            raise ValidationError(f"{root} is not a Grimoire data directory (no {need})",
                                  field="data")
    if dest.exists():
        raise ValidationError(f"{dest} already exists: choose a new directory", field="out")
    old = _recorded_model(root / "semantic.sqlite")
    if embedder.dim != old[1]:
        raise ValidationError(f"the store's vectors are {old[1]}-d and {embedder.model_id!r} "
                              f"gives {embedder.dim}-d: reembed keeps the dimension",
                              field="embedding.model")
    partial = dest.with_name(dest.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True, mode=0o700)
    try:
        episodes = _episodes(root / "episodes", partial / "episodes", old, embedder, config)
        _sqlite_backup(root / "semantic.sqlite", partial / "semantic.sqlite")
        entries = _entries(partial / "semantic.sqlite", embedder)
        _lmdb_backup(root / "graph.lmdb", partial / "graph.lmdb")
        if (root / "PLAYBOOK.md").exists():
            shutil.copy2(root / "PLAYBOOK.md", partial / "PLAYBOOK.md")
        os.replace(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {"out": str(dest), "from_model": old[0], "to_model": embedder.model_id,
            "episodes": episodes, "entries": entries,
            "seconds": round(time.perf_counter() - started, 3)}
