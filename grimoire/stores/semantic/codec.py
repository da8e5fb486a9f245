"""Row <-> record conversion for ``grimoire_entries``, and validation of what is written.

Owns the column list, the JSON encoding of tuples/mappings/claim/source/PAD,
and the checks that make a bad record fail with a ValidationError naming the
field *before* any SQL runs (so nothing is written). It must not execute SQL.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.errors import StoreError, ValidationError
from grimoire.records import (
    PAD,
    Category,
    Claim,
    DecayClass,
    EntrySource,
    EntryStatus,
    GrimoireEntry,
    Provenance,
    Regime,
    parse_enum,
    parse_optional_enum,
)

__all__ = [
    "ENTRY_COLUMNS",
    "MAX_CONTENT_CHARS",
    "dumps",
    "entry_to_row",
    "row_to_entry",
    "validate_entry",
    "validate_vector",
    "vector_from_blob",
    "vector_to_blob",
]

MAX_CONTENT_CHARS = 32_000
MAX_ID_CHARS = 256

# Column order of grimoire_entries after ``rid``; GrimoireEntry's fields plus claim_key.
ENTRY_COLUMNS: tuple[str, ...] = (
    "id", "category", "content", "confidence", "quality_score", "decay_class", "provenance",
    "created_at", "last_accessed_at", "validated_count", "contradicted_count", "market_regime",
    "valid_from", "valid_until", "parent_episode_ids", "tags", "source", "emotional_tag",
    "strength", "status", "consecutive_low_confidence", "access_count", "strategy",
    "is_bloodstain", "dream_validated", "claim", "claim_key", "parent_entry_ids", "updated_at",
)

_INT_FIELDS = ("created_at", "last_accessed_at", "validated_count", "contradicted_count",
               "consecutive_low_confidence", "access_count", "updated_at")


def dumps(value: Any, field: str) -> str:
    """Compact JSON; NaN/inf and non-JSON values are a ValidationError on ``field``."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"is not JSON-serialisable: {exc}", field=field) from exc


