"""One heartbeat tick: ingest the feed's episodes, flush, distil and curate when due.

``run_tick(ctx, now=…, feed_episodes=…)`` is the whole body of a tick and
takes ``now`` explicitly, so tests drive ticks one at a time without sleeping
(the daemon's loop in ``daemon.py`` only decides *when* to call it). Each
tick:

1. increments the tick counter;
2. writes the feed's episodes (each valid one; bad ones are refused and
   counted) and emits SPEC §12's ``IngestResult`` {written, rejected};
3. on the writer thread, in one SQLite transaction: lets the episode store
   flush its LanceDB buffer (which compacts on its own schedule) and persists
   ``tick``, ``last_tick_ms`` and any extra ``meta`` the caller passes (the
   jsonl feed's byte offset);
4. distils each strategy that has ``distiller.every_episodes`` new episodes
   (``Context.distill_hook``), and runs the curator every
   ``curator.every_ticks`` ticks (``Context.curator_hook``); in the daemon both
   run on its learning thread (``BACKGROUND_KEY``) so a tick never waits for them.

An unwired hook is reported as such in the tick's summary, never faked. A
hook that fails is logged with its traceback and reported in the summary;
the tick itself (and the data already written) stands, and the next due
hook still runs. This module must not decide timing or read the wall clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grimoire.context import Context
from grimoire.logs import get_logger
from grimoire.methods.episode import write_feed_episodes

__all__ = ["BACKGROUND_KEY", "due_strategies", "run_tick"]

# ctx.extras[BACKGROUND_KEY]: the daemon's one learning thread (an executor). When set,
# distillations and curator cycles run there, beside the heartbeat, one at a time; their
# phases read snapshots and write through the single writer in short transactions.
BACKGROUND_KEY = "curator.background"

log = get_logger(__name__)


def due_strategies(ctx: Context) -> list[str]:
    """Strategies ("" = global) with enough new episodes for a distillation; resets them."""
    every = ctx.config.distiller.every_episodes
    with ctx.state_lock:
        due = sorted(k for k, n in ctx.since_distill.items() if n >= every)
        for key in due:
            ctx.since_distill[key] = 0
    return due


def _hook_failed(name: str, tick: int, exc: Exception, **fields: Any) -> dict[str, Any]:
    # A failing hook must not stop the heartbeat (the agent keeps writing and the next
    # cycle may succeed), but it must be loud: logged at error level with the traceback.
    log.error("heartbeat.hook.failed", hook=name, tick=tick, error=repr(exc), exc_info=exc,
              **fields)
    return {"error": f"{type(exc).__name__}: {exc}"}


def _background_distill(ctx: Context, strategy: str | None, now: int, tick: int) -> None:
    assert ctx.distill_hook is not None
    try:
        ctx.distill_hook(ctx, strategy, now)
    except Exception as exc:
        _hook_failed("distill", tick, exc, strategy=strategy)


def run_tick(
    ctx: Context,
    *,
    now: int | None = None,
    feed_episodes: Sequence[Mapping[str, Any]] = (),
    source: str | None = None,
    meta: Mapping[str, Any] | None = None,
    feed_rejected: int = 0,
) -> dict[str, Any]:
    """Run one tick at ``now`` (unix ms; default the context's clock); returns its summary.

    ``source`` names the feed in the IngestResult event; without one, the event is
    emitted (as source "feed") only when ``feed_episodes`` is not empty.
    ``meta`` is persisted with the tick counter in the same transaction;
    ``feed_rejected`` counts items the feed itself refused (a tailed file's bad
    lines), reported in the IngestResult with the ones refused here.
    """
    now = ctx.now() if now is None else int(now)
    with ctx.state_lock:
        ctx.tick += 1
        tick = ctx.tick
    ingest = write_feed_episodes(ctx, feed_episodes, tick)
    rejected = len(ingest.rejected) + feed_rejected
    summary: dict[str, Any] = {"tick": tick, "now": now, "written": len(ingest.ids),
                               "rejected": rejected}
    if source is not None or feed_episodes or rejected:
        ctx.events.emit("IngestResult", now, source=source or "feed", tick=tick,
                        written=len(ingest.ids), rejected=rejected)

    def flush_and_persist() -> int:
        flushed = ctx.episodes.maybe_flush(now)
        with ctx.semantic.transaction():
            ctx.semantic.set_meta("tick", tick)
            ctx.semantic.set_meta("last_tick_ms", now)
            for key, value in (meta or {}).items():
                ctx.semantic.set_meta(key, value)
        return flushed

    summary["flushed"] = ctx.writer.call(flush_and_persist)

    distilled: list[dict[str, Any]] = []
    background = ctx.extras.get(BACKGROUND_KEY)
    for key in due_strategies(ctx):
        strategy = key or None
        if ctx.distill_hook is None:
            distilled.append({"strategy": strategy, "skipped": "no distiller wired"})
            continue
        if background is not None:
            # The daemon's learning thread: the tick does not wait for the distillation.
            background.submit(_background_distill, ctx, strategy, now, tick)
            distilled.append({"strategy": strategy, "started": "in the background"})
            continue
        try:
            distilled.append({"strategy": strategy,
                              **ctx.distill_hook(ctx, strategy, now)})
        except Exception as exc:
            distilled.append({"strategy": strategy,
                              **_hook_failed("distill", tick, exc, strategy=strategy)})
    if distilled:
        summary["distilled"] = distilled

    if tick % ctx.config.curator.every_ticks == 0:
        if ctx.curator_hook is None:
            summary["curator"] = {"skipped": "no curator wired"}
        else:
            try:
                summary["curator"] = dict(ctx.curator_hook(ctx, now))
            except Exception as exc:
                summary["curator"] = _hook_failed("curator", tick, exc)
    log.debug("heartbeat.tick", **{k: v for k, v in summary.items() if k != "distilled"})
    return summary
