"""LanceDB's own vector index over the episode table, for stores past a size (issue 29).

Below ``episodes.ann_threshold`` rows the store's exact int8 search (``EpisodeIndex.search``)
answers every vector query. Past it, :meth:`AnnIndex.refresh` (called off the write path:
the daemon's background thread, never the writer) builds an IVF-PQ index on the table's
``vector`` column with LanceDB's ``create_index`` (cosine), then measures recall@10 of the
indexed search against the exact one, midpoints of two stored rows as queries. The index
answers queries only while that recall is at least ``episodes.ann_min_recall``: the exact search
stays the check, and the fallback.

A query through the index asks LanceDB for ``k * ann_refine`` candidates (rows the index
has not covered yet are searched flat by LanceDB itself), maps their ``seq`` to positions,
adds the rows still buffered in memory, and rescores every candidate with the in-memory
int8 rows, so scores are the exact path's own. A filtered query always takes the exact path.

A LanceDB commit (index creation) beside the writer's appends is safe: Lance commits are
optimistic and an index build conflicts with neither an append nor a read; if it fails
(e.g. beside a compaction) the error is logged and the next refresh tries again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from grimoire.logs import get_logger
from grimoire.stores.episodes.built import restore, save_state
from grimoire.stores.episodes.index import EpisodeIndex, Snapshot
from grimoire.stores.episodes.quantized import F32

log = get_logger(__name__)

__all__ = ["AnnIndex", "AnnSettings"]

RECALL_K = 10
_TIE = 1e-6  # scores this close to the exact 10th count as ties
_LANCE_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)
# Exact top-k over positions (search function of the store's in-memory index).
ExactSearch = Callable[[F32, int], list[tuple[int, float]]]


@dataclass(frozen=True)
class AnnSettings:
    threshold: int  # rows before the index is built (0: never)
    nprobes: int
    refine: int  # candidates asked for per result, rescored in memory
    min_recall: float
    recall_queries: int
    refresh_fraction: float  # rebuild once this fraction of rows is newer than the index

    @classmethod
    def of(cls, config: Any) -> AnnSettings:
        """From ``EpisodesConfig``."""
        return cls(threshold=config.ann_threshold, nprobes=config.ann_nprobes,
                   refine=config.ann_refine, min_recall=config.ann_min_recall,
                   recall_queries=config.ann_recall_queries,
                   refresh_fraction=config.ann_refresh_fraction)


class AnnIndex:
    """The state of the table's vector index: rows covered, measured recall, whether used."""

    def __init__(self, settings: AnnSettings, state: Path | None = None,
                 table: Any = None) -> None:
        self.settings = settings
        self.indexed_rows = 0
        self.recall: float | None = None
        self.build_seconds: float | None = None
        self.error: str | None = None
        self._lock = threading.Lock()  # one refresh at a time
        self._state = state  # where the last build's measure is kept (``built``)
        saved = restore(state, table, "vector")
        if saved is not None:
            self.indexed_rows = int(saved["indexed_rows"])
            self.recall, self.build_seconds = saved.get("recall"), saved.get("build_seconds")

    @property
    def usable(self) -> bool:
        return (self.indexed_rows > 0 and self.recall is not None
                and self.recall >= self.settings.min_recall)

    def due(self, rows: int) -> bool:
        """Whether a refresh would build or rebuild the index at ``rows`` flushed rows."""
        s = self.settings
        if s.threshold <= 0 or rows < s.threshold:
            return False
        return rows - self.indexed_rows > s.refresh_fraction * max(self.indexed_rows, 1)

    def refresh(self, table: Any, rows: int, dim: int, exact: ExactSearch,
                indexed: ExactSearch, stored: Callable[[npt.NDArray[np.intp]], F32],
                ) -> dict[str, Any] | None:
        """Build the index if due and measure its recall (``indexed``: the store's search
        through the index, ``stored``: rows by position); None when not due or busy."""
        if table is None or not self.due(rows) or not self._lock.acquire(blocking=False):
            return None
        try:
            # Imported here: the store module is imported by every owner command, and LanceDB
            # (seconds) only when an index is built.
            from lancedb.index import IvfPq

            started = time.perf_counter()
            partitions = max(1, min(int(math.sqrt(rows)), rows // 256))
            sub = dim // 16 if dim % 16 == 0 else (dim // 8 if dim % 8 == 0 else 1)
            try:
                table.create_index("vector", replace=True,
                                   config=IvfPq(distance_type="cosine",
                                                num_partitions=partitions,
                                                num_sub_vectors=sub))
            except _LANCE_ERRORS as exc:
                self.error = str(exc)
                log.warning("episodes.ann.build.failed", error=str(exc), rows=rows)
                return None
            self.indexed_rows = rows
            self.build_seconds = round(time.perf_counter() - started, 3)
            self.recall = self._measure(rows, exact, indexed, stored)
            self.error = None
            save_state(self._state, {"indexed_rows": rows, "recall": self.recall,
                                     "build_seconds": self.build_seconds})
            out = {"rows": rows, "partitions": partitions, "sub_vectors": sub,
                   "seconds": self.build_seconds, "recall_at_10": self.recall,
                   "used": self.usable}
            log.info("episodes.ann.built", **out)
            return out
        finally:
            self._lock.release()

    def _measure(self, rows: int, exact: ExactSearch, indexed: ExactSearch,
                 stored: Callable[[npt.NDArray[np.intp]], F32]) -> float:
        """Recall@10 of the indexed search against the exact one, on midpoints of stored rows."""
        n = min(self.settings.recall_queries, rows)
        rng = np.random.default_rng(rows)
        # Each query is the midpoint of two stored rows: a stored row alone finds itself and
        # its near-duplicates in its own partition, which overstated recall (0.75 against
        # float32 for model queries where stored-row queries read 1.0, scripts/bench_scale.py).
        pairs = rng.integers(0, rows, size=(n, 2)).astype(np.intp)
        queries = stored(pairs[:, 0]) + stored(pairs[:, 1])
        queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        found = 0
        for q in queries:
            want = exact(q, RECALL_K)
            # A row scoring as high as the exact 10th is as good an answer (ties: identical
            # or near-identical texts); both sides are scored from the same in-memory rows.
            floor = want[-1][1] - _TIE if want else np.inf
            ids = {p for p, _ in want}
            got = indexed(q, RECALL_K)
            found += min(len(want), sum(1 for p, score in got if p in ids or score >= floor))
        return round(found / (RECALL_K * n), 4) if n else 1.0

    def search(self, table: Any, index: EpisodeIndex, snap: Snapshot, query: F32, k: int
               ) -> list[tuple[int, float]] | None:
        """Top-k through the table's vector index, rescored with the in-memory rows; the
        buffered rows are scored exactly. None if LanceDB failed (the caller searches
        exactly)."""
        if table is None:
            return None
        try:
            found = self.candidates(table, query, k, lambda seq: index.seq_to_pos(snap, seq))
        except _LANCE_ERRORS as exc:
            log.warning("episodes.ann.search.failed", error=str(exc))
            return None
        found.extend(range(snap.flushed, snap.n))
        if not found:
            return []
        positions = np.unique(np.asarray(found, dtype=np.intp))
        scores = snap.rows().take(positions) @ query
        order = np.lexsort((positions, -scores))[:k]  # score desc, then append order
        return [(int(positions[i]), float(scores[i])) for i in order]

    def candidates(self, table: Any, query: F32, k: int,
                   seq_to_pos: Callable[[int], int | None]) -> list[int]:
        """Positions of the indexed search's candidates (unscored: the caller rescores)."""
        limit = max(k, k * self.settings.refine)
        hits = (table.search(query.astype(np.float32), vector_column_name="vector")
                .distance_type("cosine").nprobes(self.settings.nprobes).limit(limit)
                .select(["seq", "_distance"]).to_arrow())
        out: list[int] = []
        for seq in hits.column("seq").to_pylist():
            pos = seq_to_pos(int(seq))
            if pos is not None:
                out.append(pos)
        return out

    def stats(self) -> dict[str, Any]:
        s = self.settings
        return {"threshold": s.threshold, "indexed_rows": self.indexed_rows,
                "recall_at_10": self.recall, "used": self.usable,
                "build_seconds": self.build_seconds, "min_recall": s.min_recall,
                "error": self.error}
