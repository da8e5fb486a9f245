"""One writer thread, concurrent readers, and durability of an acknowledged write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np

from grimoire.stores.semantic.store import SemanticStore
from tests.stores.semantic.test_semantic_support import (
    DIM,
    clock,
    make_entry,
    open_store,
    rng,
    store,
    unit,
)

__all__ = ["clock", "rng", "store"]  # fixtures


def test_readers_query_concurrently_while_the_writer_commits(store: SemanticStore) -> None:
    """Readers never fail, never see a half-written batch, and see counts only grow."""
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: list[list[int]] = [[] for _ in range(3)]
    gen = np.random.default_rng(5)
    queries = [unit(gen) for _ in range(3)]

    def reader(i: int) -> None:
        try:
            while not stop.is_set():
                n = len(store.list_entries(limit=None))
                seen[i].append(n)
                assert n % 10 == 0  # batches of 10 commit atomically
                store.knn(queries[i], 5)
                store.bm25("gas cheap", 5)
        except BaseException as exc:  # surfaced below; a reader must never fail
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for _ in range(8):
        with store.transaction():
            for _ in range(10):
                store.insert_entry(make_entry(), unit(gen))
    stop.set()
    for t in threads:
        t.join(10)
    assert errors == []
    for counts in seen:
        assert counts == sorted(counts)
    assert len(store.list_entries(limit=None)) == 80
    assert len(store.knn(queries[0], 100)) == 80


def test_a_second_writer_waits_for_the_first_transaction(store: SemanticStore,
                                                         rng: np.random.Generator) -> None:
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []
    first, second = make_entry(), make_entry()

    def batch() -> None:
        with store.transaction():
            store.insert_entry(first, unit(rng))
            inside.set()
            release.wait(5)
            order.append("first committed")

    def single() -> None:
        inside.wait(5)
        store.insert_entry(second, np.ones(DIM))
        order.append("second committed")

    a, b = threading.Thread(target=batch), threading.Thread(target=single)
    a.start()
    b.start()
    inside.wait(5)
    b.join(0.2)  # b is blocked on the writer lock, not interleaving with a's batch
    assert order == []
    release.set()
    a.join(5)
    b.join(5)
    assert order == ["first committed", "second committed"]
    assert store.counts().total == 2


def test_an_acknowledged_write_survives_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    script = textwrap.dedent(f"""
        import os, signal, sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
        from tests.stores.semantic.test_semantic_support import make_entry, open_store
        store = open_store({str(path)!r})
        entry = make_entry(id="durable-1", content="written then killed")
        store.insert_entry(entry, np.ones({DIM}))
        print("acked", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": "."},
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout.strip().endswith("acked"), proc.stderr
    assert proc.returncode == -9
    with open_store(path) as store:
        got = store.get_entry("durable-1")
        assert got is not None and got.content == "written then killed"
        assert store.bm25("killed", 1)[0][0].id == "durable-1"
        assert store.knn(np.ones(DIM), 1)[0][0].id == "durable-1"
