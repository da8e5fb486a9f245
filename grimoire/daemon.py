"""``grimoire run``: the long-running service: socket server plus heartbeat, until signalled.

The heartbeat is scheduled on the monotonic clock; when a tick overruns or the
machine stalls, the missed ticks are skipped (and logged), never replayed in a
burst. Signal handlers only set flags: SIGTERM or SIGINT starts a drain (stop
accepting, finish in-flight requests, stop the writer after its queue, flush
and close the stores, remove the socket, exit 0); a second signal exits at
once. With ``--speed`` the daemon's clock runs faster than the wall clock,
for demos on the simulated feed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from grimoire.clock import SystemClock
from grimoire.config import Config
from grimoire.errors import GrimoireError
from grimoire.feeds import Feed, make_feed
from grimoire.grimoire import Grimoire
from grimoire.llm import make_llm
from grimoire.server import Server

__all__ = ["AcceleratedClock", "Daemon", "run_daemon"]

log = structlog.get_logger()


class AcceleratedClock:
    """Unix ms that advance ``speed`` times faster than the monotonic clock from ``start_ms``."""

    def __init__(self, start_ms: int, speed: float) -> None:
        self.start_ms = int(start_ms)
        self.speed = float(speed)
        self._mono0 = time.monotonic()

    def __call__(self) -> int:
        return self.start_ms + int((time.monotonic() - self._mono0) * 1000 * self.speed)


DEFAULT_TICK_SECONDS = 40.0


def tick_seconds(config: Config, feed: Feed) -> float:
    """The configured tick, else the feed's own (the simulator scenario's), else SPEC's 40 s."""
    if config.daemon.tick_seconds is not None:
        return config.daemon.tick_seconds
    return feed.tick_seconds_hint or DEFAULT_TICK_SECONDS


class Daemon:
    def __init__(self, g: Grimoire, feed: Feed, config: Config) -> None:
        self.g = g
        self.feed = feed
        self.config = config
        self.tick_seconds = tick_seconds(config, feed)
        self.interval_s = self.tick_seconds / max(config.daemon.speed, 1e-9)
        self._stop = asyncio.Event()
        self._signals = 0
        self.ticks_run = 0
        self.ticks_skipped = 0
        self._tick_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")

    def request_stop(self, signum: int | None = None) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("daemon.exit.immediate", signal=signum)
            os._exit(130)
        log.info("daemon.draining", signal=signum)
        self._stop.set()

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        next_due = time.monotonic() + self.interval_s
        max_ticks = self.config.daemon.max_ticks
        while not self._stop.is_set():
            delay = next_due - time.monotonic()
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), timeout=delay)
                    return
                except TimeoutError:
                    pass
            try:
                await loop.run_in_executor(self._tick_executor, self._one_tick)
            except GrimoireError as exc:
                log.error("heartbeat.tick.failed", error=str(exc), type=type(exc).__name__)
            self.ticks_run += 1
            if max_ticks is not None and self.ticks_run >= max_ticks:
                log.info("daemon.max_ticks.reached", ticks=self.ticks_run)
                self._stop.set()
                return
            next_due += self.interval_s
            behind = time.monotonic() - next_due
            if behind > self.interval_s:
                skipped = int(behind // self.interval_s)
                self.ticks_skipped += skipped
                next_due += skipped * self.interval_s
                log.warning("heartbeat.ticks.skipped", skipped=skipped)

    def _one_tick(self) -> dict[str, Any]:
        ctx = self.g.context
        now = ctx.now()
        episodes = self.feed.poll(ctx.tick + 1, now)
        summary = self.g.tick(now=now, feed_episodes=episodes)
        if "curator" in summary:
            log.info("heartbeat.curator", tick=summary["tick"], **summary["curator"])
        return summary

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop, signum)
        d = self.config.daemon
        server = Server(self.g, self.config.socket, max_request_bytes=d.max_request_bytes,
                        max_connections=d.max_connections, idle_timeout_s=d.idle_timeout_s)
        await server.start()
        log.info("daemon.ready", socket=str(self.config.socket), tick_s=self.interval_s,
                 feed=d.feed, pid=os.getpid())
        heartbeat = asyncio.create_task(self._heartbeat())
        await self._stop.wait()
        await server.stop()
        await heartbeat
        self._tick_executor.shutdown(wait=True)
        return 0


def run_daemon(config: Config) -> int:
    """Open the stores, serve until signalled, close everything; the exit code."""
    clock: Any = SystemClock()
    if config.daemon.speed != 1.0:
        clock = AcceleratedClock(SystemClock()(), config.daemon.speed)
    # The only place that reads the environment for the LLM (its API key); None = no LLM.
    llm = make_llm(config.llm, os.environ)
    g = Grimoire.open(config=config, clock=clock, llm=llm)
    if isinstance(clock, AcceleratedClock):
        # Never let accelerated time run backwards across restarts.
        clock.start_ms = max(clock.start_ms, int(g.context.semantic.get_meta("clock_ms", 0)))
    feed = make_feed(config.daemon.feed, scenario=config.daemon.scenario, seed=config.daemon.seed)
    try:
        code = asyncio.run(Daemon(g, feed, config).run())
    finally:
        feed.close()
        if isinstance(clock, AcceleratedClock):
            g.context.writer.call(lambda: g.context.semantic.set_meta("clock_ms", clock()))
        g.close()
    log.info("daemon.stopped", code=code)
    return code
