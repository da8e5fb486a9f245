"""Records of the bi-temporal knowledge graph (SPEC §10).

Owns the shapes the graph store speaks: entity kinds and references,
predicates, tagged object values, temporal triples, assertion requests
(``Fact``) and the results of assertions and traversals; plus their
validation from untrusted input (``parse_*``, ``from_dict``) and their
JSON-safe ``to_dict`` forms for the socket.

It must not touch storage or the clock, and imports nothing from Grimoire but
the error tree: the temporal rules (closing, reinforcing, what was known
when) belong to ``grimoire.stores.graph.store``.

The four times of a triple:

- ``valid_from`` / ``valid_to``: block numbers, the half-open interval
  ``[valid_from, valid_to)`` in which the fact held on chain; ``valid_to`` is
  None while it still holds. ``valid_to == valid_from`` is an empty interval:
  a fact corrected at the very block it started.
- ``recorded_at`` / ``superseded_at``: unix ms (transaction time), when the
  store learned the fact and when it stopped believing the fact was still
  open (the transaction that closed it); None while open.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from grimoire.errors import ValidationError

__all__ = [
    "CUSTOM_PREFIX",
    "DEFAULT_CONFIDENCE",
    "MAX_BLOCK",
    "AssertResult",
    "Direction",
    "EntityKind",
    "EntityRef",
    "Fact",
    "Neighbor",
    "ObjectKind",
    "ObjectValue",
    "Predicate",
    "TemporalTriple",
    "parse_block",
    "parse_confidence",
    "parse_direction",
    "parse_entity_ref",
    "parse_fact",
    "parse_hops",
    "parse_limit",
    "parse_object",
    "parse_predicate",
    "parse_time",
    "parse_triple_id",
]

MAX_BLOCK = 2**63 - 1  # leaves the top of u64 free for the store's "open" sentinel
MAX_TIME_MS = 2**63 - 1
MAX_ID_BYTES = 255  # an entity key (kind byte + id) must fit LMDB's 511-byte key limit
MAX_STRING_BYTES = 4096
MAX_SOURCE_CHARS = 128
MAX_HOPS = 16
CUSTOM_PREFIX = "custom:"
DEFAULT_CONFIDENCE = 0.5  # SPEC §4: 0.5 is the neutral starting confidence elsewhere too

_CUSTOM_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Direction: TypeAlias = Literal["out", "in", "both"]
_DIRECTIONS: tuple[Direction, ...] = ("out", "in", "both")


class EntityKind(StrEnum):
    CONTRACT = "contract"
    TOKEN = "token"
    POOL = "pool"
    ORACLE = "oracle"
    VAULT = "vault"
    GOVERNANCE = "governance"
    ADDRESS_CLUSTER = "address_cluster"
    BRIDGE = "bridge"


class Predicate(StrEnum):
    """The built-in relationship types; ``custom:<name>`` covers the rest (``parse_predicate``)."""

    DEPLOYED_BY = "deployed_by"
    TOKEN_FLOW = "token_flow"
    ORACLE_DEPENDENCY = "oracle_dependency"
    PRICE_CORRELATION = "price_correlation"
    GOVERNANCE_CONTROL = "governance_control"
    COLLATERAL_BACKING = "collateral_backing"
    HAS_POSITION = "has_position"
    IS_ROUTER_FOR = "is_router_for"


_ENTITY_KIND_NAMES = tuple(k.value for k in EntityKind)  # a tuple: `in` must not hash input


class ObjectKind(StrEnum):
    ENTITY = "entity"
    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"
    BLOCK = "block"


# -- validation of untrusted values ------------------------------------------------------


def parse_block(value: object, field: str = "block") -> int:
    """A block number: an int in [0, 2**63 - 1] (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be an integer block number, got {type(value).__name__}",
                              field=field)
    if value < 0:
        raise ValidationError(f"must be >= 0, got {value}", field=field)
    if value > MAX_BLOCK:
        raise ValidationError(f"must be <= {MAX_BLOCK}, got {value}", field=field)
    return value


