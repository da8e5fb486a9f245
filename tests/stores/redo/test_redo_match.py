"""The scrub's many-needle search (``stores.redo.match``) finds what the plain
case-insensitive alternation finds, at the same places, for needles sharing prefixes."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.stores.redo.match import Needles

# a small alphabet, so needles share prefixes and end inside one another (the trie's cases)
_ALPHABET = st.sampled_from(list(b"abAB-\x00\xc3\xa9"))
_BYTES = st.lists(_ALPHABET, max_size=12).map(bytes)


def _reference(needles: list[bytes]) -> re.Pattern[bytes] | None:
    found = sorted({n.lower() for n in needles if len(n) >= 2}, key=len, reverse=True)
    if not found:
        return None
    return re.compile(b"|".join(re.escape(n) for n in found), re.IGNORECASE)


@settings(max_examples=300, deadline=None)
@given(st.lists(_BYTES, max_size=8), _BYTES, st.integers(0, 12), st.integers(0, 12))
def test_needles_find_as_the_alternation_does(needles: list[bytes], hay: bytes,
                                              start: int, end: int) -> None:
    got = Needles(needles)
    ref = _reference(needles)
    assert bool(got) == (ref is not None)
    assert got.search(hay) == (ref is not None and ref.search(hay) is not None)
    m = got.find(hay.lower(), start, end)
    r = ref.search(hay, start, end) if ref is not None else None
    assert (m.start() if m else None) == (r.start() if r else None)
    assert m is None or m.end() <= end
    marked = got.sub(hay, lambda found: b"<" + found.upper() + b">")
    want = hay if ref is None else ref.sub(lambda x: b"<" + x.group(0).lower().upper() + b">",
                                           hay)
    assert marked == want


def test_needles_many_ids_and_a_prefix_of_another() -> None:
    ids = [f"0190a1b2-{i:04x}-7abc-8def-0123456789ab".encode() for i in range(2000)]
    needles = Needles([*ids, b"Quintessa", b"Quintessa Marlowe"])
    text = b'{"id": "0190A1B2-07CF-7ABC-8DEF-0123456789AB", "by": "quintessa marlowe!"}'
    assert needles.search(text)
    assert needles.sub(text, lambda m: b"#" * len(m)) == (
        b'{"id": "' + b"#" * 36 + b'", "by": "' + b"#" * 17 + b'!"}')
    assert not needles.search(b"0190a1b2-07d0-7abc-8def-0123456789ab Quintess")
    assert Needles([b"x", b""]).find(b"xx") is None  # shorter than 2: left out
    assert Needles([b"x"], shortest=1).find(b"ax") is not None


@settings(max_examples=300, deadline=None)
@given(st.lists(_BYTES, max_size=6), st.lists(st.tuples(_BYTES, st.integers(0, 3)), max_size=8))
def test_hits_names_each_span_that_holds_a_whole_match(
        needles: list[bytes], parts: list[tuple[bytes, int]]) -> None:
    """Spans with gaps between them (a record's op headers): a match across a gap, or
    one in a gap, belongs to no span, and never hides one inside the next span."""
    hay, spans = b"", []
    for part, gap in parts:
        hay += b"a\x00-"[:gap]
        spans.append((len(hay), len(hay) + len(part)))
        hay += part
    low = hay.lower()
    got = Needles(needles).hits(low, spans)
    ref = _reference(needles)
    want = [i for i, (start, end) in enumerate(spans)
            if ref is not None and ref.search(hay, start, end) is not None]
    assert got == want
