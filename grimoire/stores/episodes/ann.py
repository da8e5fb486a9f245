"""LanceDB's own vector index over the episode table, for stores past a size (issue 29).

Below ``episodes.ann_threshold`` rows the store's exact int8 search (``EpisodeIndex.search``)
answers every vector query. Past it, :meth:`AnnIndex.refresh` (called off the write path:
the daemon's background thread, never the writer) builds an IVF-PQ index on the table's
``vector`` column with LanceDB's ``create_index`` (cosine), then measures recall@10 of the
indexed search against the exact one, midpoints of two stored rows as queries. The index
answers queries only while that recall is at least ``episodes.ann_min_recall``: the exact search
stays the check, and the fallback.

A query through the index asks LanceDB for ``k * refine`` candidates (rows the index
has not covered yet are searched flat by LanceDB itself), maps their ``seq`` to positions,
adds the rows still buffered in memory, and rescores every candidate with the in-memory
int8 rows, so scores are the exact path's own. A filtered query always takes the exact path.
``refine`` is chosen by the recall check, not fixed: each check query asks for
``k * ann_max_refine`` candidates once; LanceDB returns them best first by its compressed
(PQ) distance, so the first ``k * r`` are what a query with ``refine = r`` gets, and the
recall at every ``r`` is read off the same lists. The smallest ``r`` whose recall reaches
``ann_min_recall`` is used (fewest rows fetched and rescored); none reaching it, the index
is not used. A larger store (coarser partitions, more near neighbours) gets a larger
``r`` from its own measure (1M model-like rows: 0.57 at ``r`` = 10).

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
from grimoire.stores.episodes.sidecar import read_rows

log = get_logger(__name__)

__all__ = ["AnnIndex", "AnnSettings"]

RECALL_K = 10
_TIE = 1e-6  # scores this close to the exact 10th count as ties
_LANCE_ERRORS = (OSError, ValueError, RuntimeError, pa.ArrowException)
_STATE_VERSION = 2  # ann.json without it measured a fixed refine: measure again


@dataclass(frozen=True)
class AnnSettings:
    threshold: int  # rows before the index is built (0: never)
    nprobes: int
    max_refine: int  # most candidates per result the recall check may choose
    min_recall: float
    recall_queries: int
    refresh_fraction: float  # rebuild once this fraction of rows is newer than the index

    @classmethod
    def of(cls, config: Any) -> AnnSettings:
        """From ``EpisodesConfig``."""
        return cls(threshold=config.ann_threshold, nprobes=config.ann_nprobes,
                   max_refine=config.ann_max_refine, min_recall=config.ann_min_recall,
                   recall_queries=config.ann_recall_queries,
                   refresh_fraction=config.ann_refresh_fraction)


class AnnIndex:
    """The state of the table's vector index: rows covered, measured recall, whether used."""

    def __init__(self, settings: AnnSettings, state: Path | None = None,
                 table: Any = None) -> None:
        self.settings = settings
        self.indexed_rows = 0
        self.recall: float | None = None
        self.refine = settings.max_refine  # candidates per result: the check's choice
        self.build_seconds: float | None = None
        self.error: str | None = None
        self._lock = threading.Lock()  # one refresh at a time
        self._state = state  # where the last build's measure is kept (``built``)
        saved = restore(state, table, "vector")
        if saved is not None and saved.get("version") == _STATE_VERSION:
            self.indexed_rows = int(saved["indexed_rows"])
            self.recall, self.build_seconds = saved.get("recall"), saved.get("build_seconds")
            self.refine = int(saved.get("refine") or settings.max_refine)

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

    def refresh(self, table: Any, index: EpisodeIndex, snap: Snapshot, dim: int,
                ) -> dict[str, Any] | None:
        """Build the index over ``snap``'s flushed rows if due, measure its recall against
        the exact search and choose ``refine``; None when not due or busy."""
        rows = snap.flushed
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
                self.build_seconds = round(time.perf_counter() - started, 3)
                self.recall, self.refine = self._measure(table, index, snap)
            except _LANCE_ERRORS as exc:
                self.error = str(exc)
                log.warning("episodes.ann.build.failed", error=str(exc), rows=rows)
                return None
            self.indexed_rows = rows
            self.error = None
            save_state(self._state, {"version": _STATE_VERSION, "indexed_rows": rows,
                                     "recall": self.recall, "refine": self.refine,
                                     "build_seconds": self.build_seconds})
            out = {"rows": rows, "partitions": partitions, "sub_vectors": sub,
                   "seconds": self.build_seconds, "recall_at_10": self.recall,
                   "refine": self.refine, "used": self.usable}
            log.info("episodes.ann.built", **out)
            return out
        finally:
            self._lock.release()

    def _measure(self, table: Any, index: EpisodeIndex, snap: Snapshot) -> tuple[float, int]:
        """(recall@10, refine): the smallest refine whose recall@10 against the exact search
        reaches ``min_recall`` and its recall, else the largest and its recall; queries are
        midpoints of stored rows."""
        rows, s = snap.flushed, self.settings
        n = min(s.recall_queries, rows)
        if n == 0:
            return 1.0, 1
        rng = np.random.default_rng(rows)
        # Each query is the midpoint of two stored rows: a stored row alone finds itself and
        # its near-duplicates in its own partition, which overstated recall (0.75 against
        # float32 for model queries where stored-row queries read 1.0, scripts/bench_scale.py).
        pairs = rng.integers(0, rows, size=(n, 2)).astype(np.intp)
        queries = snap.rows()[pairs[:, 0]] + snap.rows()[pairs[:, 1]]
        queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        refines = np.arange(1, s.max_refine + 1)
        found = np.zeros(refines.size, dtype=np.int64)  # hits at each refine, summed
        wanted = 0
        for q in queries:
            want = index.search(snap, q, RECALL_K, None)
            if not want:
                continue
            wanted += len(want)
            # A row scoring as high as the exact 10th is as good an answer (ties: identical
            # or near-identical texts); both sides are scored from the same in-memory rows.
            floor, ids = want[-1][1] - _TIE, {p for p, _ in want}
            got = self.candidates(table, q, RECALL_K * s.max_refine,
                                  lambda seqs: index.seqs_to_pos(snap, seqs))
            got = got[got < rows]  # a row flushed since the snapshot is counted as buffered
            scores = snap.rows().take(got) @ q if got.size else np.zeros(0, np.float32)
            good = np.array([p in ids or sc >= floor for p, sc in
                             zip(got.tolist(), scores.tolist(), strict=True)], dtype=np.int64)
            # Rescoring the first k*r candidates (and the buffered rows, searched as they
            # are) keeps every good one among them in the top k (a good row outscores
            # every other): hits at r = min(k, good rows among them).
            buffered = sum(1 for p, _ in want if p >= rows)
            cumulative = np.concatenate([[0], np.cumsum(good)]) + buffered
            found += np.minimum(len(want), cumulative[np.minimum(RECALL_K * refines, got.size)])
        if wanted == 0:
            return 1.0, 1
        recall = found / wanted
        passing = np.flatnonzero(recall >= s.min_recall)
        at = int(passing[0]) if passing.size else refines.size - 1
        return round(float(recall[at]), 4), int(refines[at])

    def search(self, table: Any, index: EpisodeIndex, snap: Snapshot, query: F32, k: int
               ) -> list[tuple[int, float]] | None:
        """Top-k through the table's vector index, rescored with the in-memory rows; the
        buffered rows are scored exactly. None if LanceDB failed (the caller searches
        exactly)."""
        if table is None:
            return None
        try:
            found = self.candidates(table, query, max(k, k * self.refine),
                                    lambda seqs: index.seqs_to_pos(snap, seqs))
        except _LANCE_ERRORS as exc:
            log.warning("episodes.ann.search.failed", error=str(exc))
            return None
        positions = np.unique(np.concatenate(
            [found, np.arange(snap.flushed, snap.n, dtype=np.intp)]))
        if positions.size == 0:
            return []
        scores = read_rows(snap.rows(), positions) @ query  # out of RSS: ``sidecar``
        order = np.lexsort((positions, -scores))[:k]  # score desc, then append order
        return [(int(positions[i]), float(scores[i])) for i in order]

    def candidates(self, table: Any, query: F32, limit: int,
                   seqs_to_pos: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.intp]],
                   ) -> npt.NDArray[np.intp]:
        """Positions of the indexed search's ``limit`` best candidates, best first by
        LanceDB's distance (unscored: the caller rescores)."""
        hits = (table.search(query.astype(np.float32), vector_column_name="vector")
                .distance_type("cosine").nprobes(self.settings.nprobes).limit(limit)
                .select(["seq", "_distance"]).to_arrow())
        seqs = hits.column("seq").to_numpy(zero_copy_only=False).astype(np.int64)
        return seqs_to_pos(seqs)

    def stats(self) -> dict[str, Any]:
        s = self.settings
        return {"threshold": s.threshold, "indexed_rows": self.indexed_rows,
                "recall_at_10": self.recall, "refine": self.refine, "used": self.usable,
                "build_seconds": self.build_seconds, "min_recall": s.min_recall,
                "error": self.error}