def _number(value: object, field: str, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number, got {type(value).__name__}", field=field)
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError("must be finite", field=field)
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise ValidationError(f"{number} is outside [{lo}, {hi}]", field=field)
    return number


def _int(value: object, field: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValidationError(f"must be an integer, got {type(value).__name__}", field=field)
    if value < 0:
        raise ValidationError("must be >= 0", field=field)
    return int(value)


def _text(value: object, field: str, *, limit: int, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be a non-empty string", field=field)
    if len(value) > limit:
        raise ValidationError(f"longer than {limit} characters", field=field)
    return value


def _ids(value: object, field: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise ValidationError("must be a tuple of strings", field=field)
    if not all(isinstance(item, str) and item for item in value):
        raise ValidationError("must contain only non-empty strings", field=field)
    return tuple(value)


def _claim(claim: object) -> Claim | None:
    if claim is None:
        return None
    if not isinstance(claim, Claim):
        raise ValidationError("must be a Claim or None", field="claim")
    _text(claim.target, "claim.target", limit=512)
    if claim.direction not in ("higher", "lower"):
        raise ValidationError(f"{claim.direction!r} is not one of: higher, lower",
                              field="claim.direction")
    _number(claim.effect, "claim.effect")
    _number(claim.baseline, "claim.baseline")
    _number(claim.p_value, "claim.p_value", 0.0, 1.0)
    _int(claim.support, "claim.support")
    _text(claim.strategy, "claim.strategy", limit=512, optional=True)
    if claim.band_cut is not None:
        _number(claim.band_cut, "claim.band_cut")
    dumps(claim.to_dict(), "claim")
    return claim


def _pad(pad: object) -> PAD | None:
    if pad is None:
        return None
    if not isinstance(pad, PAD):
        raise ValidationError("must be a PAD or None", field="emotional_tag")
    return PAD.from_dict(pad.to_dict(), field="emotional_tag")


def _source(source: object) -> EntrySource:
    if not isinstance(source, EntrySource):
        raise ValidationError("must be an EntrySource", field="source")
    _text(source.golem_id, "source.golem_id", limit=MAX_ID_CHARS)
    _int(source.generation_number, "source.generation_number", optional=True)
    _text(source.owner_address, "source.owner_address", limit=MAX_ID_CHARS, optional=True)
    return source


def validate_entry(entry: object) -> GrimoireEntry:
    """Return ``entry`` with enum fields parsed, or raise ValidationError naming the field."""
    if not isinstance(entry, GrimoireEntry):
        raise ValidationError(f"must be a GrimoireEntry, got {type(entry).__name__}",
                              field="entry")
    _text(entry.id, "id", limit=MAX_ID_CHARS)
    _text(entry.content, "content", limit=MAX_CONTENT_CHARS)
    _number(entry.confidence, "confidence", 0.0, 1.0)
    _number(entry.quality_score, "quality_score", 0.0, 1.0)
    strength = _number(entry.strength, "strength", 0.0)
    if strength <= 0.0:
        raise ValidationError("must be > 0 (it divides the half-life)", field="strength")
    for name in _INT_FIELDS:
        _int(getattr(entry, name), name)
    valid_from = _int(entry.valid_from, "valid_from", optional=True)
    valid_until = _int(entry.valid_until, "valid_until", optional=True)
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        raise ValidationError("is before valid_from", field="valid_until")
    for name in ("parent_episode_ids", "tags", "parent_entry_ids"):
        _ids(getattr(entry, name), name)
    for name in ("is_bloodstain", "dream_validated"):
        if not isinstance(getattr(entry, name), bool):
            raise ValidationError("must be a bool", field=name)
    _text(entry.strategy, "strategy", limit=512, optional=True)
    _source(entry.source)
    return dataclasses.replace(
        entry,
        category=parse_enum(Category, entry.category, "category"),
        decay_class=parse_enum(DecayClass, entry.decay_class, "decay_class"),
        provenance=parse_enum(Provenance, entry.provenance, "provenance"),
        status=parse_enum(EntryStatus, entry.status, "status"),
        market_regime=parse_optional_enum(Regime, entry.market_regime, "market_regime"),
        emotional_tag=_pad(entry.emotional_tag),
        claim=_claim(entry.claim),
        parent_episode_ids=tuple(entry.parent_episode_ids),
        tags=tuple(entry.tags),
        parent_entry_ids=tuple(entry.parent_entry_ids),
    )


def entry_to_row(entry: GrimoireEntry) -> tuple[Any, ...]:
    """Values for ENTRY_COLUMNS of an entry that passed ``validate_entry``."""
    e = entry
    return (
        e.id, e.category.value, e.content, float(e.confidence), float(e.quality_score),
        e.decay_class.value, e.provenance.value, e.created_at, e.last_accessed_at,
        e.validated_count, e.contradicted_count,
        e.market_regime.value if e.market_regime else None, e.valid_from, e.valid_until,
        dumps(list(e.parent_episode_ids), "parent_episode_ids"), dumps(list(e.tags), "tags"),
        dumps(e.source.to_dict(), "source"),
        dumps(e.emotional_tag.to_dict(), "emotional_tag") if e.emotional_tag else None,
        float(e.strength), e.status.value, e.consecutive_low_confidence, e.access_count,
        e.strategy, int(e.is_bloodstain), int(e.dream_validated),
        dumps(e.claim.to_dict(), "claim") if e.claim else None,
        e.claim.key if e.claim else None,
        dumps(list(e.parent_entry_ids), "parent_entry_ids"), e.updated_at,
    )


def _enum_map(enum: type[StrEnum]) -> dict[str, Any]:
    return {member.value: member for member in enum}


# Decoding runs for every row a query returns, so it avoids the slow paths: enum
# members come from dicts (``Category(value)`` is ~10x slower) and the common JSON
# values ("[]", the default source) are not parsed at all.
_CATEGORY = _enum_map(Category)
_DECAY = _enum_map(DecayClass)
_PROVENANCE = _enum_map(Provenance)
_REGIME = _enum_map(Regime)
_STATUS = _enum_map(EntryStatus)
_DEFAULT_SOURCE = dumps(EntrySource().to_dict(), "source")


def _id_tuple(text: str) -> tuple[str, ...]:
    return () if text == "[]" else tuple(json.loads(text))


def row_to_entry(row: Sequence[Any]) -> GrimoireEntry:
    """The entry stored in ``row`` (ENTRY_COLUMNS order). A damaged row is a StoreError."""
    try:
        (id_, category, content, confidence, quality, decay, provenance, created, accessed,
         validated, contradicted, regime, valid_from, valid_until, episodes, tags, source,
         pad, strength, status, low_conf, access_count, strategy, bloodstain, dream, claim,
         _claim_key, parents, updated) = row
        return GrimoireEntry(
            id_, _CATEGORY[category], content, confidence, quality, _DECAY[decay],
            _PROVENANCE[provenance], created, accessed, validated, contradicted,
            _REGIME[regime] if regime else None, valid_from, valid_until,
            _id_tuple(episodes), _id_tuple(tags),
            EntrySource() if source == _DEFAULT_SOURCE else EntrySource(**json.loads(source)),
            PAD(**json.loads(pad)) if pad else None,
            strength, _STATUS[status], low_conf, access_count, strategy, bool(bloodstain),
            bool(dream), Claim.from_dict(json.loads(claim)) if claim else None,
            _id_tuple(parents), updated,
        )
    except (KeyError, TypeError, ValueError) as exc:
        ident = row[0] if row else "?"
        raise StoreError(f"semantic store: entry {ident!r} is damaged: {exc}") from exc


def validate_vector(vector: object, dim: int, field: str = "embedding") -> npt.NDArray[np.float32]:
    """A finite, non-zero vector of ``dim`` numbers, returned L2-normalised as float32."""
    try:
        array = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be a vector of {dim} numbers", field=field) from exc
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.shape != (dim,):
        raise ValidationError(f"must have shape ({dim},), got {array.shape}", field=field)
    if not np.isfinite(array).all():
        raise ValidationError("contains NaN or infinity", field=field)
    norm = float(np.linalg.norm(array))
    if norm == 0.0:
        raise ValidationError("is the zero vector (no direction to compare)", field=field)
    return (array / norm).astype(np.float32)


def vector_to_blob(vector: npt.NDArray[np.float32]) -> bytes:
    return vector.astype("<f4", copy=False).tobytes()


def vector_from_blob(blob: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)
