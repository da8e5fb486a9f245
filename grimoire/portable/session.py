"""Where a CLI command of this package runs: through the daemon's socket, or on the stores.

``clade.publish`` / ``clade.pull`` are socket methods: with a daemon answering on
the configured socket they run inside it. Export (and ``clade.publish`` with no
daemon) only read the store, so they open the data directory read-only, beside
a running daemon or without one. Import and ``clade.pull`` write: without a
daemon they open the directory for writing, which a running daemon's lock
refuses with a clear error naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grimoire.config import Config
from grimoire.portable.bundle import Bundle, read_bundle

__all__ = ["daemon_answers", "export_store", "import_bundle", "run_on_store"]

#: What only reads the store (a read-only open serves it).
_READS = frozenset({"export", "clade.publish"})


def daemon_answers(config: Config) -> bool:
    from grimoire.errors import GrimoireError
    from grimoire.service.client import Client

    if not Path(config.socket).exists():
        return False
    try:
        with Client(config.socket) as client:
            client.call("health", {})
    except (GrimoireError, OSError):
        return False
    return True


def export_store(ctx: Any, out: str, min_confidence: float = 0.3) -> dict[str, Any]:
    from grimoire.portable.bundle import export_bundle

    return export_bundle(ctx, out, min_confidence=min_confidence)


def import_bundle(ctx: Any, bundle: str | Bundle, provenance: str,
                  vectors: dict[str, Any] | None = None) -> dict[str, Any]:
    """Verify the whole bundle (unless given one ``read_bundle`` verified) and the vectors it
    carries (unless given them checked: ``portable.vectors.episode_vectors``), then import
    it (see ``transfer``)."""
    from grimoire.portable.transfer import import_items
    from grimoire.portable.vectors import episode_vectors

    b = bundle if isinstance(bundle, Bundle) else read_bundle(bundle)
    source = b.root if isinstance(bundle, Bundle) else bundle
    if vectors is None:
        vectors = episode_vectors(b.manifest, b.vectors, b.causal, ctx.embedder,
                                  entries=b.entries)
    summary = import_items(ctx, entries=b.entries, causal=b.causal, triples=b.triples,
                           provenance=provenance, origin=b.origin, source=str(source),
                           episode_vectors=vectors)
    return {**summary, "memory": b.memory}


def run_on_store(config: Config, op: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run ``op`` (export, import, testament, clade.publish, clade.pull) where it can run
    now (a testament writes: a running daemon's lock refuses it with a clear error)."""
    if op.startswith("clade.") and daemon_answers(config):
        from grimoire.service.client import Client

        with Client(config.socket) as client:
            result: dict[str, Any] = client.call(op, params)
        return result
    from grimoire import Grimoire

    embedder = None
    if op == "import":
        # The whole bundle is verified, the simulated/real rule checked and the model
        # loaded before the store is opened: a tampered bundle, a refused mix or a bad
        # setting leaves no empty store (nor any directory) behind.
        from grimoire.grimoire import embedder_for, make_data_dir
        from grimoire.service.datadir import import_marker, write_marker

        bundle = read_bundle(params["bundle"])
        root = Path(config.data_dir)
        marker = import_marker(root, bundle.memory, f"bundle {bundle.root} (origin "
                               f"{bundle.origin})", bool(params.get("allow_mixed")))
        embedder = embedder_for(config)
        from grimoire.portable.vectors import episode_vectors

        vectors = episode_vectors(bundle.manifest, bundle.vectors, bundle.causal, embedder,
                                  entries=bundle.entries)
        if marker is not None:
            make_data_dir(root)
            write_marker(root, marker)
        params = {"bundle": bundle, "provenance": params["provenance"], "vectors": vectors}
    read_only = op in _READS
    with Grimoire.open(config=config, read_only=read_only, embedder=embedder) as g:
        if op == "export":
            return export_store(g.context, **params)
        if op == "import":
            return import_bundle(g.context, **params)
        if op == "testament":
            from grimoire.portable.testament import write_testament

            return write_testament(g.context, **params)
        out: dict[str, Any] = getattr(g, op.replace(".", "_"))(**params)
        return out