def parse_time(value: object, field: str = "time") -> int:
    """A transaction time: unix milliseconds, an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be integer unix milliseconds, got {type(value).__name__}",
                              field=field)
    if not 0 <= value <= MAX_TIME_MS:
        raise ValidationError(f"must be in [0, {MAX_TIME_MS}], got {value}", field=field)
    return value


def parse_confidence(value: object, field: str = "confidence") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number in [0, 1], got {type(value).__name__}",
                              field=field)
    number = float(value)
    if math.isnan(number):
        raise ValidationError("must be a number in [0, 1], got NaN", field=field)
    if not 0.0 <= number <= 1.0:
        raise ValidationError(f"must be in [0, 1], got {number}", field=field)
    return number


def parse_triple_id(value: object, field: str = "id") -> str:
    """A triple id in canonical UUID form."""
    if not isinstance(value, str) or not value:
        raise ValidationError("must be a non-empty UUID string", field=field)
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValidationError(f"not a UUID: {value[:64]!r}", field=field) from None


def parse_direction(value: object, field: str = "direction") -> Direction:
    for direction in _DIRECTIONS:
        if value == direction:
            return direction
    raise ValidationError(f"must be one of out, in, both; got {value!r}", field=field)


def parse_predicate(value: object, field: str = "predicate") -> str:
    """A built-in predicate name or ``custom:<name>`` (letters, digits, ``_.-``, ≤ 64)."""
    if isinstance(value, Predicate):
        return value.value
    if not isinstance(value, str) or not value:
        raise ValidationError("must be a non-empty string", field=field)
    if value.startswith(CUSTOM_PREFIX):
        if not _CUSTOM_NAME.fullmatch(value[len(CUSTOM_PREFIX):]):
            raise ValidationError(
                f"custom predicate {value[:80]!r}: the name after 'custom:' must be 1-64 "
                "letters, digits, '_', '.' or '-'", field=field)
        return value
    try:
        return Predicate(value).value
    except ValueError:
        known = ", ".join(p.value for p in Predicate)
        raise ValidationError(f"unknown predicate {value[:80]!r}; expected one of {known} "
                              "or custom:<name>", field=field) from None


def _parse_text(value: object, field: str, max_bytes: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=field)
    if not value.strip():
        raise ValidationError("must not be empty", field=field)
    if len(value.encode()) > max_bytes:
        raise ValidationError(f"must be at most {max_bytes} bytes of UTF-8", field=field)
    return value


def _parse_entity_id(value: object, field: str) -> str:
    text = _parse_text(value, field, MAX_ID_BYTES)
    if _CONTROL.search(text):
        raise ValidationError("must not contain control characters", field=field)
    # EIP-55 checksum case is presentation only: one address must be one node.
    return text.lower() if _HEX_ADDRESS.fullmatch(text) else text


def _parse_kind(value: object, field: str) -> EntityKind:
    if isinstance(value, EntityKind):
        return value
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return EntityKind(value)
    except ValueError:
        known = ", ".join(k.value for k in EntityKind)
        raise ValidationError(f"unknown entity kind {str(value)[:80]!r}; expected one of {known}",
                              field=field) from None


def parse_entity_ref(value: object, field: str = "subject") -> EntityRef:
    """An ``EntityRef`` or ``{"kind", "id"}``, validated; hex addresses are lower-cased."""
    kind: object
    id_: object
    if isinstance(value, EntityRef):
        kind, id_ = value.kind, value.id
    elif isinstance(value, Mapping):
        _no_extra_keys(value, {"kind", "id"}, field)
        kind, id_ = value.get("kind"), value.get("id")
    else:
        raise ValidationError('must be an entity {"kind": ..., "id": ...}', field=field)
    return EntityRef(_parse_kind(kind, f"{field}.kind"), _parse_entity_id(id_, f"{field}.id"))


def parse_object(value: object, field: str = "object") -> ObjectValue:
    """An ``ObjectValue`` or its dict form ``{"kind": <object kind>, "value": ...}``.

    An entity may also be given bare, ``{"kind": "pool", "id": "0x…"}``: entity
    kinds and object kinds are disjoint names, so this is unambiguous.
    """
    if isinstance(value, ObjectValue):
        kind: object = value.kind
        payload: object = value.value
    elif isinstance(value, Mapping) and value.get("kind") in _ENTITY_KIND_NAMES:
        return ObjectValue(ObjectKind.ENTITY, parse_entity_ref(value, f"{field}.value"))
    elif isinstance(value, Mapping):
        _no_extra_keys(value, {"kind", "value"}, field)
        kind, payload = value.get("kind"), value.get("value")
    else:
        raise ValidationError('must be {"kind": entity|string|number|bool|block, "value": ...}',
                              field=field)
    try:
        if not isinstance(kind, str):
            raise ValueError(kind)
        object_kind = ObjectKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in ObjectKind)
        raise ValidationError(f"unknown object kind {str(kind)[:80]!r}; expected one of {known}",
                              field=f"{field}.kind") from None
    return ObjectValue(object_kind, _parse_payload(object_kind, payload, f"{field}.value"))


def _parse_payload(kind: ObjectKind, payload: object, field: str) -> ObjectPayload:
    if kind is ObjectKind.ENTITY:
        return parse_entity_ref(payload, field)
    if kind is ObjectKind.STRING:
        if not isinstance(payload, str):
            raise ValidationError(f"a string object needs a string, got {type(payload).__name__}",
                                  field=field)
        if len(payload.encode()) > MAX_STRING_BYTES:
            raise ValidationError(f"must be at most {MAX_STRING_BYTES} bytes of UTF-8",
                                  field=field)
        return payload
    if kind is ObjectKind.NUMBER:
        if isinstance(payload, bool) or not isinstance(payload, int | float):
            raise ValidationError(f"a number object needs a number, got {type(payload).__name__}",
                                  field=field)
        number = float(payload)
        if not math.isfinite(number):
            raise ValidationError("must be a finite number", field=field)
        return number
    if kind is ObjectKind.BOOL:
        if not isinstance(payload, bool):
            raise ValidationError(f"a bool object needs true or false, got {payload!r:.40}",
                                  field=field)
        return payload
    return parse_block(payload, field)


def _no_extra_keys(value: Mapping[Any, Any], allowed: set[str], field: str) -> None:
    extra = sorted(str(k) for k in value if k not in allowed)
    if extra:
        raise ValidationError(f"unknown keys {', '.join(extra)}", field=field)


def _parse_optional_source(value: object, field: str = "source_episode") -> str | None:
    if value is None:
        return None
    return _parse_text(value, field, MAX_SOURCE_CHARS)


def _parse_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"must be an integer >= 1, got {value!r:.40}", field=field)
    return value


# -- records ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntityRef:
    kind: EntityKind
    id: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "id": self.id}

    @classmethod
    def from_dict(cls, data: object, field: str = "entity") -> EntityRef:
        return parse_entity_ref(data, field)


ObjectPayload: TypeAlias = EntityRef | str | float | bool | int


@dataclass(frozen=True, slots=True)
class ObjectValue:
    """What a triple points at. ``kind`` tags the payload, so 1.0, True and block 1 differ.

    Build with the constructors (``ObjectValue.entity(ref)``, ``.number(1.5)``, …);
    the store validates whatever it is given.
    """

    kind: ObjectKind
    value: ObjectPayload

    @classmethod
    def entity(cls, ref: EntityRef) -> ObjectValue:
        return cls(ObjectKind.ENTITY, ref)

    @classmethod
    def string(cls, text: str) -> ObjectValue:
        return cls(ObjectKind.STRING, text)

    @classmethod
    def number(cls, number: float) -> ObjectValue:
        return cls(ObjectKind.NUMBER, float(number))

    @classmethod
    def boolean(cls, flag: bool) -> ObjectValue:
        return cls(ObjectKind.BOOL, flag)

    @classmethod
    def block(cls, block: int) -> ObjectValue:
        return cls(ObjectKind.BLOCK, block)

    @property
    def as_entity(self) -> EntityRef | None:
        return self.value if isinstance(self.value, EntityRef) else None

    def to_dict(self) -> dict[str, Any]:
        value = self.value.to_dict() if isinstance(self.value, EntityRef) else self.value
        return {"kind": self.kind.value, "value": value}

    @classmethod
    def from_dict(cls, data: object, field: str = "object") -> ObjectValue:
        return parse_object(data, field)


@dataclass(frozen=True, slots=True)
class TemporalTriple:
    """One fact as it stands in one state of knowledge (see the module docstring for the times)."""

    id: str
    subject: EntityRef
    predicate: str
    object: ObjectValue
    valid_from: int
    valid_to: int | None
    recorded_at: int
    superseded_at: int | None
    source_episode: str | None
    confidence: float
    evidence_count: int

    @property
    def is_open(self) -> bool:
        """True while no ``valid_to`` is known: as far as this version knows, it still holds."""
        return self.valid_to is None

    def valid_at(self, block: int) -> bool:
        return self.valid_from <= block and (self.valid_to is None or block < self.valid_to)

    def overlaps(self, from_block: int, to_block: int) -> bool:
        """True if ``[valid_from, valid_to)`` meets the closed range ``[from_block, to_block]``."""
        if self.valid_from > to_block:
            return False
        return self.valid_to is None or (self.valid_to > from_block
                                         and self.valid_to > self.valid_from)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subject": self.subject.to_dict(),
            "predicate": self.predicate,
            "object": self.object.to_dict(),
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "recorded_at": self.recorded_at,
            "superseded_at": self.superseded_at,
            "source_episode": self.source_episode,
            "confidence": self.confidence,
            "evidence_count": self.evidence_count,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TemporalTriple:
        """Rebuild a triple from ``to_dict`` output, checking every field and the time order."""
        _no_extra_keys(data, set(_TRIPLE_FIELDS), "triple")
        missing = [name for name in _TRIPLE_FIELDS if name not in data]
        if missing:
            raise ValidationError("is required", field=missing[0])
        valid_from = parse_block(data["valid_from"], "valid_from")
        valid_to = _optional(parse_block, data["valid_to"], "valid_to")
        if valid_to is not None and valid_to < valid_from:
            raise ValidationError(f"{valid_to} is before valid_from {valid_from}", field="valid_to")
        recorded_at = parse_time(data["recorded_at"], "recorded_at")
        superseded_at = _optional(parse_time, data["superseded_at"], "superseded_at")
        if (valid_to is None) != (superseded_at is None):
            raise ValidationError("valid_to and superseded_at are set together, when a triple "
                                  "is closed", field="superseded_at")
        if superseded_at is not None and superseded_at < recorded_at:
            raise ValidationError(f"{superseded_at} is before recorded_at {recorded_at}",
                                  field="superseded_at")
        return cls(
            id=parse_triple_id(data["id"], "id"),
            subject=parse_entity_ref(data["subject"], "subject"),
            predicate=parse_predicate(data["predicate"], "predicate"),
            object=parse_object(data["object"], "object"),
            valid_from=valid_from,
            valid_to=valid_to,
            recorded_at=recorded_at,
            superseded_at=superseded_at,
            source_episode=_parse_optional_source(data["source_episode"]),
            confidence=parse_confidence(data["confidence"], "confidence"),
            evidence_count=_parse_count(data["evidence_count"], "evidence_count"),
        )


_TRIPLE_FIELDS = tuple(TemporalTriple.__dataclass_fields__)


def _optional(parse: Any, value: object, field: str) -> Any:
    return None if value is None else parse(value, field)


@dataclass(frozen=True, slots=True)
class Fact:
    """A request to assert a triple: what ``assert_fact`` takes, one per item of ``assert_many``."""

    subject: EntityRef
    predicate: str
    object: ObjectValue
    valid_from: int
    source_episode: str | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def validated(self, prefix: str = "") -> Fact:
        """This fact checked and normalised; ``prefix`` is put before field names in errors."""
        return Fact(
            subject=parse_entity_ref(self.subject, f"{prefix}subject"),
            predicate=parse_predicate(self.predicate, f"{prefix}predicate"),
            object=parse_object(self.object, f"{prefix}object"),
            valid_from=parse_block(self.valid_from, f"{prefix}valid_from"),
            source_episode=_parse_optional_source(self.source_episode,
                                                  f"{prefix}source_episode"),
            confidence=parse_confidence(self.confidence, f"{prefix}confidence"),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], prefix: str = "") -> Fact:
        """From socket params (subject, predicate, object, valid_from, source_episode?, …)."""
        _no_extra_keys(data, set(cls.__dataclass_fields__), prefix.rstrip(".") or "params")
        for name in ("subject", "predicate", "object", "valid_from"):
            if name not in data:
                raise ValidationError("is required", field=f"{prefix}{name}")
        return cls(
            subject=data["subject"], predicate=data["predicate"], object=data["object"],
            valid_from=data["valid_from"], source_episode=data.get("source_episode"),
            confidence=data.get("confidence", DEFAULT_CONFIDENCE),
        ).validated(prefix)


@dataclass(frozen=True, slots=True)
class AssertResult:
    """``id`` of the asserted (or reinforced) triple and the ids it closed."""

    id: str
    closed: tuple[str, ...] = ()
    reinforced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "closed": list(self.closed), "reinforced": self.reinforced}


@dataclass(frozen=True, slots=True)
class Neighbor:
    """An entity reached by ``k_hop_neighbors``: its hop distance and the edge that reached it."""

    entity: EntityRef
    hops: int
    predicate: str
    direction: Literal["out", "in"]

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity.to_dict(), "hops": self.hops,
                "predicate": self.predicate, "direction": self.direction}


def parse_fact(value: object, prefix: str = "") -> Fact:
    """A ``Fact`` or its dict form, validated; ``prefix`` goes before field names in errors."""
    if isinstance(value, Fact):
        return value.validated(prefix)
    if isinstance(value, Mapping):
        return Fact.from_dict(value, prefix)
    raise ValidationError("must be a fact {subject, predicate, object, valid_from, ...}",
                          field=prefix.rstrip(".") or "fact")


def parse_hops(value: object, field: str = "max_hops") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_HOPS:
        raise ValidationError(f"must be an integer in [0, {MAX_HOPS}]", field=field)
    return value


def parse_limit(value: object, field: str = "limit") -> int:
    """A result limit; None means no limit."""
    if value is None:
        return 2**63
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError("must be a positive integer or null", field=field)
    return value
