"""LanceDB's own full-text index over the episode texts, for stores past a size (issue 29).

Below ``episodes.fts_threshold`` rows the store's in-memory BM25 (``text.TextIndex``)
answers every text query. Past it, :meth:`FtsIndex.refresh` (off the write path: the
daemon's background thread, beside the vector index) builds LanceDB's native FTS index on
the ``text`` column (``create_index`` with ``FTS``, native, not tantivy; lower-cased words, English
stemming, no stop words, the closest to our tokenizer and S-stemmer), then measures its
agreement with our BM25: overlap@10 on ``fts_overlap_queries`` queries of two to four words
of stored texts. It answers queries while that overlap is at least ``fts_min_overlap``;
our BM25 stays the check (built for the measure on the background thread when the store
did not load it) and the fallback.

With the index in use the store's open no longer tokenizes every text (the postings are
built on first need only: a filter LanceDB cannot express, or the index not usable). A
row is found by text once flushed to LanceDB (``episodes.flush_ms``); rows LanceDB's index
has not covered yet are searched flat by LanceDB itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from grimoire.logs import get_logger
from grimoire.records import EpisodeType, Regime
from grimoire.stores.episodes.built import restore, save_state
from grimoire.stores.episodes.index import EpisodeFilter

log = get_logger(__name__)

__all__ = ["FtsIndex", "FtsSettings", "lance_where"]

OVERLAP_K = 10
_TIE = 1e-6
_LANCE_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)
# (query, k) -> [(position, score)], best first.
TextSearch = Callable[[str, int], list[tuple[int, float]]]
# (query, positions) -> our BM25 of each position.
TextScore = Callable[[str, list[int]], list[float]]
_STATE_VERSION = 2  # fts.json without it scored LanceDB's hits by our top 200 only


@dataclass(frozen=True)
class FtsSettings:
    threshold: int  # rows before the index is built (0: never)
    min_overlap: float
    overlap_queries: int
    refresh_fraction: float

    @classmethod
    def of(cls, config: Any) -> FtsSettings:
        """From ``EpisodesConfig`` (queries and refresh as the vector index's)."""
        return cls(threshold=config.fts_threshold, min_overlap=config.fts_min_overlap,
                   overlap_queries=config.ann_recall_queries,
                   refresh_fraction=config.ann_refresh_fraction)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def lance_where(flt: EpisodeFilter | None) -> str | None:
    """The filter as a LanceDB SQL predicate over the table's columns (None: no filter)."""
    if flt is None:
        return None
    parts = []
    if flt.types is not None:
        values = ", ".join(_quote(EpisodeType(t).value) for t in flt.types)
        parts.append(f"type IN ({values})" if values else "false")
    if flt.regime is not None:
        parts.append(f"regime = {_quote(Regime(flt.regime).value)}")
    for name in ("strategy", "tool"):
        value = getattr(flt, name)
        if value is not None:
            parts.append(f"{name} = {_quote(value)}")
    if flt.since_ms is not None:
        parts.append(f"timestamp >= {int(flt.since_ms)}")
    if flt.until_ms is not None:
        parts.append(f"timestamp < {int(flt.until_ms)}")
    return " AND ".join(parts) if parts else None


class FtsIndex:
    """The state of the table's FTS index: rows covered, measured overlap, whether used."""

    def __init__(self, settings: FtsSettings, state: Path | None = None,
                 table: Any = None) -> None:
        self.settings = settings
        self.indexed_rows = 0
        self.overlap: float | None = None
        self.build_seconds: float | None = None
        self.error: str | None = None
        self._lock = threading.Lock()
        self._state = state  # where the last build's measure is kept (``built``)
        saved = restore(state, table, "text")
        if saved is not None and saved.get("version") == _STATE_VERSION:
            self.indexed_rows = int(saved["indexed_rows"])
            self.overlap, self.build_seconds = saved.get("overlap"), saved.get("build_seconds")

    def wanted(self, rows: int) -> bool:
        """Whether a store of ``rows`` rows is past the threshold."""
        return 0 < self.settings.threshold <= rows

    @property
    def usable(self) -> bool:
        return (self.indexed_rows > 0 and self.overlap is not None
                and self.overlap >= self.settings.min_overlap)

    def due(self, rows: int) -> bool:
        if not self.wanted(rows):
            return False
        return rows - self.indexed_rows > self.settings.refresh_fraction * max(
            self.indexed_rows, 1)

    def refresh(self, table: Any, rows: int, texts: Callable[[list[int]], list[str]],
                ours: Callable[[], tuple[TextSearch, TextScore]],
                seq_to_pos: Callable[[int], int | None],
                ) -> dict[str, Any] | None:
        """Build the index if due and measure its overlap with ``ours()`` (our BM25's search
        and scoring);
        ``texts``: stored texts by position. None when not due or busy."""
        if table is None or not self.due(rows) or not self._lock.acquire(blocking=False):
            return None
        try:
            started = time.perf_counter()
            try:
                from lancedb.index import FTS  # imported when an index is built (as ann)

                table.create_index("text", replace=True, config=FTS(
                    base_tokenizer="simple", lower_case=True, stem=True,
                    remove_stop_words=False, ascii_folding=False, with_position=False))
            except _LANCE_ERRORS as exc:
                self.error = str(exc)
                log.warning("episodes.fts.build.failed", error=str(exc), rows=rows)
                return None
            self.build_seconds = round(time.perf_counter() - started, 3)
            self.overlap = self._measure(table, rows, texts, *ours(), seq_to_pos)
            self.indexed_rows = rows
            self.error = None
            save_state(self._state, {"version": _STATE_VERSION, "indexed_rows": rows,
                                     "overlap": self.overlap,
                                     "build_seconds": self.build_seconds})
            out = {"rows": rows, "seconds": self.build_seconds,
                   "overlap_at_10": self.overlap, "used": self.usable}
            log.info("episodes.fts.built", **out)
            return out
        finally:
            self._lock.release()

    def _measure(self, table: Any, rows: int, texts: Callable[[list[int]], list[str]],
                 ours: TextSearch, score: TextScore,
                 seq_to_pos: Callable[[int], int | None]) -> float:
        """Overlap@10 of LanceDB's FTS with our BM25, on word runs of stored texts."""
        n = min(self.settings.overlap_queries, rows)
        rng = np.random.default_rng(rows)
        found = wanted = 0
        for text in texts(rng.integers(0, rows, size=n).tolist()):
            words = text.split()
            if not words:
                continue
            size = int(rng.integers(2, 5))
            start = int(rng.integers(0, max(1, len(words) - size + 1)))
            query = " ".join(words[start:start + size])
            want = ours(query, OVERLAP_K)
            if not want:
                continue
            # Tie-aware, as the vector recall: a row our BM25 scores as high as its own 10th
            # is as good an answer (near-identical texts tie; either order is right). Each
            # of LanceDB's hits is scored by our BM25 itself: a short query's tie at our 10th
            # can hold thousands of rows at 1M, and a hit outside the top we asked for was
            # counted a miss (overlap 0.41 at 1M where scoring the hits reads higher).
            floor = want[-1][1] * (1 - _TIE)
            got = [p for p, _ in self.search(table, query, OVERLAP_K, None, seq_to_pos)]
            found += min(len(want), sum(1 for s in score(query, got) if s >= floor))
            wanted += len(want)
        return round(found / wanted, 4) if wanted else 1.0

    def search(self, table: Any, query: str, k: int, where: str | None,
               seq_to_pos: Callable[[int], int | None]) -> list[tuple[int, float]]:
        """Top-k (position, LanceDB's BM25 score), best first. Raises LanceDB's errors."""
        if not query.strip() or k <= 0:
            return []
        search = table.search(query, query_type="fts")
        if where is not None:
            search = search.where(where, prefilter=True)
        hits = search.select(["seq", "_score"]).limit(k).to_arrow()
        out = []
        for seq, score in zip(hits.column("seq").to_pylist(),
                              hits.column("_score").to_pylist(), strict=True):
            pos = seq_to_pos(int(seq))
            if pos is not None:
                out.append((pos, float(score)))
        return out

    def stats(self) -> dict[str, Any]:
        s = self.settings
        return {"threshold": s.threshold, "indexed_rows": self.indexed_rows,
                "overlap_at_10": self.overlap, "used": self.usable,
                "build_seconds": self.build_seconds, "min_overlap": s.min_overlap,
                "error": self.error}
