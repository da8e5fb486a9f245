"""Handing freed C-heap memory back to the system.

glibc keeps what a thread frees in that thread's heap (arena) for reuse, and gives it
back to the system only from the top of the main heap. A daemon whose big allocations
are transient — LanceDB's scan of the whole table when the episode index is rebuilt on
open, onnxruntime's activations for an embedding batch (no arena: see ``embed``), a
curator cycle — therefore kept its peak as RSS for good: at 100k episodes the rebuild
alone left ~260 MiB freed but resident (bench_memory.py). ``malloc_trim(0)`` returns it;
it costs about a millisecond (more with many arenas), so it is called after such work,
not after every call: on open, after embedding batches, after each heartbeat tick.

Arrow buffers (the episode index's rows, LanceDB scans converted to Arrow) come from
pyarrow's own pool (mimalloc), which glibc's trim does not reach: it kept ~20 MiB of
freed pages after a 100k-row open (49 MiB resident for 24 MiB allocated). Its
``release_unused`` is called in the same place (microseconds), when pyarrow is loaded.

Threads: glibc gives each thread that allocates its own arena (up to 8 per core), and
what one arena frees another cannot reuse; the daemon runs onnxruntime's, LanceDB's,
the server's and the read pools' threads. ``limit_malloc_arenas`` (``mallopt``, called
once when the daemon starts, before those threads allocate) caps them; an explicit
``MALLOC_ARENA_MAX`` in the environment wins.

Owns only those calls. No-op where there is no glibc (the Arrow part still runs).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["limit_malloc_arenas", "release_free_memory"]

_LIBC: Any = None
_M_ARENA_MAX = -8  # glibc's mallopt parameter


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            libc.malloc_trim.argtypes = [ctypes.c_size_t]
            libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            _LIBC = libc
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC


def limit_malloc_arenas(count: int) -> None:
    """At most ``count`` glibc malloc arenas from now on (no-op elsewhere, or when the
    environment sets ``MALLOC_ARENA_MAX``)."""
    if count < 1 or "MALLOC_ARENA_MAX" in os.environ:
        return
    libc = _libc()
    if libc:
        libc.mallopt(_M_ARENA_MAX, count)


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``; no-op elsewhere),
    and pyarrow's pool's unused pages (when pyarrow is imported: never imported here)."""
    libc = _libc()
    if libc:
        libc.malloc_trim(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
