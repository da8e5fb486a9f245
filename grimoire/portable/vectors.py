"""Vectors carried in a bundle, so that an import does not embed its texts again.

A bundle's causal links name episodes by their words; the importer writes each as a new
``observation`` episode, whose vector is the embedding of those words, and the admission
gate embeds each entry's sentence. Embedding them again was most of an import's time (the
demo's 1.4k endpoint episodes: 34 items/s). The exporter already holds those vectors, so
``vectors.jsonl`` carries them, one line per distinct text::

    {"text_sha256": sha256 of the words, "codes": base64 of the int8 codes,
     "scale": float, "hash": the item hash}

the int8 codes and scale of the exporter's vector (an episode's as its in-memory index
holds it, ``episodes_quantized``: within ~0.001 a component of the stored vector; an entry's
quantised the same way), 0.5 KB a line at 384 dimensions. An entry's stored vector is its
sentence's (the curator embeds a changed sentence again). Only an episode
whose vector is the embedding of its words alone is carried: a threaded episode's vector
also embeds its thread's previous words (``thread_context``), so it is left out and the
importer embeds it. The manifest's ``vectors`` names the file, the model, the dimension and
the count.

On import (``episode_vectors``) they are used only when the importer's model and dimension
are the bundle's (else every episode is embedded, as before). Nothing here is trusted more
than the rest of the bundle: the file is in the manifest (sha256 and size, so a changed
vector is refused with the whole bundle, as a changed word is), every line carries its item
hash, a line must match an entry's sentence or an episode text of the bundle and hold a
vector of the
manifest's dimension with a finite, non-negative scale. A bundle is checksummed, not signed:
whoever rewrites the manifest can change any of it. Against vectors that are not what the
named model makes of their words (another model under the same name, vectors shifted to
other texts), a random sample, drawn anew at each import, is embedded again and must agree
(cosine ``MIN_AGREEMENT``); one that does not refuses the bundle before anything is written.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.errors import ValidationError
from grimoire.models.embedders import Embedder

__all__ = ["FILE", "MIN_AGREEMENT", "SAMPLE", "episode_vectors", "manifest_entry",
           "text_key", "vector_items"]

FILE = "vectors.jsonl"
SAMPLE = 8  # carried vectors embedded again at each import, drawn at random
MIN_AGREEMENT = 0.98  # cosine of a carried vector with its words embedded here (int8: ~0.9999)
F32 = npt.NDArray[np.float32]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vector_items(ctx: Any, episodes: Mapping[str, str],
                 entries: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The lines of ``vectors.jsonl`` for ``{text_sha256: episode id}`` (each an episode
    without a thread, whose vector embeds its words alone) and ``{text_sha256: entry id}``,
    unhashed."""
    from grimoire.stores.episodes.quantized import quantize

    entries = entries or {}
    stored = ctx.semantic.entry_vectors(list(entries.values())) if entries else {}
    keys = [k for k, id_ in entries.items() if id_ in stored and k not in episodes]
    for start in range(0, len(keys), 1024):
        part = keys[start:start + 1024]
        codes, scales = quantize(np.stack([stored[entries[k]] for k in part]))
        for key, code, scale in zip(part, codes, scales, strict=True):
            yield {"text_sha256": key, "codes": base64.b64encode(code.tobytes()).decode(),
                   "scale": float(scale)}
    keys = list(episodes)
    for start in range(0, len(keys), 1024):
        part = keys[start:start + 1024]
        # as the index holds them: quantising its dequantised rows gives its codes back
        codes, scales = quantize(ctx.episodes.vectors_for([episodes[k] for k in part]))
        for key, code, scale in zip(part, codes, scales, strict=True):
            yield {"text_sha256": key, "codes": base64.b64encode(code.tobytes()).decode(),
                   "scale": float(scale)}


def manifest_entry(model_id: str, dim: int, count: int) -> dict[str, Any]:
    return {"file": FILE, "embedding_model": model_id, "embedding_dim": dim, "count": count}


def _decode(item: Mapping[str, Any], dim: int, n: int) -> F32:
    try:
        codes = np.frombuffer(base64.b64decode(str(item["codes"]), validate=True), np.int8)
        scale = float(item["scale"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"{FILE} line {n}: malformed vector ({exc})",
                              field="bundle") from None
    if codes.shape != (dim,):
        raise ValidationError(f"{FILE} line {n}: {codes.size} components, the manifest says "
                              f"{dim}", field="bundle")
    if not math.isfinite(scale) or scale < 0:
        raise ValidationError(f"{FILE} line {n}: scale {scale!r} is not a finite, "
                              "non-negative number", field="bundle")
    out: F32 = codes.astype(np.float32) * np.float32(scale)
    return out


def episode_vectors(manifest: Mapping[str, Any], items: Sequence[Mapping[str, Any]],
                    causal: Iterable[Mapping[str, Any]], embedder: Embedder,
                    rng: random.Random | None = None,
                    entries: Iterable[Mapping[str, Any]] = ()) -> dict[str, F32]:
    """``{text_sha256: vector}`` of a verified bundle's carried vectors, checked (module
    doc); empty when the bundle carries none or was embedded by another model or dimension.
    Raises ValidationError when a line is malformed, names no episode of the bundle, or a
    sampled vector disagrees with its words embedded here."""
    spec = manifest.get("vectors")
    if not items or not isinstance(spec, Mapping):
        if items:
            raise ValidationError(f"{FILE} is in the bundle but its manifest does not "
                                  "describe it", field="bundle")
        return {}
    if spec.get("embedding_model") != embedder.model_id or spec.get(
            "embedding_dim") != embedder.dim:
        return {}  # another model's space: every episode is embedded here
    if spec.get("count") != len(items):
        raise ValidationError(f"the manifest counts {spec.get('count')} vectors but {FILE} "
                              f"holds {len(items)}", field="bundle")
    texts: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry.get("content"), str):
            texts[text_key(entry["content"])] = entry["content"]
    for link in causal:
        for end in ("cause", "effect"):
            node = link.get(end)
            if isinstance(node, Mapping) and node.get("kind") == "episode" and isinstance(
                    node.get("text"), str):
                texts[text_key(node["text"])] = node["text"]
    out: dict[str, F32] = {}
    for n, item in enumerate(items, 1):
        key = item.get("text_sha256")
        if not isinstance(key, str) or key not in texts:
            raise ValidationError(f"{FILE} line {n}: names no text of the bundle",
                                  field="bundle")
        if key in out:
            raise ValidationError(f"{FILE} line {n}: a second vector for one text",
                                  field="bundle")
        out[key] = _decode(item, embedder.dim, n)
    keys = sorted(out)
    chosen = (rng or random.SystemRandom()).sample(keys, min(SAMPLE, len(keys)))
    if chosen:
        fresh = np.asarray(embedder.embed([texts[k] for k in chosen]), dtype=np.float32)
        for key, here in zip(chosen, fresh, strict=True):
            carried = out[key]
            denom = float(np.linalg.norm(carried) * np.linalg.norm(here))
            cosine = float(carried @ here) / denom if denom > 0 else 0.0
            if cosine < MIN_AGREEMENT:
                raise ValidationError(
                    f"{FILE}: the vector carried for “{texts[key][:60]}” is not what "
                    f"{embedder.model_id} makes of its words (cosine {cosine:.3f}): changed, "
                    "or embedded by another model; refused", field="bundle")
    return out
