"""Byte layout of the graph store: keys, index entries and triple records.

Owns every encoding the LMDB files hold, so the layout can be read (and
versioned) in one place. Pure functions only: it must not open
transactions, read the clock or decide temporal rules (``graph.py`` does).
No pickle: records are ``struct``-packed with explicit codes, so a file
stays readable whatever the Python objects look like later.

Layout (all integers big-endian, so byte order is numeric order):

- entity key      ``kind code (1) | id UTF-8``
- triple record   ``header | subject | predicate | object | source_episode``;
  the header holds the record format, the version ``seq`` and ``since``, the
  transaction time from which this version is what the store believed.
- index value     ``valid_from (8) | valid_to (8, all-ones while open) | id (16) | tail``.
  Dupsort keeps values sorted, so entries under one key are in
  ``valid_from`` order and block filters are plain byte comparisons.
- edge tail       ``len (1) | predicate | other entity key`` (empty entity key
  when the object is not an entity).
- bucket key      ``level (1) | bin (8)``: a closed interval is indexed once,
  in the smallest bin that holds it (level 0 bins are 1,000 blocks, each level
  16× wider); wider ones go to ``WIDE`` and open ones to ``OPEN``. A range
  scan reads the bins it crosses at every level, as in genome binning indexes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from grimoire.errors import StoreError
from grimoire.records.graph import (
    EntityKind,
    EntityRef,
    ObjectKind,
    ObjectValue,
    TemporalTriple,
)

__all__ = [
    "BUCKET_BLOCKS",
    "OPEN",
    "IndexEntry",
    "Stored",
    "block_bytes",
    "bucket_key",
    "bucket_ranges",
    "decode_entity_key",
    "decode_head",
    "decode_record",
    "encode_head",
    "encode_record",
    "entity_key",
    "head_key",
    "history_key",
    "id_bytes",
    "id_str",
    "index_entries",
    "peek_record",
    "read_u64",
]

RECORD_FORMAT = 1
BUCKET_BLOCKS = 1_000
BUCKET_FANOUT = 16
BUCKET_LEVELS = 7  # level 6 bins are 1.7e10 blocks wide: every chain's history fits
WIDE_LEVEL = 0xFE
OPEN_LEVEL = 0xFF
NONE_U64 = 2**64 - 1
OPEN = NONE_U64.to_bytes(8, "big")
NO_ID = bytes(16)

# Codes are part of the file format: append new ones, never renumber.
_KIND_CODE = {
    EntityKind.CONTRACT: 1, EntityKind.TOKEN: 2, EntityKind.POOL: 3, EntityKind.ORACLE: 4,
    EntityKind.VAULT: 5, EntityKind.GOVERNANCE: 6, EntityKind.ADDRESS_CLUSTER: 7,
    EntityKind.BRIDGE: 8,
}
_CODE_KIND = {code: kind for kind, code in _KIND_CODE.items()}
_OBJECT_TAG = {ObjectKind.ENTITY: 1, ObjectKind.STRING: 2, ObjectKind.NUMBER: 3,
               ObjectKind.BOOL: 4, ObjectKind.BLOCK: 5}
_TAG_OBJECT = {tag: kind for kind, tag in _OBJECT_TAG.items()}

# format, seq, since, recorded_at, id, valid_from, valid_to, superseded_at, confidence,
# evidence_count, then the lengths of subject key, predicate, source_episode (0xFFFF: none)
_HEADER = struct.Struct(">BIQQ16sQQQdIHBH")
_PEEK = struct.Struct(">BIQQ")
_HEAD = struct.Struct(">16sQ")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_U64 = struct.Struct(">Q")


class Stored(NamedTuple):
    """A triple version with the bookkeeping the store keeps beside it (a tuple: decoded often)."""

    seq: int  # 0 for the first version, +1 for each reinforcement or close
    since: int  # transaction time (ms) from which this version is the belief
    triple: TemporalTriple


@dataclass(frozen=True, slots=True)
class IndexEntry:
    db: str  # by_subject, by_object, by_predicate or by_bucket
    key: bytes
    value: bytes


def block_bytes(block: int) -> bytes:
    return block.to_bytes(8, "big")


def read_u64(raw: bytes | None) -> int:
    """A big-endian u64 meta value; 0 when absent."""
    return 0 if raw is None else int.from_bytes(raw, "big")


def id_bytes(triple_id: str) -> bytes:
    """The 16 bytes of a canonical UUID string (records only hold canonical ids)."""
    return bytes.fromhex(triple_id.replace("-", ""))


def id_str(raw: bytes) -> str:
    # Formatting by hand: uuid.UUID(bytes=...) costs ~10x more, and every decode pays it.
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def entity_key(ref: EntityRef) -> bytes:
    return bytes((_KIND_CODE[ref.kind],)) + ref.id.encode()


def decode_entity_key(raw: bytes) -> EntityRef:
    return EntityRef(_CODE_KIND[raw[0]], raw[1:].decode())


def head_key(subject_key: bytes, predicate: str) -> bytes:
    # Entity ids hold no control characters, so NUL cannot be part of a subject key.
    return subject_key + b"\x00" + predicate.encode()


def encode_head(active_id: bytes | None, frontier: int) -> bytes:
    """Per (subject, predicate): the open triple, if any, and the first block a new may start."""
    return _HEAD.pack(active_id or NO_ID, frontier)


def decode_head(raw: bytes) -> tuple[bytes | None, int]:
    active, frontier = _HEAD.unpack(raw)
    return (None if active == NO_ID else active), frontier


def history_key(raw_id: bytes, seq: int) -> bytes:
    return raw_id + _U32.pack(seq)


def _opt(value: int | None) -> int:
    return NONE_U64 if value is None else value


def _unopt(value: int) -> int | None:
    return None if value == NONE_U64 else value


def encode_record(triple: TemporalTriple, seq: int, since: int) -> bytes:
    subject = entity_key(triple.subject)
    predicate = triple.predicate.encode()
    source = b"" if triple.source_episode is None else triple.source_episode.encode()
    header = _HEADER.pack(
        RECORD_FORMAT, seq, since, triple.recorded_at, id_bytes(triple.id), triple.valid_from,
        _opt(triple.valid_to), _opt(triple.superseded_at), triple.confidence,
        triple.evidence_count, len(subject), len(predicate),
        0xFFFF if triple.source_episode is None else len(source),
    )
    return b"".join((header, subject, predicate, source, _encode_object(triple.object)))


def peek_record(raw: bytes) -> tuple[int, int, int]:
    """``(seq, since, recorded_at)`` without decoding the rest."""
    fmt, seq, since, recorded_at = _PEEK.unpack_from(raw)
    if fmt != RECORD_FORMAT:
        raise StoreError(f"graph record format {fmt} is unknown to this Grimoire")
    return seq, since, recorded_at


def decode_record(raw: bytes) -> Stored:
    (fmt, seq, since, recorded_at, raw_id, valid_from, valid_to, superseded_at, confidence,
     evidence, subject_len, predicate_len, source_len) = _HEADER.unpack_from(raw)
    if fmt != RECORD_FORMAT:
        raise StoreError(f"graph record format {fmt} is unknown to this Grimoire")
    pos = _HEADER.size
    subject = decode_entity_key(raw[pos:pos + subject_len])
    pos += subject_len
    predicate = raw[pos:pos + predicate_len].decode()
    pos += predicate_len
    source = None
    if source_len != 0xFFFF:
        source = raw[pos:pos + source_len].decode()
        pos += source_len
    triple = TemporalTriple(
        id=id_str(raw_id), subject=subject, predicate=predicate,
        object=_decode_object(raw, pos), valid_from=valid_from, valid_to=_unopt(valid_to),
        recorded_at=recorded_at, superseded_at=_unopt(superseded_at), source_episode=source,
        confidence=confidence, evidence_count=evidence,
    )
    return Stored(seq, since, triple)


def _encode_object(obj: ObjectValue) -> bytes:
    tag = bytes((_OBJECT_TAG[obj.kind],))
    value = obj.value
    if isinstance(value, EntityRef):
        key = entity_key(value)
        return tag + _U16.pack(len(key)) + key
    if obj.kind is ObjectKind.STRING:
        text = str(value).encode()
        return tag + _U32.pack(len(text)) + text
    if obj.kind is ObjectKind.NUMBER:
        return tag + _F64.pack(float(value))
    if obj.kind is ObjectKind.BOOL:
        return tag + (b"\x01" if value else b"\x00")
    return tag + _U64.pack(int(value))


def _decode_object(raw: bytes, pos: int) -> ObjectValue:
    kind = _TAG_OBJECT[raw[pos]]
    pos += 1
    if kind is ObjectKind.ENTITY:
        (size,) = _U16.unpack_from(raw, pos)
        return ObjectValue(kind, decode_entity_key(raw[pos + 2:pos + 2 + size]))
    if kind is ObjectKind.STRING:
        (size,) = _U32.unpack_from(raw, pos)
        return ObjectValue(kind, raw[pos + 4:pos + 4 + size].decode())
    if kind is ObjectKind.NUMBER:
        return ObjectValue(kind, _F64.unpack_from(raw, pos)[0])
    if kind is ObjectKind.BOOL:
        return ObjectValue(kind, raw[pos] == 1)
    return ObjectValue(kind, _U64.unpack_from(raw, pos)[0])


def _level_key(level: int, bin_: int) -> bytes:
    return bytes((level,)) + bin_.to_bytes(8, "big")


def bucket_key(valid_from: int, valid_to: int | None) -> bytes:
    """The one bin that indexes ``[valid_from, valid_to)``."""
    if valid_to is None:
        return _level_key(OPEN_LEVEL, 0)
    last = max(valid_to - 1, valid_from)  # an empty interval sits at its start block
    size = BUCKET_BLOCKS
    for level in range(BUCKET_LEVELS):
        if valid_from // size == last // size:
            return _level_key(level, valid_from // size)
        size *= BUCKET_FANOUT
    return _level_key(WIDE_LEVEL, 0)


def bucket_ranges(from_block: int, to_block: int) -> Iterator[tuple[bytes, bytes]]:
    """Inclusive ``(first, last)`` bin keys a scan of ``[from_block, to_block]`` must read."""
    size = BUCKET_BLOCKS
    for level in range(BUCKET_LEVELS):
        yield _level_key(level, from_block // size), _level_key(level, to_block // size)
        size *= BUCKET_FANOUT
    for level in (WIDE_LEVEL, OPEN_LEVEL):
        yield _level_key(level, 0), _level_key(level, 0)


def index_entries(triple: TemporalTriple) -> list[IndexEntry]:
    """Every index entry that points at this version of ``triple``."""
    raw_id = id_bytes(triple.id)
    span = (block_bytes(triple.valid_from)
            + (OPEN if triple.valid_to is None else block_bytes(triple.valid_to)) + raw_id)
    subject = entity_key(triple.subject)
    predicate = triple.predicate.encode()
    target = triple.object.as_entity
    target_key = b"" if target is None else entity_key(target)
    edge = span + bytes((len(predicate),)) + predicate
    entries = [
        IndexEntry("by_subject", subject, edge + target_key),
        IndexEntry("by_predicate", predicate, span),
        IndexEntry("by_bucket", bucket_key(triple.valid_from, triple.valid_to), span),
    ]
    if target is not None:
        entries.append(IndexEntry("by_object", target_key, edge + subject))
    return entries
