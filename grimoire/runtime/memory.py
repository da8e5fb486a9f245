"""Handing freed C-heap memory back to the system.

glibc keeps what a thread frees in that thread's heap (arena) for reuse, and gives it
back to the system only from the top of the main heap. A daemon whose big allocations
are transient — LanceDB's scan of the whole table when the episode index is rebuilt on
open, onnxruntime's activations for an embedding batch (no arena: see ``embed``), a
curator cycle — therefore kept its peak as RSS for good: at 100k episodes the rebuild
alone left ~260 MiB freed but resident (bench_speed.py --part memory). ``malloc_trim(0)``
returns it; it costs about a millisecond (more with many arenas), so it is called after
such work, not after every call: on open, after embedding batches, after each heartbeat tick.

Arrow buffers (the episode index's rows, LanceDB scans converted to Arrow) come from
pyarrow's own pool (mimalloc), which glibc's trim does not reach: it kept ~20 MiB of
freed pages after a 100k-row open (49 MiB resident for 24 MiB allocated). Its
``release_unused`` is called in the same place (microseconds), when pyarrow is loaded.

Threads: glibc gives each thread that allocates its own arena (up to 8 per core), and
what one arena frees another cannot reuse; the daemon runs onnxruntime's, LanceDB's,
the server's and the read pools' threads. ``limit_malloc_arenas`` (``mallopt``, called
once when the daemon starts, before those threads allocate) caps them; an explicit
``MALLOC_ARENA_MAX`` in the environment wins.

Large blocks: glibc serves a request of 128 KiB or more with its own mmap, unmapped
when freed, but after the first such free it raises that threshold (up to 32 MiB), so
LanceDB's scan batches, Arrow columns and the index's arrays built on open then come
from the heap, between long-lived objects, and stay resident as holes when freed.
``map_large_allocations`` fixes the threshold (4 MiB: one query's buffers stay below it,
so a retrieve makes no mmap call) and ``use_system_arrow_pool`` puts Arrow's buffers
under the same rule. Opening a 100k-episode store in process, RSS went from 378-395 to
366 MiB over five runs (each alone did less: the Arrow pool alone 408, the threshold
alone 374); the daemon in scripts/bench_speed.py --part memory went from 405 to 387 MiB.

Owns only those calls. No-op where there is no glibc (the Arrow part still runs).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["limit_malloc_arenas", "map_large_allocations", "release_free_memory",
           "use_system_arrow_pool"]

_LIBC: Any = None
_M_ARENA_MAX = -8  # glibc's mallopt parameters
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


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


def map_large_allocations(threshold: int) -> None:
    """Every C allocation of ``threshold`` bytes or more gets its own mapping, returned to the
    system when freed, for the life of the process (glibc's ``M_MMAP_THRESHOLD``; no-op
    elsewhere, or when the environment sets ``MALLOC_MMAP_THRESHOLD_``).

    Fixing that threshold also stops glibc from moving its trim threshold, which stays at
    128 KiB: every free that left more than that on top of a heap gave it back, and the next
    call faulted it in again (a retrieve's 1.5 MiB product buffer: +0.6 ms in the daemon's
    episode search). The trim threshold is set where glibc's own rule puts it, twice the
    mmap threshold (unless ``MALLOC_TRIM_THRESHOLD_`` is set); ``release_free_memory``
    still hands everything back after big work."""
    if threshold < 1 or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    libc = _libc()
    if libc:
        libc.mallopt(_M_MMAP_THRESHOLD, threshold)
        if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
            libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold)


def use_system_arrow_pool() -> None:
    """Arrow allocates from the C heap (``malloc``), not its bundled mimalloc, so that
    ``map_large_allocations`` and ``release_free_memory`` reach its buffers too. Call it
    before Arrow allocates anything long-lived. Skipped when the environment chooses
    (``ARROW_DEFAULT_MEMORY_POOL``)."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    import pyarrow

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``; no-op elsewhere),
    and pyarrow's pool's unused pages (when pyarrow is imported: never imported here)."""
    libc = _libc()
    if libc:
        libc.malloc_trim(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
