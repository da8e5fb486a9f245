"""``status``: what the owner or operator needs to see at a glance.

Counts per store and status, the last curator cycle, the health metrics of
SPEC §12 where their data exists, the embedding model, the writer's queue,
the daemon's heartbeat and socket counters when a daemon runs, the most
recent SPEC §12 events and the latest one of each kind (a busy feed's
IngestResult every tick would otherwise push a rare CuratorCycleComplete out
of view). Read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grimoire import __version__
from grimoire.context import Context

__all__ = ["EVENT_KINDS", "HEALTH_METRICS", "status"]

#: SPEC §12's events.
EVENT_KINDS = ("GrimoireWrite", "GrimoireDecay", "CuratorCycleComplete", "IngestResult")

#: name -> fn(ctx) computing one health metric (SPEC §12); areas register theirs.
HEALTH_METRICS: dict[str, Callable[[Context], Any]] = {}


def status(ctx: Context) -> dict[str, Any]:
    from grimoire.methods import status_cache

    # Offline, the episodes' figures the writer saved at its close, while they are still
    # the store's: no LanceDB import nor table load (status_cache).
    saved = status_cache.load(ctx)
    health: dict[str, Any] = {}
    status_cache.using(ctx, saved)
    try:
        for name, fn in sorted(HEALTH_METRICS.items()):
            health[name] = fn(ctx)
    finally:
        status_cache.using(ctx, None)
    daemon = ctx.extras.get("daemon_status")
    latest = {}
    for kind in EVENT_KINDS:
        found = ctx.events.recent(1, kind)
        latest[kind] = found[0] if found else None
    return {
        "version": __version__,
        "data_dir": str(ctx.data_dir),
        # FEED.json: simulated or real memory (None: no daemon marked it); with simulated
        # memory every time here is simulated time, not the wall clock's.
        "memory": ctx.memory,
        "tick": ctx.tick,
        "embedding": {"model": ctx.embedder.model_id, "dim": ctx.embedder.dim},
        "episodes": status_cache.episode_stats(ctx, saved),
        "entries": ctx.semantic.counts().to_dict(),
        "graph": ctx.graph.stats(),
        "writer": {"queued": ctx.writer.qsize(), "jobs_done": ctx.writer.jobs_done,
                   "batches": ctx.writer.batches_done},
        "last_curator_cycle": ctx.semantic.get_meta("last_curator_cycle", None),
        # 0 for an original agent; a successor's predecessor + 1 (grimoire run --inherit)
        "generation": int(ctx.semantic.get_meta("succession.generation", 0) or 0),
        "inherited": ctx.semantic.get_meta("succession.inherited", None),
        "health": health,
        "llm": ctx.extras.get("llm_stats", {"configured": ctx.config.llm.base_url is not None}),
        "daemon": daemon() if callable(daemon) else None,
        "events": ctx.events.recent(20),
        "last_events": latest,
    }
