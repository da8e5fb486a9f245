"""The episode index persisted beside the table, so an open reads what changed (issue 29).

Without it every open read every LanceDB row (vectors, ids, metadata) and rebuilt the
in-memory index from them: 3.3 s at 10k rows, 6.3 s at 100k, and at 1M tens of seconds and
every row in memory. ``<dir>/episodes.index/`` holds the index itself, derived data that
can always be rebuilt from the table:

- ``<gen>.<array>``: each per-row array of the snapshot (``index.ARRAYS``: int8 codes,
  scales, the prefilter codes, timestamps, seqs) as a raw file of ``capacity`` rows, mapped
  with ``np.memmap``. The writer's index *lives* in these files (``Sidecar.allocate`` is the
  index's allocator): a grown file keeps its rows in place, so growing copies nothing. A
  query through the vector index reads its candidates' codes with ``pread`` instead
  (``read_rows``): touching a few rows of a mapping maps the page cache's whole folios
  around them (ext4's large folios), and 1,700 candidates of 1M rows made 347 of the 368
  MiB of codes resident after one query;
- ``rows-<start>-<count>.arrow``: the flushed rows without their vectors (the index's Arrow
  chunks), one Arrow IPC file per chunk, memory-mapped: zero-copy tables;
- ``<gen>.lookup-<rows>.npy``: the id lookup (sorted 64-bit ids hashes and positions);
- ``meta.json``: what the files cover: ``rows`` flushed rows, up to ``max_seq``, written at
  LanceDB version ``lance_version``, the model and dimension, the files, the strategy and
  tool names of the codes. Written last (temp file, fsync, rename), after every file it
  names is fsync'd: whatever it names is complete.

Open (``load``): read ``meta.json``; the table must hold exactly ``rows`` rows with seq <=
``max_seq`` plus those after it (the delta: appended since the save, read from LanceDB
with a ``seq > max_seq`` filter) and be at ``lance_version`` or later; else the sidecar
is stale (a forget rewrote the table, a backup was restored) and the caller rebuilds
everything from LanceDB into a new generation. A missing, unreadable or mismatched file
is the same: derived data, rebuilt, never trusted. The writer saves (``save``) on close and
every ``episodes.index_save_rows`` flushed rows, so the delta stays small.

Read-only opens map the files copy-on-write (``mode="c"``): rows added to their snapshot
(delta, journal) stay private to the process; the writer only ever writes rows past the
ones a reader's ``meta.json`` names, or a new generation's files.

Must not import the store, retrieval or the curator.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.ipc as ipc

from grimoire.logs import get_logger
from grimoire.stores.episodes.built import STATE_FILES
from grimoire.stores.episodes.index import (
    ARRAYS,
    MIN_CAPACITY,
    EpisodeIndex,
    IdLookup,
    Snapshot,
    allocate_in_memory,
)
from grimoire.stores.episodes.quantized import QuantizedRows
from grimoire.stores.episodes.text import TextIndex, TextSnapshot
from grimoire.stores.fsync import fsync_path

__all__ = ["INDEX_DIR", "Sidecar", "read_rows"]

log = get_logger(__name__)
INDEX_DIR = "episodes.index"
META = "meta.json"
FORMAT = 1


class Sidecar:
    """See the module docstring. ``allocate`` is the writer index's allocator."""

    def __init__(self, directory: Path, *, model_id: str, dim: int,
                 read_only: bool = False) -> None:
        self.root = Path(directory) / INDEX_DIR
        self.model_id = model_id
        self.dim = dim
        self.read_only = read_only
        self.gen = secrets.token_hex(4)  # a fresh generation unless ``load`` adopts one
        self.saved_rows = 0
        self._chunk_files: dict[tuple[int, int], str] = {}  # (start, rows) -> file name
        self._maps: dict[str, np.memmap[Any, Any]] = {}

    # ------------------------------------------------------------ arrays

    def _path(self, name: str) -> Path:
        return self.root / f"{self.gen}.{name}"

    def allocate(self, name: str, a: npt.NDArray[Any], capacity: int, keep: int
                 ) -> npt.NDArray[Any]:
        """The index's allocator (``index.Allocate``): ``name``'s file of this generation,
        grown to ``capacity`` rows (in place), holding the first ``keep`` rows of ``a``."""
        if self.read_only:
            return allocate_in_memory(name, a, capacity, keep)
        path = self._path(name)
        row_shape = a.shape[1:]
        row_bytes = int(np.prod(row_shape, dtype=np.int64)) * a.dtype.itemsize
        self.root.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as fh:
            if fh.tell() < capacity * row_bytes:
                fh.truncate(capacity * row_bytes)
        out: np.memmap[Any, Any] = np.memmap(path, dtype=a.dtype, mode="r+",
                                             shape=(capacity, *row_shape))
        if not (isinstance(a, np.memmap) and a.filename is not None
                and Path(a.filename) == path.resolve()):
            out[:keep] = a[:keep]
        self._maps[name] = out
        return out

    # ------------------------------------------------------------ save

    def save(self, index: EpisodeIndex, lance_version: int, text: TextIndex | None = None
             ) -> None:
        """Persist the index's flushed rows, and ``text``'s postings of them if given (the
        writer, under its lock)."""
        if self.read_only:
            return
        snap = index.snap
        rows = snap.flushed
        if rows == 0:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            m = self._maps.get(name)
            if m is None:  # still the in-memory initial arrays: move them to files
                index.snap = index._grown(index.snap, index.snap.n,
                                          capacity=max(MIN_CAPACITY, snap.codes.shape[0]))
                snap = index.snap
                break
        for name in ARRAYS:
            self._maps[name].flush()
            fsync_path(self._path(name))
        chunks = list(snap.chunks)
        files: dict[tuple[int, int], str] = {}
        for i, (chunk, start) in enumerate(zip(snap.chunks, snap.chunk_starts, strict=True)):
            key = (start, chunk.num_rows)
            found = self._chunk_files.get(key)
            if found is not None:
                name = found
            else:
                name = f"rows-{start}-{chunk.num_rows}-{secrets.token_hex(3)}.arrow"
                path = self.root / name
                with ipc.new_file(str(path), chunk.schema) as writer:
                    writer.write_table(chunk)
                fsync_path(path)
                chunks[i] = _mapped(path)
            files[key] = name
        index.replace_chunks(tuple(chunks))
        lookup_name = f"{self.gen}.lookup-{rows}.npy"
        np.save(self.root / lookup_name, _lookup_rows(index, rows), allow_pickle=False)
        fsync_path(self.root / lookup_name)
        text_files = None if text is None else self._save_text(text, rows)
        meta = {
            "text": text_files,
            "format": FORMAT, "model_id": self.model_id, "dim": self.dim, "gen": self.gen,
            "rows": rows, "max_seq": int(snap.seq[rows - 1]), "lance_version": lance_version,
            "capacity": int(snap.codes.shape[0]), "lookup": lookup_name,
            "chunks": [[start, count, name] for (start, count), name in files.items()],
            "names": index.names(),
        }
        tmp = self.root / f"{META}.tmp"
        tmp.write_text(json.dumps(meta))
        fsync_path(tmp)
        os.replace(tmp, self.root / META)
        fsync_path(self.root)
        self._chunk_files = files
        self.saved_rows = rows
        self._remove_unnamed(meta)

    def _remove_unnamed(self, meta: dict[str, Any]) -> None:
        keep = {META, *STATE_FILES, meta["lookup"], *(name for _, _, name in meta["chunks"]),
                *(meta["text"] or {}).values(),
                *(f"{meta['gen']}.{name}" for name in ARRAYS)}
        for path in self.root.iterdir():
            if path.name not in keep:
                path.unlink(missing_ok=True)

    def _save_text(self, text: TextIndex, rows: int) -> dict[str, str]:
        """The postings of rows < ``rows`` (base and delta merged, later rows left out)."""
        snap = text.snap
        terms = [np.repeat(np.arange(len(snap.starts) - 1, dtype=np.int64), np.diff(snap.starts))]
        docs, tfs = [snap.docs.astype(np.int64)], [snap.tfs]
        for term_id, tail in list(snap.delta.items()):
            terms.append(np.full(tail.count, term_id, dtype=np.int64))
            docs.append(tail.docs[: tail.count].astype(np.int64))
            tfs.append(tail.tfs[: tail.count])
        term, doc, tf = np.concatenate(terms), np.concatenate(docs), np.concatenate(tfs)
        keep = doc < rows
        term, doc, tf = term[keep], doc[keep], tf[keep]
        order = np.lexsort((doc, term))
        vocab = list(text.vocab)
        starts = np.searchsorted(term[order], np.arange(len(vocab) + 1)).astype(np.int64)
        tag = f"{self.gen}.text-{rows}"
        files = {"starts": f"{tag}.starts.npy", "docs": f"{tag}.docs.npy",
                 "tfs": f"{tag}.tfs.npy", "lengths": f"{tag}.lengths.npy",
                 "vocab": f"{tag}.vocab.json"}
        for key, array in (("starts", starts), ("docs", doc[order].astype(np.int32)),
                           ("tfs", tf[order].astype(np.float32)),
                           ("lengths", np.asarray(snap.lengths[:rows], np.float32))):
            np.save(self.root / files[key], array, allow_pickle=False)
        (self.root / files["vocab"]).write_text(json.dumps(vocab))
        for name in files.values():
            fsync_path(self.root / name)
        return files

    def load_text(self, meta: dict[str, Any]) -> TextIndex | None:
        """The saved postings (rows < ``meta["rows"]``), or None if none or unreadable."""
        files = meta.get("text")
        if not files:
            return None
        try:
            vocab = json.loads((self.root / files["vocab"]).read_text())
            arrays = {key: np.load(self.root / files[key], mmap_mode="r", allow_pickle=False)
                      for key in ("starts", "docs", "tfs", "lengths")}
            rows = int(meta["rows"])
            if (not isinstance(vocab, list) or arrays["starts"].shape != (len(vocab) + 1,)
                    or arrays["lengths"].shape != (rows,)
                    or int(arrays["starts"][-1]) != arrays["docs"].shape[0]):
                raise ValueError("the saved postings do not match their vocabulary or rows")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("episodes.index.text.corrupt", error=str(exc))
            return None
        text = TextIndex()
        text.vocab = {term: i for i, term in enumerate(vocab)}
        lengths = np.zeros(max(1024, rows + rows // 4), np.float32)
        lengths[:rows] = arrays["lengths"]
        text.snap = TextSnapshot(rows, arrays["starts"], arrays["docs"], arrays["tfs"], {},
                                 lengths)
        return text

    def release(self) -> None:
        """Hand the mapped rows' pages back (``MADV_DONTNEED``) after a pass that read every
        row (the vector index's recall check): they stay in the page cache, and are read
        again only if a query needs them. Nothing is lost: the mappings are shared."""
        for m in list(self._maps.values()):
            raw = getattr(m, "_mmap", None)  # numpy's mapping of the file
            if raw is not None and hasattr(raw, "madvise"):
                try:
                    raw.madvise(mmap.MADV_DONTNEED)
                except (OSError, ValueError) as exc:
                    log.debug("episodes.index.release.failed", error=str(exc))

    def drop(self) -> None:
        """Forget the saved index (a rewrite of the table made it stale); a new generation
        starts with the next ``allocate``."""
        if self.read_only:
            return
        try:
            (self.root / META).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("episodes.index.drop.failed", error=str(exc))
        self.gen = secrets.token_hex(4)
        self.saved_rows = 0
        self._chunk_files = {}
        self._maps = {}

    # ------------------------------------------------------------ load

    def read_meta(self) -> dict[str, Any] | None:
        """The saved index's description, or None if there is none or it is not ours."""
        try:
            meta: dict[str, Any] = json.loads((self.root / META).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("episodes.index.unreadable", error=str(exc))
            return None
        if (meta.get("format") != FORMAT or meta.get("model_id") != self.model_id
                or meta.get("dim") != self.dim or not isinstance(meta.get("rows"), int)):
            log.info("episodes.index.mismatch", directory=str(self.root))
            return None
        return meta

    def load(self, index: EpisodeIndex, meta: dict[str, Any]) -> bool:
        """Install the saved rows into the empty ``index``; False (index untouched) if a
        file is missing or does not match ``meta``."""
        try:
            snap, lookup = self._read(meta)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
            log.warning("episodes.index.corrupt", error=str(exc), directory=str(self.root))
            return False
        if not self.read_only:
            self.gen = meta["gen"]
            self._chunk_files = {(s, c): name for s, c, name in meta["chunks"]}
            self.saved_rows = meta["rows"]
        index.adopt(snap, lookup, meta["names"])
        return True

    def _read(self, meta: dict[str, Any]) -> tuple[Snapshot, IdLookup]:
        rows, capacity, gen = int(meta["rows"]), int(meta["capacity"]), str(meta["gen"])
        if not 0 < rows <= capacity:
            raise ValueError(f"rows {rows} / capacity {capacity}")
        shapes: dict[str, tuple[type[np.generic], tuple[int, ...]]] = {
            "codes": (np.int8, (self.dim,)), "scales": (np.float32, ()),
            "type_code": (np.int8, ()), "regime_code": (np.int8, ()),
            "strategy_code": (np.int32, ()), "tool_code": (np.int32, ()),
            "timestamp": (np.int64, ()), "seq": (np.int64, ())}
        arrays: dict[str, np.memmap[Any, Any]] = {}
        mode: Literal["c", "r+"] = "c" if self.read_only else "r+"
        for name in ARRAYS:
            dtype, row_shape = shapes[name]
            path = self.root / f"{gen}.{name}"
            row_bytes = int(np.prod(row_shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            if path.stat().st_size < capacity * row_bytes:
                raise ValueError(f"{path.name} is shorter than {capacity} rows")
            arrays[name] = np.memmap(path, dtype=dtype, mode=mode, shape=(capacity, *row_shape))
        if int(arrays["seq"][rows - 1]) != meta["max_seq"]:
            raise ValueError("the seq column does not end at max_seq")
        chunks, starts, at = [], [], 0
        for start, count, name in sorted(meta["chunks"]):
            if start != at:
                raise ValueError(f"row chunks leave a gap at {at}")
            table = _mapped(self.root / name)
            if table.num_rows != count:
                raise ValueError(f"{name} holds {table.num_rows} rows, not {count}")
            chunks.append(table)
            starts.append(start)
            at += count
        if at != rows:
            raise ValueError(f"row chunks hold {at} rows, not {rows}")
        pairs = np.load(self.root / meta["lookup"], mmap_mode="r", allow_pickle=False)
        if pairs.shape != (2, rows):
            raise ValueError("the id lookup does not cover the rows")
        if not self.read_only:
            self._maps = arrays
        snap = Snapshot(rows, arrays["codes"], arrays["scales"], arrays["type_code"],
                        arrays["regime_code"], arrays["strategy_code"], arrays["tool_code"],
                        arrays["timestamp"], arrays["seq"], tuple(chunks), tuple(starts),
                        rows, ())
        return snap, IdLookup(pairs[0], pairs[1], {})


def _mapped(path: Path) -> pa.Table:
    """An Arrow IPC file as a zero-copy table over a memory map."""
    return ipc.open_file(pa.memory_map(str(path), "r")).read_all()  # the map lives with it


def _lookup_rows(index: EpisodeIndex, rows: int) -> npt.NDArray[np.int64]:
    """(2 × rows): the id hashes of positions < ``rows``, sorted, over their positions."""
    lookup = index.lookup
    keep = lookup.order < rows
    hashes, order = lookup.hashes[keep], lookup.order[keep]
    recent = [(h, p) for h, p in ((_hash(id_), p) for id_, p in list(lookup.recent.items()))
              if p < rows]
    if recent:
        hashes = np.concatenate([hashes, np.array([h for h, _ in recent], np.int64)])
        order = np.concatenate([order, np.array([p for _, p in recent], np.int64)])
    by_hash = np.argsort(hashes, kind="stable")
    return np.stack([hashes[by_hash], order[by_hash]]).astype(np.int64)


def _hash(id_: str) -> int:
    from grimoire.stores.episodes import index as episodes_index

    return int(episodes_index._id_hash(id_))


def _file_of(codes: npt.NDArray[Any]) -> tuple[str, int] | None:
    """(path, byte offset of row 0) of a writable file mapping's rows; None otherwise (a
    read-only open's copy-on-write map holds private rows the file lacks)."""
    name, mode = getattr(codes, "filename", None), getattr(codes, "mode", None)
    if name is None or mode != "r+" or codes.ndim != 2 or codes.strides[1] != codes.itemsize:
        return None
    root = codes
    while isinstance(root.base, np.ndarray):  # views of the array numpy mapped
        root = root.base
    if not isinstance(root.base, mmap.mmap):
        return None
    return str(name), int(getattr(root, "offset", 0)) + (codes.ctypes.data - root.ctypes.data)


def read_rows(rows: QuantizedRows, positions: npt.NDArray[np.intp]) -> QuantizedRows:
    """``rows.take(positions)``, the codes read from their file with ``pread`` (~1 µs a
    row) rather than through the mapping, which leaves the rows out of the process's RSS
    (module docstring); falls back to the mapping for any other matrix."""
    codes = rows.codes
    where = _file_of(codes)
    if where is None or positions.size == 0:
        return rows.take(positions)
    name, start = where
    out = np.empty((positions.size, codes.shape[1]), dtype=codes.dtype)
    stride = codes.strides[0]
    try:
        fd = os.open(name, os.O_RDONLY)
    except OSError:
        return rows.take(positions)
    try:
        for i, pos in enumerate(positions.tolist()):
            if os.preadv(fd, [out[i]], start + pos * stride) != out[i].nbytes:
                return rows.take(positions)
    except OSError:
        return rows.take(positions)
    finally:
        os.close(fd)
    return QuantizedRows(out, np.asarray(rows.scales[positions], dtype=np.float32))
