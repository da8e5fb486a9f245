"""Time-ordered identifiers (UUIDv7, RFC 9562) made from the injected clock.

Python 3.11 has no ``uuid.uuid7``; this is the RFC layout: 48 bits of unix
milliseconds, version 7, then 74 bits that keep ids of one millisecond in the
order they were made (RFC 9562 §6.2 method 1, as CPython 3.14's ``uuid7``): a
42-bit counter, started at a random value with its top bit clear at the first
id of a millisecond and incremented by each later one, and 32 random bits.

So ids sort by creation time *and*, within a millisecond, by creation order.
The clock is the data's own (a simulated feed's frozen tick, a replayed log):
many ids share one millisecond, and every reader that orders records "oldest
first" by ``(time, id)`` would otherwise order those at random, run to run
(which label of a moment is the newest, which entries a bounded read keeps).
Unlike CPython's, the time is never moved: an id's time is the time it was
made for (``id_time_ms``), which may be older than an id made before it; each
of the last ``_KEPT_MS`` milliseconds keeps its own counter.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict

__all__ = ["id_time_ms", "is_uuid", "new_id", "shared_prefix_len"]

_COUNTER_BITS = 42
_COUNTER_MAX = (1 << _COUNTER_BITS) - 1
_KEPT_MS = 4096  # milliseconds whose counters are kept (the newest used)
_counters: OrderedDict[int, int] = OrderedDict()
_lock = threading.Lock()


def _next_counter(ms: int) -> int:
    """The counter of the next id made for ``ms``: a fresh random start (top bit clear, so
    2**41 ids fit after it) at a millisecond's first id, else one more than the last."""
    with _lock:
        last = _counters.get(ms)
        if last is None or last >= _COUNTER_MAX:
            value = int.from_bytes(os.urandom(6), "big") & (_COUNTER_MAX >> 1)
        else:
            value = last + 1
        _counters[ms] = value
        _counters.move_to_end(ms)
        while len(_counters) > _KEPT_MS:
            _counters.popitem(last=False)
        return value


def new_id(now_ms: int) -> str:
    """A UUIDv7 string whose timestamp is ``now_ms``, after every id made for the same
    millisecond before it (in this process)."""
    ms = now_ms & 0xFFFF_FFFF_FFFF
    counter = _next_counter(ms)
    tail = int.from_bytes(os.urandom(4), "big")
    value = ms << 80
    value |= 0x7 << 76  # version
    value |= (counter >> 30) << 64  # rand_a: the counter's top 12 bits
    value |= 0b10 << 62  # variant
    value |= (counter & 0x3FFF_FFFF) << 32  # rand_b: the counter's low 30 bits ...
    value |= tail  # ... and 32 random bits
    return str(uuid.UUID(int=value))


def id_time_ms(id_: str) -> int:
    """The millisecond timestamp inside a UUIDv7."""
    return uuid.UUID(id_).int >> 80


def is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def shared_prefix_len(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share: what a short id must exceed to
    tell them apart (the store's and PLAYBOOK.md's unique prefixes both use it)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
