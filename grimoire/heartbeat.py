"""One heartbeat tick: write the feed's episodes, flush, distil and curate when due.

``run_tick(ctx, now, feed_episodes)`` is the whole body of a tick and takes
``now`` explicitly, so tests drive ticks one at a time without sleeping (the
daemon's loop in ``daemon.py`` only decides *when* to call it). The schedule:
distillation for a strategy after ``distiller.every_episodes`` new episodes
in it, the curator every ``curator.every_ticks`` ticks. Both are hooks on the
Context that the facade wires at open; an unwired hook is reported as such in
the tick's summary, never faked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from grimoire.context import Context
from grimoire.ingest import write_episodes

__all__ = ["due_strategies", "run_tick"]

log = structlog.get_logger()


def due_strategies(ctx: Context) -> list[str]:
    """Strategies ("" = global) with enough new episodes for a distillation; resets them."""
    every = ctx.config.distiller.every_episodes
    with ctx.state_lock:
        due = sorted(k for k, n in ctx.since_distill.items() if n >= every)
        for key in due:
            ctx.since_distill[key] = 0
    return due


def run_tick(
    ctx: Context, *, now: int | None = None, feed_episodes: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    now = ctx.now() if now is None else int(now)
    with ctx.state_lock:
        ctx.tick += 1
        tick = ctx.tick
    written = write_episodes(ctx, list(feed_episodes)) if feed_episodes else []

    def flush_and_persist() -> None:
        ctx.episodes.maybe_flush(now)
        ctx.semantic.set_meta("tick", tick)

    ctx.writer.call(flush_and_persist)
    summary: dict[str, Any] = {"tick": tick, "now": now, "written": len(written)}

    distilled: list[dict[str, Any]] = []
    for key in due_strategies(ctx):
        if ctx.distill_hook is None:
            distilled.append({"strategy": key or None, "skipped": "no distiller wired"})
            continue
        distilled.append({"strategy": key or None, **ctx.distill_hook(ctx, key or None, now)})
    if distilled:
        summary["distilled"] = distilled

    if tick % ctx.config.curator.every_ticks == 0:
        if ctx.curator_hook is not None:
            summary["curator"] = dict(ctx.curator_hook(ctx, now))
        else:
            summary["curator"] = {"skipped": "no curator wired"}
    log.debug("heartbeat.tick", **{k: v for k, v in summary.items() if k != "distilled"})
    return summary
