"""An in-memory numpy copy of the vec0 entry vectors, for fast exact KNN.

vec0 stays the stored index (the source of truth, rebuilt into this cache on
open); this module only mirrors it so reads do not pay vec0's per-query scan
(1.8 ms at 2k rows, 16.8 ms at 20k, against 0.06 / 1.9 ms for numpy over the
same matrix, MEASUREMENTS.md; re-measured by scripts/bench_stores.py --part semantic).

Concurrency: one writer thread calls ``apply`` after each COMMIT; any number
of reader threads call ``knn``. Readers never see a half-applied change:
``apply`` builds a new immutable ``_Snapshot`` and publishes it with one
attribute assignment. The matrix buffer is append-only for every row an
existing snapshot can see (new and re-embedded rows go past its end, a
re-embedded row's old slot is marked dead), so snapshots share it without
copying; the small per-row arrays (status codes, liveness) are copied on
write. Must not touch SQLite except in ``load``.

Row stamps: each row also carries the entry's (id, version) as of the
snapshot (``semantic_mentions.version_of``; read with the rows in ``load``,
carried by each ``CacheOp`` after), so a reader that caches entry records
can tell they are current without a query per search (``knn_stamped``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt

from grimoire.stores.semantic.mentions import VERSION_COLUMNS
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["CacheOp", "Stamp", "VectorCache", "VectorMeta"]

_FIELDS = ("category", "status", "strategy", "regime")
_MIN_CAPACITY = 256
_MASK_CACHE = 32


@dataclass(frozen=True, slots=True)
class VectorMeta:
    """The filterable columns of one entry, as stored in vec0 ('' = global / no regime)."""

    category: str
    status: str
    strategy: str
    regime: str


Stamp = tuple[str, tuple[object, ...]]  # (entry id, semantic_mentions.version_of(entry))


@dataclass(frozen=True, slots=True)
class CacheOp:
    """A committed change to mirror: a new/changed vector and/or changed metadata.

    ``stamp``: the entry's (id, version) as committed; None leaves the row unstamped
    (a stamped search then reports it unknown and its caller asks SQLite)."""

    rid: int
    vector: npt.NDArray[np.float32] | None
    meta: VectorMeta
    stamp: Stamp | None = None


@dataclass(frozen=True)
class _Snapshot:
    matrix: npt.NDArray[np.float32]  # (n, dim), rows L2-normalised
    rids: npt.NDArray[np.int64]
    alive: npt.NDArray[np.bool_]
    codes: Mapping[str, npt.NDArray[np.int32]]  # field -> per-row code
    vocab: Mapping[str, Mapping[str, int]]  # field -> value -> code
    stamps: Sequence[Stamp | None]  # per row: (entry id, version), None when unknown
    max_rid: int  # the largest rid ever mirrored (0: none)
    masks: dict[tuple[Any, ...], npt.NDArray[np.bool_]] = field(default_factory=dict)


@functools.lru_cache(maxsize=256)  # filters are immutable; a search builds its key once
def _filter_key(filt: EntryFilter) -> tuple[Any, ...]:
    strategies = None if filt.strategies is None else tuple(s or "" for s in filt.strategies)
    regimes = None if filt.regimes is None else tuple(r.value if r else "" for r in filt.regimes)
    categories = None if filt.categories is None else tuple(c.value for c in filt.categories)
    statuses = tuple(s.value for s in filt.effective_statuses)
    return (categories, statuses, strategies, regimes)


class VectorCache:
    """Exact cosine KNN over every entry vector, with the same filters as vec0."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._buf = np.zeros((_MIN_CAPACITY, dim), dtype=np.float32)
        self._n = 0
        self._slot: dict[int, int] = {}
        self._vocab: dict[str, dict[str, int]] = {name: {} for name in _FIELDS}
        self._snap = self._publish(
            np.zeros(0, np.int64), np.zeros(0, np.bool_),
            {name: np.zeros(0, np.int32) for name in _FIELDS}, [],
        )

    @classmethod
    def load(cls, conn: apsw.Connection, dim: int) -> VectorCache:
        """Build the cache from the vec0 table ``entry_vectors`` (the stored index).

        Built in bulk (one matrix from the concatenated blobs, codes by list
        comprehension) rather than through ``apply``: 20k rows load in a few
        tens of ms after vec0's own scan.
        """
        cache = cls(dim)
        # Vectors from vec0; the filter columns from grimoire_entries, whose trigger keeps
        # vec0's copies equal (reading them through vec0 doubles the load time).
        vectors: list[Any] = conn.execute("SELECT rid, embedding FROM entry_vectors").fetchall()
        meta = {
            r[0]: r for r in conn.execute(
                "SELECT rid, category, status, coalesce(strategy, ''), "
                f"coalesce(market_regime, ''), id, {', '.join(VERSION_COLUMNS)} "
                "FROM grimoire_entries")
        }
        rows = [(rid, blob, *meta[rid][1:5]) for rid, blob in vectors]
        stamps: list[Stamp | None] = [(str(meta[rid][5]), tuple(meta[rid][6:]))
                                      for rid, _ in vectors]
        n = len(rows)
        if n == 0:
            return cache
        cap = max(_MIN_CAPACITY, 2 * n)
        cache._buf = np.zeros((cap, dim), dtype=np.float32)
        cache._buf[:n] = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(n, dim)
        cache._n = n
        rids = np.zeros(cap, np.int64)
        rids[:n] = [r[0] for r in rows]
        alive = np.zeros(cap, np.bool_)
        alive[:n] = True
        codes: dict[str, npt.NDArray[np.int32]] = {}
        for column, name in enumerate(_FIELDS, start=2):
            vocab: dict[str, int] = {}
            arr = np.zeros(cap, np.int32)
            arr[:n] = [vocab.setdefault(r[column], len(vocab)) for r in rows]
            cache._vocab[name] = vocab
            codes[name] = arr
        cache._slot = {int(rid): i for i, rid in enumerate(rids[:n])}
        cache._snap = cache._publish(rids, alive, codes, stamps)
        return cache

    def __len__(self) -> int:
        snap = self._snap
        return int(snap.alive.sum())

    def _code(self, name: str, value: str) -> int:
        vocab = self._vocab[name]
        code = vocab.get(value)
        if code is None:
            code = len(vocab)
            # Copy, so a reader holding the previous snapshot's vocab never sees it change.
            self._vocab[name] = {**vocab, value: code}
        return code

    def _publish(
        self,
        rids: npt.NDArray[np.int64],
        alive: npt.NDArray[np.bool_],
        codes: dict[str, npt.NDArray[np.int32]],
        stamps: Sequence[Stamp | None],
    ) -> _Snapshot:
        n = self._n
        return _Snapshot(
            matrix=self._buf[:n], rids=rids[:n], alive=alive[:n],
            codes={name: arr[:n] for name, arr in codes.items()}, vocab=dict(self._vocab),
            stamps=stamps, max_rid=int(rids[:n].max()) if n else 0,
        )

    def apply(self, ops: Iterable[CacheOp]) -> None:
        """Mirror committed changes (writer thread only) and publish a new snapshot."""
        snap = self._snap
        n = self._n
        cap = self._buf.shape[0]
        rids = np.zeros(cap, np.int64)
        alive = np.zeros(cap, np.bool_)
        codes = {name: np.zeros(cap, np.int32) for name in _FIELDS}
        rids[:n], alive[:n] = snap.rids, snap.alive
        for name in _FIELDS:
            codes[name][:n] = snap.codes[name]
        stamps = list(snap.stamps)  # copied: readers of ``snap`` keep theirs
        for op in ops:
            slot = self._slot.get(op.rid)
            if op.vector is not None:
                if slot is not None:
                    alive[slot] = False
                if n == self._buf.shape[0]:
                    self._grow(2 * n)
                    rids, alive = _resize(rids, n * 2), _resize(alive, n * 2)
                    codes = {k: _resize(v, n * 2) for k, v in codes.items()}
                self._buf[n] = op.vector
                rids[n], alive[n] = op.rid, True
                slot = self._slot[op.rid] = n
                stamps.append(None)
                n += 1
                self._n = n
            if slot is None:
                continue  # metadata of a row that has no vector (cannot happen via the store)
            for name in _FIELDS:
                codes[name][slot] = self._code(name, getattr(op.meta, name))
            stamps[slot] = op.stamp
        dead = n - int(alive[:n].sum())
        if dead > max(64, n // 4):
            rids, alive, codes, stamps = self._compact(rids, alive, codes, stamps)
        self._snap = self._publish(rids, alive, codes, stamps)

    def _grow(self, capacity: int) -> None:
        # A new buffer: snapshots already published keep (and keep reading) the old one.
        buf = np.zeros((max(capacity, _MIN_CAPACITY), self.dim), dtype=np.float32)
        buf[: self._n] = self._buf[: self._n]
        self._buf = buf

    def _compact(
        self,
        rids: npt.NDArray[np.int64],
        alive: npt.NDArray[np.bool_],
        codes: dict[str, npt.NDArray[np.int32]],
        stamps: list[Stamp | None],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], dict[str, npt.NDArray[np.int32]],
               list[Stamp | None]]:
        keep = np.flatnonzero(alive[: self._n])
        cap = max(_MIN_CAPACITY, 2 * len(keep))
        buf = np.zeros((cap, self.dim), dtype=np.float32)
        buf[: len(keep)] = self._buf[keep]
        self._buf, self._n = buf, len(keep)
        self._slot = {int(rid): i for i, rid in enumerate(rids[keep])}
        new_alive = np.zeros(cap, np.bool_)
        new_alive[: len(keep)] = True
        return (
            _resize(rids[keep], cap),
            new_alive,
            {name: _resize(arr[keep], cap) for name, arr in codes.items()},
            [stamps[i] for i in keep.tolist()],
        )

    def _mask(self, snap: _Snapshot, filt: EntryFilter) -> npt.NDArray[np.bool_]:
        key = _filter_key(filt)
        mask = snap.masks.get(key)
        if mask is not None:
            return mask
        mask = snap.alive.copy()
        for name, wanted in zip(_FIELDS, key, strict=True):
            if wanted is None:
                continue
            vocab = snap.vocab[name]
            wanted_codes = [vocab[v] for v in wanted if v in vocab]
            mask &= np.isin(snap.codes[name], wanted_codes)
        if len(snap.masks) < _MASK_CACHE:
            snap.masks[key] = mask  # the snapshot is immutable, so the mask stays right
        return mask

    def knn(
        self, query: npt.NDArray[np.float32], k: int, filt: EntryFilter
    ) -> list[tuple[int, float]]:
        """(rid, cosine similarity) of the ``k`` nearest live rows passing ``filt``, best first.

        ``query`` must be L2-normalised (the stored rows are).
        """
        snap = self._snap
        return [(int(snap.rids[i]), sim) for i, sim in self._top(snap, query, k, filt)]

    def knn_stamped(
        self, query: npt.NDArray[np.float32], k: int, filt: EntryFilter
    ) -> list[tuple[int, float, Stamp | None]]:
        """``knn`` with each row's stamp (entry id, version) from the same snapshot."""
        snap = self._snap
        return [(int(snap.rids[i]), sim, snap.stamps[i])
                for i, sim in self._top(snap, query, k, filt)]

    def _top(
        self, snap: _Snapshot, query: npt.NDArray[np.float32], k: int, filt: EntryFilter
    ) -> list[tuple[int, float]]:
        """(slot, similarity) of the ``k`` best live rows of ``snap`` passing ``filt``."""
        mask = self._mask(snap, filt)
        eligible = int(mask.sum())
        if eligible == 0 or k <= 0:
            return []
        # ``@`` (OpenBLAS sgemv): 2.5x faster than einsum's own loop at 2k rows (0.045 vs
        # 0.114 ms). OpenBLAS's spinning worker threads once starved the process here;
        # the daemon runs with OPENBLAS_NUM_THREADS=1 (``cli.app``), as the episode
        # search's ``@`` over its own matrix already does.
        sims = snap.matrix @ query
        sims = np.where(mask, sims, -np.inf)
        take = min(k, eligible)
        top = np.argpartition(-sims, take - 1)[:take] if take < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")][:take]
        return [(i, float(sims[i])) for i in top.tolist()]

    def max_rid(self) -> int:
        """The largest row id mirrored (0 when empty): SQLite's max(rid) as of the last
        commit, since every entry row has a vector and rows are never deleted."""
        return self._snap.max_rid

    def rids(self) -> Sequence[int]:
        """Live row ids (for tests and consistency checks)."""
        snap = self._snap
        return [int(r) for r in snap.rids[snap.alive]]


def _resize(arr: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    out = np.zeros(size, dtype=arr.dtype)
    out[: min(size, len(arr))] = arr[:size]
    return out
