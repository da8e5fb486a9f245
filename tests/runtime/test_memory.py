"""Freed C-heap memory goes back to the system after the work that freed it (issue 15).

The mechanism is ``grimoire.runtime.memory.release_free_memory`` (glibc ``malloc_trim``); these
tests pin where it is called — after the stores are opened (the index rebuild's scan of
the episode table), after every heartbeat tick and after a compaction — not what RSS it
saves, which ``scripts/bench_speed.py --part memory`` measures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import grimoire.grimoire as facade
import grimoire.service.daemon as daemon_module
import grimoire.stores.episodes.store as episodes_module
from grimoire.clock import FrozenClock
from grimoire.feeds import NoneFeed
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.runtime.memory import limit_malloc_arenas, release_free_memory
from grimoire.service.daemon import Daemon


def test_release_free_memory_runs_anywhere() -> None:
    release_free_memory()  # a no-op without glibc; never raises
    release_free_memory()


def test_limit_malloc_arenas_runs_anywhere_and_the_daemon_sets_it_first() -> None:
    limit_malloc_arenas(daemon_module.MALLOC_ARENAS)  # a no-op without glibc
    limit_malloc_arenas(0)  # ignored
    source = Path(daemon_module.__file__).read_text()
    body = source[source.index("def run_daemon"):]
    assert body.index("limit_malloc_arenas(") < body.index("Grimoire.open(")
    assert body.index("map_large_allocations(") < body.index("Grimoire.open(")
    assert body.index("use_system_arrow_pool(") < body.index("Grimoire.open(")


def test_allocator_settings_apply_unless_the_environment_chose() -> None:
    """In a child: the settings change the process for good (this one keeps its own)."""
    probe = ("import pyarrow as pa; from grimoire.runtime.memory import map_large_allocations, "
             "use_system_arrow_pool; map_large_allocations(4 << 20); map_large_allocations(0); "
             "use_system_arrow_pool(); print(pa.default_memory_pool().backend_name)")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    run = [sys.executable, "-c", probe]
    assert subprocess.run(run, env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "system"
    chosen = subprocess.run(run, env={**env, "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"},
                            capture_output=True, text=True, check=True).stdout.strip()
    assert chosen == "jemalloc"


_KEEPCOST_PROBE = """
import ctypes, sys
from grimoire.runtime.memory import map_large_allocations
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost").split()]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
map_large_allocations(4 << 20)
block = libc.malloc(2 << 20)
libc.free(block)
print(libc.mallinfo2().keepcost)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_block_below_the_mmap_threshold_is_not_trimmed_on_every_free() -> None:
    """A 2 MiB block freed on top of the heap stays there for the next call (glibc would
    otherwise trim anything over 128 KiB once the mmap threshold is fixed), unless the
    environment chose its own trim threshold."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    run = [sys.executable, "-c", _KEEPCOST_PROBE]
    kept = int(subprocess.run(run, env=env, capture_output=True, text=True,
                              check=True).stdout)
    assert kept >= 2 << 20
    chosen = int(subprocess.run(run, env={**env, "MALLOC_TRIM_THRESHOLD_": str(128 << 10)},
                                capture_output=True, text=True, check=True).stdout)
    assert chosen < 1 << 20


def test_open_and_every_tick_hand_freed_memory_back(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(facade, "release_free_memory", lambda: calls.append("open"))
    monkeypatch.setattr(daemon_module, "release_free_memory", lambda: calls.append("tick"))
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(),
                       embedder=HashEmbedder()) as g:
        assert calls == ["open"]
        now = [1000.0]
        config = g.context.config.replace(**{"daemon.tick_seconds": 40, "daemon.speed": 40})
        d = Daemon(g, NoneFeed(), config, monotonic=lambda: now[0])
        now[0] = 1001.0
        assert d.step() is not None
        now[0] = 1002.0
        assert d.step() is not None
    assert calls == ["open", "tick", "tick"]


def test_compaction_hands_freed_memory_back(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(episodes_module, "release_free_memory", lambda: calls.append("compact"))
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(),
                       embedder=HashEmbedder()) as g:
        g.episode_write(text="gas spiked to 90 gwei on base")
        g.context.writer.call(g.context.episodes.compact)
    assert "compact" in calls
