"""Many byte strings looked for at once, ASCII case folded: what ``forget``'s scrub seeks.

A forget of one actor looks for a thousand ids and more in every record of a redo log
that can hold hundreds of megabytes. As plain alternatives (``a|b|c…``) with
``re.IGNORECASE``, the regular expression engine tries every needle at every position:
under 1 MB/s. ``Needles`` compiles them as a trie instead (a shared prefix is matched
once, each branch is one byte to follow) and runs it over the ASCII-lowered bytes, with
no case folding in the engine: a few hundred MB/s. ``bytes.lower`` folds ASCII only, as
``re.IGNORECASE`` does for a bytes pattern, and keeps every offset, so a match in the
lowered bytes is a match at the same place in the original ones.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["Needles"]

_END = -1  # a trie node's mark: a needle ends here


def _source(node: dict[int, Any]) -> bytes:
    """The pattern of the trie below ``node`` (greedy: a longer needle is preferred)."""
    out = b""
    while True:
        keys = sorted(k for k in node if k != _END)
        if len(keys) == 1 and _END not in node:  # a chain: its bytes in a row
            out += re.escape(bytes([keys[0]]))
            node = node[keys[0]]
            continue
        break
    if not keys:
        return out
    alts = [re.escape(bytes([k])) + _source(node[k]) for k in keys]
    body = alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
    if _END in node:
        body = b"(?:" + body + b")?"
    return out + body


def _compile(needles: list[bytes]) -> re.Pattern[bytes]:
    root: dict[int, Any] = {}
    for needle in needles:
        node = root
        for byte in needle:
            node = node.setdefault(byte, {})
        node[_END] = {}
    try:
        return re.compile(_source(root))
    except (RecursionError, re.error, OverflowError):  # a trie too deep for the engine
        longest = sorted(needles, key=len, reverse=True)
        return re.compile(b"|".join(re.escape(n) for n in longest))


class Needles:
    """A set of byte strings (each ASCII-lowered; those shorter than ``shortest`` are left
    out) found in bytes as ``re.IGNORECASE`` would, one engine pass per call."""

    def __init__(self, needles: Iterable[bytes], *, shortest: int = 2) -> None:
        found = sorted({n.lower() for n in needles if len(n) >= max(shortest, 1)})
        self.needles: tuple[bytes, ...] = tuple(found)
        self._pattern = _compile(found) if found else None

    @classmethod
    def union(cls, *sets: Needles) -> Needles:
        """One set of the needles of all these (each kept as its own set kept it)."""
        return cls([n for one in sets for n in one.needles], shortest=1)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def find(self, low: bytes, start: int = 0, end: int | None = None) -> re.Match[bytes] | None:
        """The leftmost match in ``low[start:end]`` (``low``: bytes already lowered), if
        any; a match never reaches past ``end``."""
        if self._pattern is None:
            return None
        if end is None:
            return self._pattern.search(low, start)
        return self._pattern.search(low, start, end)

    def hits(self, low: bytes, spans: Sequence[tuple[int, int]]) -> list[int]:
        """The indexes of the ``spans`` (``(start, end)`` ranges of ``low``, in order, not
        overlapping) that hold a whole match. A search runs from the start of the first
        span not yet looked at, and only the span where the leftmost match begins (or,
        if it begins between two spans, the next one) is searched on its own: about two
        passes over the bytes, however many spans there are."""
        found: list[int] = []
        if self._pattern is None or not spans:
            return found
        starts = [start for start, _ in spans]
        i = 0
        while i < len(spans):
            m = self._pattern.search(low, spans[i][0])
            if m is None:
                break
            i = max(i, bisect_right(starts, m.start()) - 1)
            if m.start() >= spans[i][1]:  # between two spans: the next one is the first
                i += 1  # that can hold a whole match from here
                if i == len(spans):
                    break
            start, end = spans[i]
            if self._pattern.search(low, start, end) is not None:
                found.append(i)
            i += 1
        return found

    def search(self, raw: bytes) -> bool:
        """Whether ``raw`` (not lowered) holds a needle in any ASCII case."""
        return self.find(raw.lower()) is not None

    def sub(self, raw: bytes, repl: Callable[[bytes], bytes]) -> bytes:
        """``raw`` with each match (leftmost, longest first) replaced by ``repl`` of its
        lowered bytes."""
        if self._pattern is None:
            return raw
        low = raw.lower()
        out, at = [], 0
        for m in self._pattern.finditer(low):
            out += [raw[at:m.start()], repl(m.group(0))]
            at = m.end()
        if not out:
            return raw
        out.append(raw[at:])
        return b"".join(out)
