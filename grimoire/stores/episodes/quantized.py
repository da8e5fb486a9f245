"""The episode vectors held in memory as int8: ``quantize`` and ``QuantizedRows``.

Why int8: at 100k rows the float32 matrix was 147 MiB of the daemon's RSS
(issue 15 asks <= 400 MiB with the model loaded); codes + scales are 37 MiB. A row is
quantised symmetrically (step max |x| / 127, so each component is off by at most
half a step, ~0.001 for a unit 384-d row, and a cosine by about as much:
``quantize``); LanceDB keeps the exact vectors. Scores are computed a block of rows
at a time (int8 → float32 into a small buffer, then the matrix-vector product): as
fast as the float32 product at 100k rows (~8 ms either way here, one run), since it
reads a quarter of the memory. Pure numpy; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK_ROWS", "F32", "I8", "QuantizedRows", "quantize"]

F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
# Rows converted to float32 per step of a product: 1.5 MiB at 384-d, stays in cache
# (blocks of 2-4k rows were 2-10x slower here, one run under load).
BLOCK_ROWS = 1024


def quantize(vectors: F32) -> tuple[I8, F32]:
    """Symmetric int8 codes and a float32 scale per row (a zero row gets scale 0).

    Codes are ``rint(x / (max |x| / 127))``; the scale is then ``x·x / codes·x``, so a row
    scored against itself gives exactly its squared norm (1 for a stored unit vector: a
    query equal to a stored text still scores 1.0) and any other dot product is off by
    about as much as with ``max |x| / 127``."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.shape[1] else np.zeros(len(vectors))
    step = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(vectors / step[:, None]).clip(-127, 127).astype(np.int8)
    along = np.einsum("ij,ij->i", codes.astype(np.float32), vectors)
    norms = np.einsum("ij,ij->i", vectors, vectors)
    scales = np.where(along > 0, norms / np.where(along > 0, along, 1.0), 0.0)
    return codes, scales.astype(np.float32)


class QuantizedRows:
    """A read-only n × dim float32 matrix held as int8 codes and a scale per row.

    Supports what readers of ``all_vectors`` do with a matrix: ``rows @ x`` (x a vector
    or a dim × m matrix; float32 out, computed a block of rows at a time), ``rows[i]`` /
    ``rows[positions]`` / ``rows[a:b]`` (dequantised float32 copies), ``len``, ``shape``.
    """

    __slots__ = ("codes", "scales")
    ndim = 2
    dtype = np.dtype(np.float32)

    def __init__(self, codes: I8, scales: F32) -> None:
        self.codes = codes
        self.scales = scales

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.codes.shape[0]), int(self.codes.shape[1])

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def __matmul__(self, other: npt.ArrayLike) -> F32:
        x = np.asarray(other, dtype=np.float32)
        n, dim = self.shape
        if x.ndim not in (1, 2) or x.shape[0] != dim:
            raise ValueError(f"matmul: ({n}, {dim}) @ {x.shape}")
        out: F32 = np.empty((n, *x.shape[1:]), dtype=np.float32)
        buf = np.empty((min(n, BLOCK_ROWS), dim), dtype=np.float32)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            block = buf[: hi - lo]
            np.copyto(block, self.codes[lo:hi], casting="unsafe")
            np.matmul(block, x, out=out[lo:hi])
        out *= self.scales if x.ndim == 1 else self.scales[:, None]
        return out

    def __getitem__(self, key: int | slice | Sequence[int] | npt.NDArray[np.intp]) -> F32:
        scales = self.scales[key]
        rows: F32 = self.codes[key].astype(np.float32)
        rows *= scales[..., None] if np.ndim(scales) else scales
        return rows

    def take(self, positions: Sequence[int] | npt.NDArray[np.intp]) -> QuantizedRows:
        """The rows at ``positions``, still quantised."""
        return QuantizedRows(self.codes[positions], self.scales[positions])

    def dequantize(self) -> F32:
        return self[:]
