"""Small helpers the retrieval pipeline shares: record times, PAD tags, per-context caches.

- ``record_time``: when an item was *recorded* (what ``at`` filters on): an
  episode's UUIDv7 creation ms, an entry's ``created_at``.
- ``pad_of_tag``: an episode's free-form ``emotional_tag`` as a PAD vector
  (JSON ``{pleasure, arousal, dominance}``, ``"p,a,d"``, or a common emotion
  word with Mehrabian-style PAD values); None when it says nothing usable.
- Caches kept in ``ctx.extras`` (bounded, per context, safe to drop): entry
  vectors keyed by (id, updated_at) — an entry's vector changes only with
  its content, which bumps ``updated_at`` — token counts keyed by text, and
  the learned rerank weights.

Must not rank or write to a store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.ids import id_time_ms
from grimoire.models.embedders import count_tokens
from grimoire.records import PAD, GrimoireEntry
from grimoire.retrieval.candidates import Vector
from grimoire.retrieval.weights import HedgeWeights

__all__ = [
    "WEIGHTS_META",
    "entry_vectors",
    "learned_weights",
    "pad_of_tag",
    "record_time",
    "set_learned_weights",
    "token_counter",
]

WEIGHTS_META = "rerank_weights"
_VECTORS = "retrieval.entry_vectors"
_TOKENS = "retrieval.tokens"
_WEIGHTS = "retrieval.weights"
_MAX_CACHED = 200_000
_MAX_TEXTS = 20_000

# A small PAD lexicon (pleasure, arousal, dominance), after Mehrabian's emotion terms.
_EMOTIONS: dict[str, tuple[float, float, float]] = {
    "joy": (0.76, 0.48, 0.35), "happy": (0.76, 0.48, 0.35), "excited": (0.62, 0.75, 0.38),
    "confident": (0.6, 0.3, 0.7), "calm": (0.5, -0.6, 0.3), "relaxed": (0.6, -0.5, 0.2),
    "hopeful": (0.5, 0.2, 0.2), "proud": (0.4, 0.3, 0.3), "greedy": (0.3, 0.6, 0.5),
    "neutral": (0.0, 0.0, 0.0), "bored": (-0.65, -0.62, -0.33), "sad": (-0.63, -0.27, -0.33),
    "anxious": (-0.6, 0.6, -0.5), "fear": (-0.64, 0.6, -0.43), "afraid": (-0.64, 0.6, -0.43),
    "panic": (-0.7, 0.9, -0.6), "angry": (-0.51, 0.59, 0.25), "anger": (-0.51, 0.59, 0.25),
    "frustrated": (-0.6, 0.4, -0.1), "regret": (-0.5, -0.1, -0.4), "stressed": (-0.5, 0.7, -0.3),
}


def record_time(item_id: str, fallback: int) -> int:
    """The creation ms inside a UUIDv7 id; ``fallback`` for an id that is not one."""
    try:
        return id_time_ms(item_id)
    except ValueError:
        return fallback


def pad_of_tag(tag: str | None) -> PAD | None:
    """Decode an episode's emotional tag; None when it is absent or not understood."""
    if not tag:
        return None
    text = tag.strip()
    parts: list[Any] | None = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, Mapping):
            parts = [data.get("pleasure"), data.get("arousal"), data.get("dominance")]
    elif "," in text:
        try:
            parts = [float(p) for p in text.split(",")]
        except ValueError:
            parts = None
    else:
        known = _EMOTIONS.get(text.lower())
        parts = list(known) if known else None
    if parts is None or len(parts) != 3:
        return None
    try:
        return PAD.from_dict(dict(zip(("pleasure", "arousal", "dominance"), parts, strict=True)),
                             "emotional_tag")
    except ValidationError:
        return None


def _cache(ctx: Context, key: str, limit: int = _MAX_CACHED) -> dict[Any, Any]:
    # Dropped whole when full: simpler than an LRU and the refill is one query per item.
    found: dict[Any, Any] | None = ctx.extras.get(key)
    if found is None or len(found) > limit:
        found = ctx.extras[key] = {}
    return found


def entry_vectors(ctx: Context, entries: Iterable[GrimoireEntry]) -> dict[str, Vector]:
    """Stored vectors of these entries: cached ones, the rest in one statement."""
    cache = _cache(ctx, _VECTORS)
    out: dict[str, Vector] = {}
    missing: dict[str, int] = {}
    for entry in entries:
        hit = cache.get(entry.id)
        if hit is not None and hit[0] == entry.updated_at:
            out[entry.id] = hit[1]
        else:
            missing[entry.id] = entry.updated_at
    if missing:
        for entry_id, vector in ctx.semantic.entry_vectors(missing).items():
            norm = float(np.linalg.norm(vector))
            if not math.isfinite(norm) or norm == 0.0:
                continue
            unit = (vector / norm).astype(np.float32)
            cache[entry_id] = (missing[entry_id], unit)
            out[entry_id] = unit
    return out


def token_counter(ctx: Context) -> Callable[[str], int]:
    """``count(text) -> tokens`` with the embedder's tokenizer, cached per text."""
    cache = _cache(ctx, _TOKENS, _MAX_TEXTS)
    embedder = ctx.embedder

    def count(text: str) -> int:
        hit = cache.get(text)
        if hit is None:
            hit = cache[text] = count_tokens(embedder, text)
        return int(hit)

    return count


def learned_weights(ctx: Context) -> HedgeWeights:
    """The rerank weights: learned ones from meta ``rerank_weights``, else the config's.

    Read once per context and kept in ``ctx.extras``; ``outcome.report`` replaces
    both the stored and the cached value. ``learn_weights: false`` freezes them.
    """
    cached: HedgeWeights | None = ctx.extras.get(_WEIGHTS)
    if cached is not None:
        return cached
    cfg = ctx.config.retrieval
    stored = ctx.semantic.get_meta(WEIGHTS_META)
    weights = HedgeWeights.from_config(cfg) if stored is None else HedgeWeights.from_dict(stored)
    weights = weights.freeze(not cfg.learn_weights)
    ctx.extras[_WEIGHTS] = weights
    return weights


def set_learned_weights(ctx: Context, weights: HedgeWeights) -> None:
    """Use these weights from now on (call after they are committed to meta)."""
    ctx.extras[_WEIGHTS] = weights
