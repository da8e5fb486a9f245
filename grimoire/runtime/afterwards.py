"""Work that a request leaves for after its answer has been sent.

The socket server answers each request on the connection's own thread inside
``answering()``; code that runs during the request (retrieve's log hand-off)
calls ``later(fn)`` for something that need not happen before the answer, and
the server runs ``fn`` right after the answer is written, before it reads the
connection's next request. Outside ``answering()`` (in-process callers, the
CLI, tests) ``later`` returns False and the caller does the work at once, as
before: nothing changes for them.

Why: handing work to another thread wakes that thread, and on a loaded 2-core
machine the wake-up (a context switch, a GIL hand-off) landed exactly while the
answer was being encoded and sent (issue 15). After the send it costs the
caller nothing.

The work always runs, also when the answer could not be sent (the client went
away): a deferred write is still a write. A failure is logged, never raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from grimoire.logs import get_logger

__all__ = ["answering", "later"]

log = get_logger(__name__)

_LOCAL = threading.local()


def later(fn: Callable[[], object]) -> bool:
    """Run ``fn`` once the current answer is sent; False (not queued) outside ``answering``."""
    held: list[Callable[[], object]] | None = getattr(_LOCAL, "held", None)
    if held is None:
        return False
    held.append(fn)
    return True


@contextmanager
def answering() -> Iterator[None]:
    """Collect ``later`` work during the block; run it, in order, when the block ends."""
    outer = getattr(_LOCAL, "held", None)
    held: list[Callable[[], object]] = []
    _LOCAL.held = held
    try:
        yield
    finally:
        _LOCAL.held = outer
        for fn in held:
            try:
                fn()
            except Exception as exc:  # the answer is gone: log, never raise into the server
                log.error("afterwards.failed", error=repr(exc), exc_info=exc)
