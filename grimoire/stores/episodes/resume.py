"""Opening the episodic store from its saved index: read only what changed (issue 29).

``resume`` is ``recovery.recover``'s fast path, tried first by every open: it installs
the index saved beside the table (``sidecar``), then applies on top of it

1. the delta: LanceDB rows appended after the save (``seq > max_seq``), with their vectors
   (a read-only open of a table still at the saved version has none, and opens no LanceDB);
2. the journal rows LanceDB lacks (a crash before a flush): the writer appends them to
   LanceDB and fsyncs before releasing them, as ``recover`` does; a read-only open keeps
   them as buffered rows of its snapshot;

and builds the BM25 postings from the texts of the memory-mapped rows (unless the store
holds ``text_below`` rows or more: full-text search goes through LanceDB's own index past
its threshold, ``fts``). It returns None, having changed nothing on disk, when the saved index
is missing, stale (the table does not hold exactly its rows plus the delta, or is older
than it) or corrupt: the caller then rebuilds everything with ``recover``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from grimoire.logs import get_logger
from grimoire.stores.episodes.index import EpisodeIndex
from grimoire.stores.episodes.journal import Journal, JournalRow
from grimoire.stores.episodes.lance import LanceEpisodes
from grimoire.stores.episodes.recovery import Recovery, load_read_only, recover, retry_read
from grimoire.stores.episodes.schema import episodes_from_arrow, episodes_to_arrow
from grimoire.stores.episodes.sidecar import Sidecar
from grimoire.stores.episodes.text import TextIndex

__all__ = ["load_index", "resume", "save_index"]

log = get_logger(__name__)


def load_index(lance: LanceEpisodes, journal: Journal | None, pending: list[JournalRow],
               sidecar: Sidecar, dim: int, text_below: int = 0,
               ) -> tuple[EpisodeIndex, TextIndex | None, Recovery]:
    """The store's index and postings: from the saved index plus what changed (``resume``),
    else rebuilt from LanceDB (``recover``) and saved at once, so the next open is quick.
    From the saved index, postings only below ``text_below`` rows (0: always); None past it
    (LanceDB's FTS index answers, ``words``)."""
    index, text = EpisodeIndex(dim, allocate=sidecar.allocate), TextIndex()
    found = resume(lance, journal, pending, index, text, sidecar, text_below=text_below)
    if found is not None:
        return index, (text if text_below <= 0 or found.rows < text_below else None), found
    sidecar.drop()
    index, text = EpisodeIndex(dim, allocate=sidecar.allocate), TextIndex()
    if journal is None:
        return index, text, load_read_only(lance, pending, index, text)
    result = recover(lance, journal, index, text)
    save_index(sidecar, index, lance, text)
    return index, text, result


def save_index(sidecar: Sidecar, index: EpisodeIndex, lance: LanceEpisodes,
               text: TextIndex | None = None) -> None:
    """Persist the index and postings (``sidecar``); a failure costs the next open a rebuild."""
    if lance.table is None or sidecar.read_only:
        return
    try:
        sidecar.save(index, int(lance.table.version), text)
    except OSError as exc:
        log.warning("episodes.index.save.failed", error=str(exc))


def resume(lance: LanceEpisodes, journal: Journal | None, pending: list[JournalRow],
           index: EpisodeIndex, text: TextIndex, sidecar: Sidecar, *,
           text_below: int = 0) -> Recovery | None:
    """Fill the empty ``index`` (and ``text``) from the saved index plus what changed since;
    ``journal`` None for a read-only open (``pending``: its rows, read before LanceDB).
    None: nothing usable saved (``index`` may hold a partial state: discard it)."""
    meta = sidecar.read_meta()
    if meta is None:
        return None
    saved_at = int(meta["lance_version"])
    if journal is None and lance.version_on_disk() == saved_at:
        # A reader of a table still at the saved version: nothing after the save, and
        # LanceDB (a second to import) is not needed to know it.
        version, total, delta = saved_at, int(meta["rows"]), lance.schema.empty_table()
    else:
        # A reader retries: the writer's compaction may remove its version's files.
        max_seq = int(meta["max_seq"])
        version, total, delta = (lance.rows_after(max_seq) if journal is not None
                                 else retry_read(lambda: lance.rows_after(max_seq)))
    if version < saved_at or int(meta["rows"]) + delta.num_rows != total:
        log.info("episodes.index.stale", saved_rows=meta["rows"], delta=delta.num_rows,
                 table_rows=total, saved_version=meta["lance_version"], version=version)
        return None
    if delta.num_rows:
        delta = delta.take(pa.array(np.argsort(delta["seq"].to_numpy(), kind="stable")))
    if not sidecar.load(index, meta):
        return None
    if any(index.find(id_) is not None for id_ in delta["id"].to_pylist()):
        log.warning("episodes.index.stale", reason="a row after the save is in it")
        return None
    _add_flushed(index, delta)
    missing = [row for row in pending if index.find(row[1].id) is None]
    if missing:
        vectors = np.stack([vec for _, _, vec in missing]).astype(np.float32)
        seqs = [seq for seq, _, _ in missing]
        table = episodes_to_arrow([ep for _, ep, _ in missing], seqs, vectors, lance.schema)
        if journal is not None:
            lance.append(table)
            lance.sync()
            _add_flushed(index, table)
            log.info("episodes.replay", rows=len(missing), skipped=len(pending) - len(missing))
        else:
            index.add([ep for _, ep, _ in missing], seqs, vectors)
    if journal is not None and pending:
        journal.release(max(seq for seq, _, _ in pending))
    if text_below <= 0 or index.snap.n < text_below:
        _postings(text, sidecar.load_text(meta), index, int(meta["rows"]))
    snap = index.snap
    top = int(snap.seq[snap.n - 1]) if snap.n else -1
    if journal is not None:
        top = max(top, journal.max_seq())
    log.info("episodes.index.resumed", saved_rows=meta["rows"], delta=delta.num_rows,
             journal_rows=len(missing))
    return Recovery(rows=snap.n, replayed=len(missing), skipped=len(pending) - len(missing),
                    next_seq=top + 1)


def _postings(text: TextIndex, saved: TextIndex | None, index: EpisodeIndex,
              rows: int) -> None:
    """Fill the empty ``text``: the saved postings plus the rows after them, or all rows
    tokenized from the memory-mapped chunks when none were saved."""
    snap = index.snap
    if saved is not None:
        text.vocab, text.snap = saved.vocab, saved.snap
        first = rows
    else:
        parts = [c for chunk in snap.chunks for c in chunk.column("text").chunks]
        text.load(pa.chunked_array(parts, pa.string()))
        first = snap.flushed
    if first < snap.n:
        text.add(first, [ep.text for ep in index.episodes(snap, list(range(first, snap.n)))])


def _add_flushed(index: EpisodeIndex, table: pa.Table) -> None:
    """Rows that are in LanceDB (with vectors, in seq order) into ``index`` as flushed."""
    if table.num_rows == 0:
        return
    dim = index.dim
    vectors = (table["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
               .astype(np.float32, copy=False).reshape(table.num_rows, dim))
    rows = table.drop_columns(["vector"])
    index.add(episodes_from_arrow(rows), rows["seq"].to_pylist(), vectors)
    index.mark_flushed(table.num_rows, rows)
