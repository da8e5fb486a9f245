"""Opening the episodic store: replay the journal into LanceDB and rebuild the index.

Owns the recovery procedure run once by ``EpisodeStore.open``:

1. read every LanceDB row without its vector (``LanceEpisodes.read_rows``), order by
   ``seq``, drop repeated ids (first wins); the vectors are read last, a batch at a
   time (``vector_batches``), each quantised into its row's place (step 4);
2. take the journal rows whose id LanceDB lacks (a crash before or during a
   flush) and write them in one ``add()``, fsync; rows LanceDB already has (a
   crash after the add, before the journal cleanup: a "torn" flush) are
   skipped, so replay is idempotent;
3. drop the journal rows (everything is durable in LanceDB now);
4. fill the in-memory vector index and build the BM25 text index.

It must not be called on a store that is in use (open holds the store's lock).

``load_read_only`` is the read-only open's version: steps 1, 2 and 4 in
memory (LanceDB's rows plus the journal rows LanceDB lacks), nothing written,
nothing released; the writer, if one runs, keeps its journal as it was.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from grimoire.errors import StoreError
from grimoire.logs import get_logger
from grimoire.stores.episodes.index import EpisodeIndex
from grimoire.stores.episodes.journal import Journal, JournalRow
from grimoire.stores.episodes.lance import LanceEpisodes
from grimoire.stores.episodes.schema import episodes_to_arrow
from grimoire.stores.episodes.text import TextIndex

__all__ = ["Recovery", "load_read_only", "recover", "retry_read"]

T = TypeVar("T")

log = get_logger(__name__)


@dataclass(frozen=True)
class Recovery:
    rows: int
    replayed: int
    skipped: int
    next_seq: int


def _ordered_unique(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return table
    seqs = table["seq"].to_numpy()
    if not (np.diff(seqs) > 0).all():
        table = table.take(pa.array(np.argsort(seqs, kind="stable")))
    # Counted in Arrow: a set of 100k id strings freed here left the daemon's heap
    # fragmented (the index and BM25 objects built next land between them).
    if pc.count_distinct(table["id"]).as_py() != table.num_rows:
        ids = table["id"].to_pylist()
        seen: set[str] = set()
        keep = []
        for i, id_ in enumerate(ids):
            if id_ not in seen:
                seen.add(id_)
                keep.append(i)
        log.warning("episodes.open.duplicates", dropped=len(ids) - len(keep))
        table = table.take(pa.array(keep, pa.int64()))
    return table


def _missing(stored: pa.Table, pending: list[JournalRow]) -> list[JournalRow]:
    """The journal rows whose id is not in ``stored`` (matched in Arrow, no id set)."""
    if not pending:
        return []
    found = pc.is_in(pa.array([ep.id for _, ep, _ in pending], pa.string()),
                     value_set=stored["id"].combine_chunks()).to_pylist()
    return [row for row, there in zip(pending, found, strict=True) if not there]


def _with_rows(stored: pa.Table, rows: list[JournalRow], schema: pa.Schema
               ) -> tuple[pa.Table, pa.Table, npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """``stored`` (rows without vectors) plus journal ``rows``, ordered and unique; also the
    journal rows as a full table (with vectors), their seqs and their vectors."""
    vectors = np.stack([vec for _, _, vec in rows]).astype(np.float32)
    seqs = np.asarray([seq for seq, _, _ in rows], dtype=np.int64)
    table = episodes_to_arrow([ep for _, ep, _ in rows], seqs.tolist(), vectors, schema)
    merged = _ordered_unique(pa.concat_tables([stored, table.select(stored.column_names)]))
    return merged, table, seqs, vectors


def recover(lance: LanceEpisodes, journal: Journal, index: EpisodeIndex,
            text: TextIndex) -> Recovery:
    stored = _ordered_unique(lance.read_rows())
    pending = journal.pending()
    replay = _missing(stored, pending)
    if replay:
        stored, table, _, _ = _with_rows(stored, replay, lance.schema)
        lance.append(table)
        lance.sync()
        log.info("episodes.replay", rows=len(replay), skipped=len(pending) - len(replay))
    if pending:
        journal.release(max(seq for seq, _, _ in pending))
    index.load(stored, lance.vector_batches())  # the replayed rows are in LanceDB now
    text.load(stored["text"])
    top = int(stored["seq"].to_numpy().max()) if stored.num_rows else -1
    return Recovery(rows=stored.num_rows, replayed=len(replay),
                    skipped=len(pending) - len(replay), next_seq=max(top, journal.max_seq()) + 1)


def load_read_only(lance: LanceEpisodes, pending: list[JournalRow], index: EpisodeIndex,
                   text: TextIndex, attempts: int = 5) -> Recovery:
    """Fill ``index`` and ``text`` from LanceDB plus the ``pending`` journal rows it lacks.

    ``pending`` must have been read before LanceDB is (the caller's order): a row the
    writer released from its journal in between is in LanceDB by then, so every row
    acknowledged before the journal was read is in the result. LanceDB is read at one
    version (rows, then vectors); if the writer's compaction removed that version's files
    during the read, the whole read is retried on the then-latest version.
    """
    return retry_read(lambda: _load_read_only(lance, pending, index, text), attempts)


def retry_read(read: Callable[[], T], attempts: int = 5) -> T:
    """``read()``, again on the then-latest version while it raises StoreError (a reader's
    version whose files the writer's compaction removed under it), ``attempts`` times."""
    for attempt in range(attempts):
        try:
            return read()
        except StoreError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _load_read_only(lance: LanceEpisodes, pending: list[JournalRow], index: EpisodeIndex,
                    text: TextIndex) -> Recovery:
    stored = _ordered_unique(lance.read_rows())
    extra = _missing(stored, pending)
    batches: Iterable[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = \
        lance.vector_batches()
    if extra:
        stored, _, seqs, vectors = _with_rows(stored, extra, lance.schema)
        batches = itertools.chain(batches, [(seqs, vectors)])
    index.load(stored, batches)
    text.load(stored["text"])
    top = int(stored["seq"].to_numpy().max()) if stored.num_rows else -1
    return Recovery(rows=stored.num_rows, replayed=len(extra),
                    skipped=len(pending) - len(extra), next_seq=top + 1)
