"""Retrieval's writes, done on the writer thread without making the caller wait.

A retrieve must not block on the writer (its queue may hold an embedding
batch, and every commit is an fsync). What it has to write — the retrieval
log row that ``outcome.report`` will look up, and in deciding mode the
access bookkeeping of what it served — is handed to one small background
thread that queues it on the writer with ``call_batched``, so concurrent
retrievals share one transaction and one fsync. Measured cost on the
caller's path: one ``Executor.submit`` (tens of µs); over the socket even
that waits until the answer is sent (``grimoire.runtime.afterwards``). The hand-off
waits ``DEFER_S`` first, so the write does not compete with the answer on its
way out.

A read-only Grimoire (``ctx.read_only``) writes nothing: ``submit`` skips
the job (a done future), so the retrieval is answered and not logged.

``wait(ctx, retrieval_id)`` lets ``outcome.report`` (and tests) wait until
a given retrieval's row is written; ``drain(ctx)`` waits for all of them.
A retrieval whose write fails (writer shut down, queue full) is logged as
``retrieval.log.failed``; reporting its outcome then finds no such retrieval.

Owns: the hand-off and the record of pending writes. Must not decide what is
written (``stages.log`` builds the records) nor rank anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from grimoire.context import Context
from grimoire.errors import BusyError
from grimoire.logs import get_logger
from grimoire.runtime.afterwards import later

__all__ = ["drain", "submit", "wait"]

log = get_logger(__name__)

_PENDING = "retrieval.pending"  # ctx.extras key: {key: Future}
_HURRY = "retrieval.hurry"  # ctx.extras key: {key: Event} that ends a pending write's delay
_STARTS = "retrieval.starts"  # ctx.extras key: {key: start()} of writes held for an answer
_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
# A few threads, so that writes of concurrent retrievals reach the writer queue together
# and share one transaction (call_batched); each thread mostly waits on the writer.
_WORKERS = 4
# The write is queued this long after the retrieval returns. Queued at once, the writer's
# transaction (and the wake-ups of two threads) ran exactly while the socket server was
# encoding and sending the answer, and cost that answer ~2 ms on a loaded 2-core machine
# (bench_speed.py --part retrieval: socket p50 2.25x the floor with it, 1.75x without the
# log write at all). A few ms later the answer has gone. ``wait``/``drain``
# (``outcome.report``) end the delay of the writes they wait for: nobody who needs the row
# waits for the deferral.
DEFER_S = 0.004


def _pool() -> ThreadPoolExecutor:
    # Created on first use (no import-time side effects), shared by every Context: it only
    # forwards jobs to each Context's writer.
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=_WORKERS,
                                           thread_name_prefix="grimoire-retrieval-writes")
        return _executor


def _pending(ctx: Context) -> dict[str, Future[Any]]:
    with ctx.state_lock:
        found: dict[str, Future[Any]] | None = ctx.extras.get(_PENDING)
        if found is None:
            found = ctx.extras[_PENDING] = {}
        return found


def _hurries(ctx: Context) -> dict[str, threading.Event]:
    with ctx.state_lock:
        found: dict[str, threading.Event] | None = ctx.extras.get(_HURRY)
        if found is None:
            found = ctx.extras[_HURRY] = {}
        return found


def _starts(ctx: Context) -> dict[str, Callable[[], None]]:
    """Under ``ctx.state_lock``."""
    found: dict[str, Callable[[], None]] | None = ctx.extras.get(_STARTS)
    if found is None:
        found = ctx.extras[_STARTS] = {}
    return found


def submit(ctx: Context, key: str, batch_key: str, payload: Any,
           handler: Callable[[Sequence[Any]], Sequence[Any]]) -> Future[Any]:
    """Queue ``handler([payload, …])`` on the writer (batched by ``batch_key``); don't wait.

    ``key`` names the write for ``wait`` (a retrieval id).
    """
    if ctx.read_only:  # nothing may be written: the read is answered, not logged
        skipped: Future[Any] = Future()
        skipped.set_result(None)
        return skipped
    pending, hurries = _pending(ctx), _hurries(ctx)
    delay = DEFER_S
    hurry = threading.Event()  # set by ``wait``: someone needs this write now

    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            hurry.wait(delay)  # let the caller's answer go out first (see DEFER_S)
            result = ctx.writer.call_batched(batch_key, payload, handler)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    once = threading.Lock()

    def start() -> None:
        """Hand ``run`` to the pool (once: after the answer, or earlier from ``wait``)."""
        if not once.acquire(blocking=False):
            return
        try:
            _pool().submit(run)
        except BaseException as exc:  # the pool is shut down (interpreter exit)
            future.set_exception(exc)

    with ctx.state_lock:
        pending[key] = future
        hurries[key] = hurry
    # Registered first, so ``wait`` finds the write even before it is started; started
    # after the socket answer is sent when there is one (``grimoire.runtime.afterwards``: waking a
    # pool thread here cost the answer a context switch), else now, as before.
    if later(start):
        with ctx.state_lock:
            _starts(ctx)[key] = start
    else:
        once.acquire()
        try:
            _pool().submit(run)
        except BaseException:  # a shut-down pool: the caller gets the error, as before
            with ctx.state_lock:
                pending.pop(key, None)
                hurries.pop(key, None)
            raise

    def done(f: Future[Any]) -> None:
        with ctx.state_lock:
            if pending.get(key) is f:
                del pending[key]
                hurries.pop(key, None)
                _starts(ctx).pop(key, None)
        exc = f.exception()
        if exc is not None:
            log.error("retrieval.log.failed", key=key, error=str(exc),
                      type=type(exc).__name__)

    future.add_done_callback(done)
    return future


def wait(ctx: Context, key: str, timeout_s: float = 30.0) -> None:
    """Block until the write named ``key`` (if still pending) has run; re-raises its error."""
    future = _pending(ctx).get(key)
    if future is None:
        return
    hurry = _hurries(ctx).get(key)
    if hurry is not None:
        hurry.set()
    with ctx.state_lock:
        start = ctx.extras.get(_STARTS, {}).get(key)
    if start is not None:  # still held for after an answer (maybe this thread's): start it
        start()
    try:
        future.result(timeout=timeout_s)
    except FutureTimeout:
        raise BusyError(f"the write of {key!r} is still queued after {timeout_s:g} s; "
                        "retry shortly") from None


def drain(ctx: Context, timeout_s: float = 30.0) -> None:
    """Wait for every pending retrieval write of this context (tests, shutdown, reports)."""
    with ctx.state_lock:
        keys = list(ctx.extras.get(_PENDING, {}))
    for key in keys:
        try:
            wait(ctx, key, timeout_s)
        except BusyError:
            raise
        except Exception as exc:  # already logged by the done callback; keep draining
            log.debug("retrieval.drain.skipped", key=key, error=str(exc))
