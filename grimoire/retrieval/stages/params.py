"""The ``retrieve`` parameters (API.md) validated into one frozen request.

Every bad value raises ValidationError naming its field before anything is
read or written; unknown parameters are refused (a typo such as ``kind``
for ``kinds`` must not be silently ignored). Must not touch a store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grimoire.config import RetrievalConfig
from grimoire.errors import ValidationError
from grimoire.records import PAD, Category, Regime, parse_enum, parse_optional_enum
from grimoire.records.text import require_unicode
from grimoire.retrieval.stages.mentions import parse_entities

__all__ = ["FORMATS", "KINDS", "MODES", "PARAMS", "RetrieveRequest", "parse_request"]

KINDS: tuple[str, ...] = ("episode", "entry")
MODES = ("deciding", "browse", "auto")
FORMATS = ("items", "context")
PARAMS = frozenset({
    "query", "k", "max_tokens", "kinds", "categories", "regime", "strategy", "min_confidence",
    "event_id", "entities", "mood", "mode", "at", "format", "thread", "actor", "explain",
    "summaries",
})
MAX_QUERY_CHARS = 8_000
MAX_K = 100
MAX_TOKENS = 100_000


@dataclass(frozen=True, slots=True)
class RetrieveRequest:
    query: str
    k: int
    max_tokens: int
    kinds: tuple[str, ...] = KINDS
    categories: tuple[Category, ...] | None = None
    regime: Regime | None = None
    strategy: str | None = None
    min_confidence: float | None = None
    event_id: str | None = None
    entities: tuple[str, ...] = ()  # mention keys ("token:WETH")
    mood: PAD | None = None
    mode: str = "deciding"
    at: int | None = None
    format: str = "items"
    thread: str | None = None  # episodes of this thread only (entries have none: unaffected)
    actor: str | None = None  # episodes by this actor only
    # The full factor breakdown, backend ranks and trace in the answer; off: each item's
    # factors as plain values (the socket's default: most callers never read the rest)
    explain: bool = True
    # The curator's L1/L2 summaries among the entries (false: rules, insights, links only)
    summaries: bool = True


def _int(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be an integer, got {type(value).__name__}", field=field)
    if not low <= value <= high:
        raise ValidationError(f"must be in [{low}, {high}], got {value}", field=field)
    return value


def _choice(value: object, allowed: tuple[str, ...], field: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"{value!r} is not one of: {', '.join(allowed)}", field=field)
    return value


def _list(value: object, field: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ValidationError("must be a list", field=field)
    return list(value)


def parse_request(params: Mapping[str, Any], cfg: RetrievalConfig) -> RetrieveRequest:
    """Validate untrusted ``retrieve`` params against the config's defaults."""
    if not isinstance(params, Mapping):
        raise ValidationError("params must be an object", field="params")
    unknown = set(params) - PARAMS
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    query = params.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("is required and must be a non-empty string", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"longer than {MAX_QUERY_CHARS} characters", field="query")
    require_unicode(query, "query")
    k = _int(params.get("k", cfg.default_k), "k", 1, MAX_K)
    max_tokens = _int(params.get("max_tokens", cfg.max_tokens), "max_tokens", 1, MAX_TOKENS)
    kinds_raw = params.get("kinds")
    kinds: tuple[str, ...] = KINDS
    if kinds_raw is not None:
        chosen = [_choice(v, KINDS, "kinds") for v in _list(kinds_raw, "kinds")]
        if not chosen:
            raise ValidationError("must name at least one of: episode, entry", field="kinds")
        kinds = tuple(kind for kind in KINDS if kind in chosen)
    categories_raw = params.get("categories")
    categories = None
    if categories_raw is not None:
        categories = tuple(dict.fromkeys(
            parse_enum(Category, v, "categories") for v in _list(categories_raw, "categories")))
        if not categories:
            raise ValidationError("must not be empty (omit it for every category)",
                                  field="categories")
    strategy = params.get("strategy")
    if strategy is not None and (not isinstance(strategy, str) or not strategy
                                 or len(strategy) > 512):
        raise ValidationError("must be a non-empty string of <= 512 chars", field="strategy")
    min_conf = params.get("min_confidence")
    if min_conf is not None:
        if isinstance(min_conf, bool) or not isinstance(min_conf, int | float) or not (
                math.isfinite(min_conf) and 0.0 <= min_conf <= 1.0):
            raise ValidationError("must be a number in [0, 1]", field="min_confidence")
        min_conf = float(min_conf)
    event_id = params.get("event_id")
    if event_id is not None and (not isinstance(event_id, str) or not event_id
                                 or len(event_id) > 256):
        raise ValidationError("must be a non-empty id", field="event_id")
    for name in ("thread", "actor"):
        value = params.get(name)
        if value is not None and (not isinstance(value, str) or not value or len(value) > 512):
            raise ValidationError("must be a non-empty string of <= 512 chars", field=name)
    mood_raw = params.get("mood")
    explain = params.get("explain", True)
    if not isinstance(explain, bool):
        raise ValidationError("must be true or false", field="explain")
    summaries = params.get("summaries", True)
    if not isinstance(summaries, bool):
        raise ValidationError("must be true or false", field="summaries")
    at = params.get("at")
    if at is not None:
        at = _int(at, "at", 0, 2**63 - 1)
    return RetrieveRequest(
        query=query,
        k=k,
        max_tokens=max_tokens,
        kinds=kinds,
        categories=categories,
        regime=parse_optional_enum(Regime, params.get("regime"), "regime"),
        strategy=strategy,
        min_confidence=min_conf,
        event_id=event_id,
        entities=tuple(parse_entities(params.get("entities"))),
        mood=None if mood_raw is None else PAD.from_dict(mood_raw, "mood"),
        mode=_choice(params.get("mode", "deciding"), MODES, "mode"),
        at=at,
        format=_choice(params.get("format", "items"), FORMATS, "format"),
        thread=params.get("thread"),
        actor=params.get("actor"),
        explain=explain,
        summaries=summaries,
    )
