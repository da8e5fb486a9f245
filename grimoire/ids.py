"""Time-ordered identifiers (UUIDv7, RFC 9562) made from the injected clock.

Python 3.11 has no ``uuid.uuid7``; this is the RFC layout: 48 bits of unix
milliseconds, version 7, 74 random bits. Ids sort by creation time.
"""

from __future__ import annotations

import os
import uuid

__all__ = ["id_time_ms", "is_uuid", "new_id", "shared_prefix_len"]


def new_id(now_ms: int) -> str:
    """A UUIDv7 string whose timestamp is ``now_ms``."""
    rand = int.from_bytes(os.urandom(10), "big")
    value = (now_ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 62) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)  # rand_b, 62 bits
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
