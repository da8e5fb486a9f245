"""The single writer runs every job on one thread, group-commits batches, bounds its queue."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import pytest

from grimoire.errors import BusyError
from grimoire.runtime.writer import Writer, _Job


def test_jobs_run_on_one_thread_in_order() -> None:
    w = Writer()
    seen: list[tuple[int, str]] = []
    for i in range(20):
        w.call(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"grimoire-writer"}
    assert w.stop()


def test_concurrent_batched_calls_are_grouped_and_answered_individually() -> None:
    w = Writer()
    gate = threading.Event()
    batches: list[int] = []

    def handler(payloads: Sequence[int]) -> list[int]:
        batches.append(len(payloads))
        return [p * 10 for p in payloads]

    # Block the writer so that the batched jobs queue up behind the blocker.
    blocker = threading.Thread(target=lambda: w.call(gate.wait))
    blocker.start()
    results: dict[int, int] = {}
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, w.call_batched("ep", i,
                                                                                  handler)))
        for i in range(16)
    ]
    for t in threads:
        t.start()
    while w.qsize() < 16:
        threading.Event().wait(0.001)
    gate.set()
    for t in [*threads, blocker]:
        t.join()
    assert results == {i: i * 10 for i in range(16)}
    assert sum(batches) == 16 and len(batches) < 16  # grouped, not one by one
    assert w.stop()


def test_a_failing_batch_fails_each_caller_and_the_writer_survives() -> None:
    w = Writer()

    def boom(payloads: Sequence[int]) -> list[int]:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        w.call_batched("ep", 1, boom)
    assert w.call(lambda: 42) == 42
    assert w.stop()


def test_call_from_the_writer_thread_runs_inline() -> None:
    w = Writer()
    assert w.call(lambda: w.call(lambda: "nested")) == "nested"
    assert w.stop()


def test_full_queue_is_busy_and_stop_refuses_new_work() -> None:
    w = Writer(max_queue=2)
    gate = threading.Event()
    started = threading.Event()
    blocker = threading.Thread(target=lambda: w.call(lambda: (started.set(), gate.wait())))
    blocker.start()
    started.wait()  # the writer is now busy and the queue is empty
    queued = [w._put(_Job(Future(), fn=lambda: 1)) for _ in range(2)]
    with pytest.raises(BusyError, match="queue full"):
        w._put(_Job(Future(), fn=lambda: 1))
    gate.set()
    blocker.join()
    assert [f.result() for f in queued] == [1, 1]
    assert w.stop()
    with pytest.raises(BusyError, match="shutting down"):
        w.call(lambda: 1)


def test_a_group_is_capped_by_weight_and_keeps_submission_order() -> None:
    """Heavy jobs (many episodes each) are grouped up to max_weight; order is kept."""
    w = Writer(max_weight=10)
    gate = threading.Event()
    started = threading.Event()
    groups: list[list[int]] = []

    def handler(payloads: Sequence[int]) -> list[int]:
        groups.append(list(payloads))
        return list(payloads)

    blocker = threading.Thread(target=lambda: w.call(lambda: (started.set(), gate.wait())))
    blocker.start()
    started.wait()
    weights = [4, 4, 4, 30, 1, 1]
    futures = []
    for i, weight in enumerate(weights):
        futures.append(w._put(_Job(Future(), batch_key="ep", payload=i, handler=handler,
                                   weight=weight)))
    gate.set()
    blocker.join()
    assert [f.result() for f in futures] == list(range(6))
    # 4+4 fits under 10, the third 4 would not; 30 runs alone; then 1+1.
    assert groups == [[0, 1], [2], [3], [4, 5]]
    assert w.stop()


def _run_warm_group(w: Writer, handler: Callable[[Sequence[str]], list[str]]) -> None:
    """Queue two "warm" jobs behind a blocked writer, then release it: they run as one
    group (the slow shared group the linger tests start from)."""
    gate = threading.Event()
    started = threading.Event()
    blocker = threading.Thread(target=lambda: w.call(lambda: (started.set(), gate.wait())))
    blocker.start()
    started.wait()
    warm = [w._put(_Job(Future(), batch_key="ep", payload=f"warm{i}", handler=handler))
            for i in range(2)]
    gate.set()
    blocker.join()
    assert [f.result() for f in warm] == ["warm0", "warm1"]


def test_after_a_shared_group_the_writer_lingers_for_stragglers() -> None:
    """Callers who re-send right after their ack join the next group instead of forming a
    half-size group of their own (the convoy that halved the embedding batch)."""
    w = Writer(linger_fraction=1.0, max_linger_s=5.0)
    groups: list[list[str]] = []

    def handler(payloads: Sequence[str]) -> list[str]:
        groups.append(list(payloads))
        if payloads[0].startswith("warm"):
            threading.Event().wait(0.3)  # a slow group: the next linger may last 0.3 s
        return list(payloads)

    _run_warm_group(w, handler)
    results: dict[str, str] = {}
    first = threading.Thread(target=lambda: results.__setitem__(
        "a", w.call_batched("ep", "a", handler)))
    first.start()
    threading.Event().wait(0.05)  # well inside the linger window
    assert w.call_batched("ep", "b", handler) == "b"
    first.join()
    assert groups[-1] == ["a", "b"]
    assert w.stop()


def test_submit_batched_returns_at_once() -> None:
    """A stage hands the writer a whole group and goes straight on to its next one."""
    w = Writer()
    gate = threading.Event()
    started = threading.Event()
    groups: list[list[int]] = []

    def handler(payloads: Sequence[int]) -> list[int]:
        groups.append(list(payloads))
        return [p + 100 for p in payloads]

    blocker = threading.Thread(target=lambda: w.call(lambda: (started.set(), gate.wait())))
    blocker.start()
    started.wait()
    futures = [w.submit_batched("ep", i, handler, linger=False) for i in range(3)]
    assert not any(f.done() for f in futures)  # submitted, not waited for
    gate.set()
    blocker.join()
    assert [f.result(30) for f in futures] == [100, 101, 102]
    assert groups == [[0, 1, 2]]
    assert w.stop()
    with pytest.raises(BusyError, match="shutting down"):
        w.submit_batched("ep", 1, handler)


def test_a_job_submitted_without_linger_starts_its_group_at_once() -> None:
    """The mirror of the linger test: after the same slow shared group, a job submitted
    with ``linger=False`` runs alone at once, and a caller arriving a little later forms
    the next group (one submitter that sends whole groups has no stragglers to wait for)."""
    w = Writer(linger_fraction=1.0, max_linger_s=5.0)
    groups: list[list[str]] = []
    entered = threading.Event()

    def handler(payloads: Sequence[str]) -> list[str]:
        groups.append(list(payloads))
        if payloads[0].startswith("warm"):
            threading.Event().wait(0.5)  # a slow group: a linger after it may last 0.5 s
        if payloads[0] == "a":
            entered.set()
        return list(payloads)

    _run_warm_group(w, handler)
    a = w.submit_batched("ep", "a", handler, linger=False)
    entered.wait(0.4)  # at once without a linger; a lingering "a" would still be waiting
    assert w.call_batched("ep", "b", handler) == "b"
    assert a.result(30) == "a"
    assert groups[-2:] == [["a"], ["b"]]
    assert w.stop()


def test_submit_batched_from_the_writer_thread_runs_inline() -> None:
    w = Writer()
    inner = w.call(lambda: w.submit_batched("ep", 2, lambda ps: [p * 3 for p in ps]))
    assert inner.result(0) == 6
    assert w.stop()
