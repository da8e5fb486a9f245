"""``status``: what the owner or operator needs to see at a glance.

Counts per store and status, the last curator cycle, the health metrics of
SPEC §12 where their data exists, the embedding model, the writer's queue,
and the most recent SPEC §12 events. Read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grimoire import __version__
from grimoire.context import Context

__all__ = ["HEALTH_METRICS", "status"]

#: name -> fn(ctx) computing one health metric (SPEC §12); areas register theirs.
HEALTH_METRICS: dict[str, Callable[[Context], Any]] = {}


def status(ctx: Context) -> dict[str, Any]:
    health: dict[str, Any] = {}
    for name, fn in sorted(HEALTH_METRICS.items()):
        health[name] = fn(ctx)
    return {
        "version": __version__,
        "data_dir": str(ctx.data_dir),
        "tick": ctx.tick,
        "embedding": {"model": ctx.embedder.model_id, "dim": ctx.embedder.dim},
        "episodes": ctx.episodes.stats(),
        "entries": ctx.semantic.counts().to_dict(),
        "graph": ctx.graph.stats(),
        "writer": {"queued": ctx.writer.qsize(), "jobs_done": ctx.writer.jobs_done,
                   "batches": ctx.writer.batches_done},
        "last_curator_cycle": ctx.semantic.get_meta("last_curator_cycle", None),
        "health": health,
        "llm": ctx.extras.get("llm_stats", {"configured": ctx.config.llm.base_url is not None}),
        "events": ctx.events.recent(20),
    }
