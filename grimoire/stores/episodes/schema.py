"""The episodic store's on-disk row format: Arrow schema, its metadata, and conversions.

Owns the one definition of an episode row (SPEC §2 plus the store's ``seq``),
the schema version and embedding identity kept in the Arrow schema metadata,
strict validation of an ``Episode`` before it is accepted (so that a row that
was acknowledged can always be converted and written later), and the
conversions Episode ⇄ Arrow ⇄ journal JSON. It does no I/O.

Representation choices (measured on LanceDB 0.40, see the store docstring):
``metrics`` and ``prediction`` are ``map<string, float64>``: LanceDB filters
them (``map_extract(metrics, 'gas_gwei')[1] > 30``), whereas its SQL has no
usable JSON function for a JSON string column. ``seq`` is the store's own
append counter: it orders rows when the index is rebuilt on open.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from grimoire.errors import (
    EmbeddingMismatchError,
    SchemaVersionError,
    StoreError,
    ValidationError,
)
from grimoire.records import Episode, EpisodeType, Importance, Outcome, Regime

__all__ = [
    "ADDED_FIELDS",
    "EPISODE_SCHEMA_VERSION",
    "META_DIM",
    "META_MODEL",
    "META_VERSION",
    "V2_FIELDS",
    "V3_FIELDS",
    "check_identity",
    "check_k",
    "check_vectors",
    "episode_from_json",
    "episode_to_json",
    "episodes_from_arrow",
    "episodes_to_arrow",
    "row_schema",
    "validate_episode",
]

# 2: the optional ``thread`` and ``actor`` columns (after ``vector``); 3: ``marks`` (after them)
EPISODE_SCHEMA_VERSION = 3
META_VERSION = b"grimoire.schema_version"
META_MODEL = b"grimoire.embedding_model"
META_DIM = b"grimoire.embedding_dim"

MAX_ID_CHARS = 128
_INT64_MAX = 2**63 - 1
_NUMBER_MAP = pa.map_(pa.string(), pa.float64())

Matrix = npt.NDArray[np.float32]

# Columns kept in memory for reads; the vector lives in the index matrix instead.
_ROW_FIELDS: tuple[pa.Field, ...] = (
    pa.field("id", pa.string(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("outcome", pa.string(), nullable=False),
    pa.field("ref", pa.string()),
    pa.field("tool", pa.string()),
    pa.field("chain", pa.string()),
    pa.field("token_pair", pa.string()),
    pa.field("importance", pa.string(), nullable=False),
    pa.field("tick_id", pa.int64()),
    pa.field("regime", pa.string()),
    pa.field("strategy", pa.string()),
    pa.field("actions", pa.list_(pa.string())),
    pa.field("emotional_tag", pa.string()),
    pa.field("gain", pa.float64()),
    pa.field("valid_from", pa.int64()),
    pa.field("valid_until", pa.int64()),
    pa.field("metrics", _NUMBER_MAP),
    pa.field("prediction", _NUMBER_MAP),
    pa.field("causal_hint", pa.string()),
)
# Added by schema version 2, after the vector column: a version-1 table gains them (all
# null) with LanceDB's add_columns, which appends, so old and new tables have one order.
V2_FIELDS: tuple[pa.Field, ...] = (
    pa.field("thread", pa.string()),
    pa.field("actor", pa.string()),
)
# Added by schema version 3: what the write path marked in the text (``untrusted:instructions``
# when it instructs a model, ``grimoire.guard.instructions``); null when nothing was marked.
V3_FIELDS: tuple[pa.Field, ...] = (
    pa.field("marks", pa.list_(pa.string())),
)
# The columns each migration appends, oldest first (LanceDB's add_columns appends).
ADDED_FIELDS: tuple[tuple[pa.Field, ...], ...] = (V2_FIELDS, V3_FIELDS)
ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in (*_ROW_FIELDS, *V2_FIELDS, *V3_FIELDS))
_OPTIONAL_STR = ("ref", "tool", "chain", "token_pair", "strategy", "emotional_tag", "causal_hint")
_OPTIONAL_INT = ("tick_id", "valid_from", "valid_until")


def row_schema(*, model_id: str, dim: int, with_vector: bool = True) -> pa.Schema:
    """The Arrow schema of the ``episodes`` table, identity in its metadata."""
    fields = list(_ROW_FIELDS)
    if with_vector:
        fields.append(pa.field("vector", pa.list_(pa.float32(), dim), nullable=False))
    fields.extend(V2_FIELDS)
    fields.extend(V3_FIELDS)
    metadata = {
        META_VERSION: str(EPISODE_SCHEMA_VERSION).encode(),
        META_MODEL: model_id.encode(),
        META_DIM: str(dim).encode(),
    }
    return pa.schema(fields, metadata=metadata)


def check_identity(
    found: Mapping[bytes, bytes] | None, *, model_id: str, dim: int, where: str
) -> None:
    """Refuse a store built with another model/dimension or by a newer schema."""
    meta = dict(found or {})
    try:
        version = int(meta[META_VERSION])
        found_model = meta[META_MODEL].decode()
        found_dim = int(meta[META_DIM])
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise StoreError(
            f"{where} has no readable Grimoire schema metadata; it was not created by "
            "Grimoire's episodic store (move it aside and start a new data directory)"
        ) from exc
    if version > EPISODE_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} was written by episode schema version {version} but this Grimoire "
            f"understands up to version {EPISODE_SCHEMA_VERSION}: upgrade Grimoire "
            "(pip install -U grimoire-memory) to open it; nothing was changed"
        )
    if version < 1:
        raise StoreError(f"{where} has an invalid schema version {version}")
    if found_model != model_id or found_dim != dim:
        raise EmbeddingMismatchError(
            f"{where} was built with embedding model {found_model!r} (dim {found_dim}) "
            f"but the configuration uses {model_id!r} (dim {dim}): set embedding.model "
            f"and embedding.dim back to {found_model!r}/{found_dim}, or use a new data "
            "directory for the new model (vectors of different models cannot be mixed)"
        )


# ---------------------------------------------------------------- validation


def _check_str(value: object, name: str, *, optional: bool, limit: int | None = None) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=name)
    if limit is not None and len(value) > limit:
        raise ValidationError(f"longer than {limit} characters", field=name)
    _check_utf8(value, name)


def _check_utf8(value: str, name: str) -> None:
    # Arrow and SQLite store UTF-8: a lone surrogate would fail only at flush time.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError("is not valid Unicode text (lone surrogate)", field=name) from exc


def _check_int(value: object, name: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    # Plain int only: numpy scalars would not survive the JSON journal.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be an integer, got {type(value).__name__}", field=name)
    if not 0 <= value <= _INT64_MAX:
        raise ValidationError("must be between 0 and 2**63-1", field=name)


def _check_float(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"must be a number, got {type(value).__name__}", field=name)
    if not math.isfinite(value):
        raise ValidationError("must be finite", field=name)


def _check_map(value: object, name: str) -> None:
    if not isinstance(value, Mapping):
        raise ValidationError("must be a mapping of name: number", field=name)
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ValidationError("keys must be non-empty strings", field=name)
        _check_utf8(key, name)
        _check_float(item, f"{name}.{key}")


def _check_enum(value: object, enum: type[Any], name: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, enum):
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(f"must be a {enum.__name__} ({allowed})", field=name)


def validate_episode(ep: object, where: str = "episodes") -> Episode:
    """Check every field so the row can always be journaled, converted and written.

    An acknowledged episode must never fail later at flush time, so this is
    stricter than the dataclass: types are checked exactly, numbers are finite,
    integers fit int64.
    """
    if not isinstance(ep, Episode):
        raise ValidationError(f"must be an Episode, got {type(ep).__name__}", field=where)
    _check_str(ep.id, "id", optional=False, limit=MAX_ID_CHARS)
    if not ep.id:
        raise ValidationError("must be a non-empty string", field="id")
    _check_str(ep.text, "text", optional=False)
    if not ep.text.strip():
        raise ValidationError("must be a non-empty string", field="text")
    _check_enum(ep.type, EpisodeType, "type")
    _check_enum(ep.outcome, Outcome, "outcome")
    _check_enum(ep.importance, Importance, "importance")
    _check_enum(ep.regime, Regime, "regime", optional=True)
    _check_int(ep.timestamp, "timestamp", optional=False)
    for name in _OPTIONAL_INT:
        _check_int(getattr(ep, name), name, optional=True)
    for name in _OPTIONAL_STR:
        _check_str(getattr(ep, name), name, optional=True)
    if not isinstance(ep.actions, tuple | list) or not all(isinstance(a, str) for a in ep.actions):
        raise ValidationError("must be a tuple of strings", field="actions")
    for action in ep.actions:
        _check_utf8(action, "actions")
    if ep.gain is not None:
        _check_float(ep.gain, "gain")
    _check_map(ep.metrics, "metrics")
    _check_map(ep.prediction, "prediction")
    if not isinstance(ep.marks, tuple | list) or not all(isinstance(m, str) for m in ep.marks):
        raise ValidationError("must be a tuple of strings", field="marks")
    for mark in ep.marks:
        _check_utf8(mark, "marks")
    return ep


_NORM_TOLERANCE = 1e-3


def check_vectors(vectors: object, *, rows: int, dim: int, name: str) -> Matrix:
    """A float32 (rows × dim) copy, finite, L2-normalised (rows off by > 1e-3 rescaled)."""
    if not isinstance(vectors, np.ndarray):
        raise ValidationError(f"must be a numpy array, got {type(vectors).__name__}", field=name)
    if vectors.dtype != np.float32:
        raise ValidationError(f"must have dtype float32, got {vectors.dtype}", field=name)
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise ValidationError(f"must have shape (n, {dim}), got {vectors.shape}", field=name)
    if vectors.shape[0] != rows:
        raise ValidationError(
            f"has {vectors.shape[0]} rows for {rows} episodes (count mismatch)", field=name
        )
    if not np.isfinite(vectors).all():
        raise ValidationError("contains NaN or infinite values", field=name)
    out = np.array(vectors, dtype=np.float32, copy=True)
    norms = np.linalg.norm(out, axis=1)
    if (norms == 0).any():
        raise ValidationError("contains an all-zero vector (no direction)", field=name)
    off = np.abs(norms - 1.0) > _NORM_TOLERANCE
    if off.any():
        out[off] /= norms[off, None]
    return out


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError("must be a non-negative integer", field="k")
    return k


# ---------------------------------------------------------------- conversions


def _columns(episodes: Sequence[Episode], seqs: Sequence[int]) -> dict[str, list[Any]]:
    return {
        "id": [e.id for e in episodes],
        "seq": [int(s) for s in seqs],
        "text": [e.text for e in episodes],
        "type": [e.type.value for e in episodes],
        "timestamp": [int(e.timestamp) for e in episodes],
        "outcome": [e.outcome.value for e in episodes],
        **{n: [getattr(e, n) for e in episodes] for n in ("ref", "tool", "chain", "token_pair")},
        "importance": [e.importance.value for e in episodes],
        "tick_id": [None if e.tick_id is None else int(e.tick_id) for e in episodes],
        "regime": [e.regime.value if e.regime else None for e in episodes],
        "strategy": [e.strategy for e in episodes],
        "actions": [list(e.actions) for e in episodes],
        "emotional_tag": [e.emotional_tag for e in episodes],
        "gain": [None if e.gain is None else float(e.gain) for e in episodes],
        "valid_from": [None if e.valid_from is None else int(e.valid_from) for e in episodes],
        "valid_until": [None if e.valid_until is None else int(e.valid_until) for e in episodes],
        "metrics": [[(k, float(v)) for k, v in e.metrics.items()] for e in episodes],
        "prediction": [[(k, float(v)) for k, v in e.prediction.items()] for e in episodes],
        "causal_hint": [e.causal_hint for e in episodes],
        "thread": [e.thread for e in episodes],
        "actor": [e.actor for e in episodes],
        "marks": [list(e.marks) or None for e in episodes],  # null: dropped when all null
    }


def episodes_to_arrow(
    episodes: Sequence[Episode], seqs: Sequence[int], vectors: Matrix | None, schema: pa.Schema
) -> pa.Table:
    """Rows for LanceDB (``vectors`` given) or for the in-memory row store (no vector)."""
    columns: dict[str, Any] = _columns(episodes, seqs)
    if vectors is not None:
        dim = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, dim)
    else:
        schema = pa.schema([f for f in schema if f.name != "vector"], metadata=schema.metadata)
    return pa.Table.from_pydict(columns, schema=schema)


# Dict lookups: several times faster than calling the enum class, on every read.
_TYPE_OF = {m.value: m for m in EpisodeType}
_OUTCOME_OF = {m.value: m for m in Outcome}
_IMPORTANCE_OF = {m.value: m for m in Importance}
_REGIME_OF = {m.value: m for m in Regime}


def _episode_from_row(row: Mapping[str, Any]) -> Episode:
    regime = row["regime"]
    return Episode(
        id=row["id"],
        text=row["text"],
        type=_TYPE_OF[row["type"]],
        timestamp=row["timestamp"],
        outcome=_OUTCOME_OF[row["outcome"]],
        ref=row["ref"],
        tool=row["tool"],
        chain=row["chain"],
        token_pair=row["token_pair"],
        importance=_IMPORTANCE_OF[row["importance"]],
        tick_id=row["tick_id"],
        regime=_REGIME_OF[regime] if regime is not None else None,
        strategy=row["strategy"],
        actions=tuple(row["actions"] or ()),
        emotional_tag=row["emotional_tag"],
        gain=None if row["gain"] is None else float(row["gain"]),
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        metrics={k: float(v) for k, v in row["metrics"] or ()},
        prediction={k: float(v) for k, v in row["prediction"] or ()},
        causal_hint=row["causal_hint"],
        thread=row.get("thread"),  # absent from version-1 journal rows
        actor=row.get("actor"),
        marks=tuple(row.get("marks") or ()),  # absent before version 3
    )


def episodes_from_arrow(table: pa.Table,
                        columns: Mapping[str, Sequence[Any]] | None = None) -> list[Episode]:
    """Episodes from Arrow rows (any column order; ``seq``/``vector`` ignored); ``columns``:
    values for fields the table leaves out, one per row."""
    rows = table.to_pylist()
    for name, values in (columns or {}).items():
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return [_episode_from_row(row) for row in rows]


def episode_to_json(ep: Episode) -> str:
    """The journal's form of an episode: ``Episode.to_dict`` as compact JSON.

    Python's JSON writes floats with ``repr``, which round-trips float64 exactly.
    """
    return json.dumps(ep.to_dict(), separators=(",", ":"), allow_nan=False)


def episode_from_json(text: str) -> Episode:
    row = json.loads(text)
    row["metrics"] = list(row["metrics"].items())
    row["prediction"] = list(row["prediction"].items())
    return _episode_from_row(row)
