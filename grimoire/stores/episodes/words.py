"""Full-text search over the episodes: which index answers a query (issue 29).

Owns ``Words``: the in-memory BM25 postings (``text.TextIndex``; None until first needed
when the open skipped them, past ``episodes.fts_threshold``) and LanceDB's FTS index
(``fts.FtsIndex``). A query goes to LanceDB's index while it is usable and its filter can
be said in LanceDB SQL (``fts.lance_where``: always, for ``EpisodeFilter``); else to the
postings, built from the snapshot's memory-mapped rows on first need (under the store's
write lock, so no append slips between the snapshot and the postings).

Must not do I/O but through LanceDB's table; must not import the store.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from grimoire.logs import get_logger
from grimoire.stores.episodes.fts import _LANCE_ERRORS, FtsIndex, FtsSettings, lance_where
from grimoire.stores.episodes.index import EpisodeFilter, EpisodeIndex, Snapshot
from grimoire.stores.episodes.text import TextIndex

__all__ = ["Words", "postings_of"]

log = get_logger(__name__)


def postings_of(snap: Snapshot) -> TextIndex:
    """BM25 postings of every row of ``snap`` (flushed rows from its Arrow chunks)."""
    text = TextIndex()
    parts = [c for chunk in snap.chunks for c in chunk.column("text").chunks]
    if parts:
        text.load(pa.chunked_array(parts, pa.string()))
    text.add(snap.flushed, [ep.text for ep in snap.pending[: snap.n - snap.flushed]])
    return text


class Words:
    """See the module docstring."""

    def __init__(self, settings: FtsSettings, text: TextIndex | None,
                 write_lock: threading.RLock, state: Path | None = None,
                 table: Any = None) -> None:
        self.text = text
        self.fts = FtsIndex(settings, state, table)
        self._write_lock = write_lock

    def add(self, first: int, texts: list[str]) -> None:
        """The writer's new rows (before they are published)."""
        if self.text is not None:
            self.text.add(first, texts)

    def _postings(self, index: EpisodeIndex) -> TextIndex:
        text = self.text
        if text is None:
            with self._write_lock:
                if self.text is None:
                    self.text = postings_of(index.snap)
                    log.info("episodes.text.loaded", rows=index.snap.n)
                text = self.text
        return text

    def search(self, table: Any, index: EpisodeIndex, snap: Snapshot, query: str, k: int,
               filters: EpisodeFilter | None) -> list[tuple[int, float]]:
        """Top-k (position, score) over rows below ``snap.n``, best first."""
        if self.fts.usable and table is not None:
            try:
                return self.fts.search(table, query, k, lance_where(filters),
                                       lambda seq: index.seq_to_pos(snap, seq))
            except _LANCE_ERRORS as exc:
                log.warning("episodes.fts.search.failed", error=str(exc))
        text = self._postings(index)
        return text.search(snap.n, query, k, index.mask(snap, filters))

    def refresh(self, table: Any, index: EpisodeIndex) -> dict[str, Any] | None:
        """Build LanceDB's FTS index if due and measure it against our BM25 (built apart,
        and dropped after, when the store has not loaded its own)."""
        snap = index.snap
        if not self.fts.due(snap.flushed):
            return None
        mine = self.text

        def ours() -> Any:
            text = mine if mine is not None else postings_of(snap)
            return (lambda q, k: text.search(snap.n, q, k, None),
                    lambda q, positions: text.score(snap.n, q, positions))

        def texts(positions: list[int]) -> list[str]:
            return [ep.text for ep in index.episodes(snap, positions)]

        return self.fts.refresh(table, snap.flushed, texts, ours,
                                lambda seq: index.seq_to_pos(snap, seq))

    def saved(self, rows: int) -> TextIndex | None:
        """The postings to save with an index of ``rows`` rows: none past the threshold (an
        open there builds none, and each save rewrites every posting)."""
        return None if self.fts.wanted(rows) else self.text

    @property
    def nbytes(self) -> int:
        return 0 if self.text is None else self.text.nbytes
