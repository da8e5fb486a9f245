"""``grimoire run``: the long-running service: socket server plus heartbeat, until signalled.

The heartbeat is scheduled on the monotonic clock (``TickSchedule``); when a
tick overruns or the machine stalls, the missed ticks are skipped (counted
and logged), never replayed in a burst. ``Daemon.step()`` is one iteration
(run the tick if it is due, then reschedule), so tests drive the loop with a
fake monotonic clock and no sleeping.

Signal handlers only set flags: SIGTERM or SIGINT starts a drain (stop
accepting, close idle connections, finish in-flight requests, let the
running tick end, stop the writer after its queue, flush and close the
stores, remove the socket, exit 0); a second signal exits at once with
128 + signal (a repeat within half a second is the same stop delivered
twice, as ``timeout -s INT`` does to the process and then its group: it is
ignored). A signal that arrives while the stores are still opening is
honoured as soon as they are open. SIGHUP is logged and ignored (a config
reload is not supported: restart to apply changes), so a closed terminal
does not kill the daemon without a drain.

With ``--speed`` the daemon's clock runs faster than the wall clock, for
demos on the simulated feed; it never runs backwards across restarts. The
``jsonl:PATH`` feed's byte offset is persisted with every tick, so a restart
continues where the last completed tick stopped (lines of a tick interrupted
by a crash may be ingested twice: at least once, never lost).
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

from grimoire.clock import SystemClock
from grimoire.config import Config
from grimoire.feeds import Feed, JsonlFeed, make_feed
from grimoire.grimoire import Grimoire, embedder_for
from grimoire.logs import get_logger
from grimoire.models.llm import make_llm
from grimoire.runtime.memory import (
    limit_malloc_arenas,
    map_large_allocations,
    release_free_memory,
    use_system_arrow_pool,
)
from grimoire.scopes.access import Access, check_access
from grimoire.scopes.ticks import tick_scopes
from grimoire.service.datadir import record_feed_kind, refuse_mixed
from grimoire.service.heartbeat import BACKGROUND_KEY, run_tick
from grimoire.service.server import Server
from grimoire.service.systemd import Notifier

__all__ = ["AcceleratedClock", "Daemon", "StopSignals", "TickSchedule", "open_feed",
           "run_daemon"]

log = get_logger(__name__)

DEFAULT_TICK_SECONDS = 40.0
JSONL_META = "feed.jsonl"
CURATOR_BACKGROUND = BACKGROUND_KEY  # the learning thread: distillations, curator cycles
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A repeat within this many seconds is the same stop delivered twice (`timeout -s INT` signals
# the process and then its process group), not an operator insisting: it does not kill.
REPEAT_DEBOUNCE_S = 0.5
SKIP_WARN_EVERY_S = 60.0  # skipped ticks are warned about at most once a minute
# glibc malloc arenas for the whole process (grimoire.runtime.memory): the default, 8 per core,
# left freed memory stranded in per-thread arenas (scripts/bench_speed.py --part memory).
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 4 << 20  # bytes: see grimoire.runtime.memory


class AcceleratedClock:
    """Unix ms that advance ``speed`` times faster than the monotonic clock from ``start_ms``."""

    def __init__(self, start_ms: int, speed: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not speed > 0:
            raise ValueError("speed must be > 0")
        self.start_ms = int(start_ms)
        self.speed = float(speed)
        self._monotonic = monotonic
        self._mono0 = monotonic()

    def __call__(self) -> int:
        return self.start_ms + int((self._monotonic() - self._mono0) * 1000 * self.speed)


class TickSchedule:
    """When heartbeat ticks are due, in monotonic seconds; missed ticks are skipped.

    Ticks fall on the boundaries ``start + k·interval``. After a tick that ended
    at ``now``, the next one is the first boundary after the one just run that
    is not in the past; the boundaries that passed during an overrun or a stall
    are counted as skipped.
    """

    def __init__(self, interval_s: float, start: float) -> None:
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = float(interval_s)
        self.next_due = float(start) + self.interval_s
        self.skipped = 0

    def delay(self, now: float) -> float:
        """Seconds until the next tick is due (0 when it is due)."""
        return max(0.0, self.next_due - now)

    def due(self, now: float) -> bool:
        return now >= self.next_due

    def advance(self, now: float) -> int:
        """Move past the tick just run (it ended at ``now``); returns the ticks skipped."""
        nxt = self.next_due + self.interval_s
        skipped = 0
        if nxt < now:
            skipped = math.ceil((now - nxt) / self.interval_s)
            nxt += skipped * self.interval_s
        self.next_due = nxt
        self.skipped += skipped
        return skipped


def wall_time_settings(config: Config) -> Config:
    """Under ``--speed`` the stores read the accelerated clock; a setting that paces work in
    real time is scaled so that it keeps its meaning. ``episodes.flush_ms`` (how long
    episodes wait in the journal before they are appended to LanceDB) was read as 1 s of
    demo time, so the README demo (600×, one tick = 0.3 s) appended and fsync'd the table
    every other tick: 0.1-0.8 s on 2 loaded cores, and the heartbeat skipped the ticks it
    overran. The journal keeps the episodes durable and readable meanwhile."""
    speed = config.daemon.speed
    return config.replace(**{"episodes.flush_ms": int(config.episodes.flush_ms * speed)})


def tick_seconds(config: Config, feed: Feed) -> float:
    """The configured tick, else the feed's own (the simulator scenario's), else SPEC's 40 s."""
    if config.daemon.tick_seconds is not None:
        return config.daemon.tick_seconds
    return feed.tick_seconds_hint or DEFAULT_TICK_SECONDS


def _jsonl_key(path: Path) -> str:
    return str(path.expanduser().resolve())


def open_feed(config: Config, g: Grimoire) -> Feed:
    """The configured feed; a ``jsonl`` feed resumes at the offset persisted for its path."""
    d = config.daemon
    offset = 0
    kind, sep, arg = d.feed.strip().partition(":")
    if kind == "jsonl" and sep and arg.strip():
        saved = g.context.semantic.get_meta(JSONL_META, None)
        if isinstance(saved, dict) and saved.get("path") == _jsonl_key(Path(arg.strip())):
            offset = int(saved.get("offset", 0))
    feed = make_feed(d.feed, scenario=d.scenario, seed=d.seed, offset=offset)
    if offset:
        log.info("feed.jsonl.resume", path=arg.strip(), offset=offset)
    return feed


class Daemon:
    """The heartbeat and the socket server around one open Grimoire."""

    def __init__(self, g: Grimoire, feed: Feed, config: Config, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 notifier: Notifier | None = None) -> None:
        self.g = g
        self.notifier = notifier if notifier is not None else Notifier()
        self.feed = feed
        self.config = config
        self.tick_seconds = tick_seconds(config, feed)
        self.interval_s = self.tick_seconds / max(config.daemon.speed, 1e-9)
        self._monotonic = monotonic
        self.schedule = TickSchedule(self.interval_s, monotonic())
        self._stop: asyncio.Event | None = None
        self.ticks_run = 0
        self.ticks_failed = 0
        self._skip_warned_at: float | None = None
        self._skipped_unreported = 0
        self._feed_rejected_seen = 0
        self.server: Server | None = None
        self._tick_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")
        # Distillations and curator cycles run on one learning thread beside the heartbeat.
        self._curator_executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="learning")
        self._dreaming: Future[None] | None = None
        g.context.extras[CURATOR_BACKGROUND] = self._curator_executor
        # LanceDB's vector index over the episodes (episodes.ann_threshold): built and rebuilt
        # on its own thread, so neither a write nor a tick waits for it.
        self._ann_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ann-index")
        self.ann_job: Future[Any] | None = None
        g.context.extras["daemon_status"] = self.stats

    # -- state ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(), "feed": self.feed.name, "tick_seconds": self.tick_seconds,
            "interval_s": self.interval_s, "ticks_run": self.ticks_run,
            "ticks_skipped": self.schedule.skipped, "ticks_failed": self.ticks_failed,
            "server": self.server.stats() if self.server is not None else None,
        }

    @property
    def stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def request_stop(self, signum: int | None = None) -> None:
        """Drain and stop (idempotent). Runs on the event loop; ``StopSignals`` calls it."""
        if self._stop is None or self._stop.is_set():
            return
        log.info("daemon.draining", signal=signum)
        self._stop.set()

    # -- the heartbeat --------------------------------------------------------------------

    def step(self, now: float | None = None) -> dict[str, Any] | None:
        """One loop iteration at monotonic ``now``: run the tick if due; None if it was not."""
        now = self._monotonic() if now is None else now
        if not self.schedule.due(now):
            return None
        try:
            summary = self._one_tick()
            self._maybe_refresh_ann()
        except Exception:
            self.ticks_failed += 1
            raise
        finally:
            self.ticks_run += 1
            release_free_memory()  # what the tick (curator, compaction, ingest) freed
            ended = self._monotonic()
            skipped = self.schedule.advance(ended)
            if skipped:
                self._report_skipped(skipped, ended)
        return summary

    def _maybe_refresh_ann(self) -> None:
        episodes = self.g.context.episodes
        job = self.ann_job
        if job is not None and job.done() and job.exception() is not None:
            log.error("episodes.ann.refresh.failed", error=repr(job.exception()))
            self.ann_job = job = None
        if (job is None or job.done()) and episodes.ann_due():
            self.ann_job = self._ann_executor.submit(episodes.refresh_ann)

    def _report_skipped(self, skipped: int, now: float) -> None:
        """One warning per ``SKIP_WARN_EVERY_S`` at most, counting the skips since the last
        (a loaded machine at high ``--speed`` would otherwise warn on every other tick)."""
        self._skipped_unreported += skipped
        if self._skip_warned_at is not None and now - self._skip_warned_at < SKIP_WARN_EVERY_S:
            log.debug("heartbeat.ticks.skipped", skipped=skipped, total=self.schedule.skipped)
            return
        log.warning("heartbeat.ticks.skipped", skipped=self._skipped_unreported,
                    total=self.schedule.skipped, interval_s=self.interval_s,
                    hint="ticks overran their interval (a loaded machine, or --speed too "
                    "high); the missed ones are skipped, not replayed")
        self._skip_warned_at, self._skipped_unreported = now, 0

    def _feed_meta(self) -> dict[str, Any]:
        if isinstance(self.feed, JsonlFeed):
            return {JSONL_META: {"path": _jsonl_key(self.feed.path), "offset": self.feed.offset}}
        return {}

    def _one_tick(self) -> dict[str, Any]:
        ctx = self.g.context
        now = ctx.now()
        feed = self.feed
        resume_at = feed.offset if isinstance(feed, JsonlFeed) else 0
        episodes = feed.poll(ctx.tick + 1, now)
        feed_rejected = 0
        if isinstance(feed, JsonlFeed):
            feed_rejected = feed.rejected - self._feed_rejected_seen
            self._feed_rejected_seen = feed.rejected
        try:
            summary = run_tick(ctx, now=now, feed_episodes=episodes,
                               source=None if feed.name == "none" else feed.name,
                               meta=self._feed_meta(), feed_rejected=feed_rejected)
        except Exception:
            if isinstance(feed, JsonlFeed):
                # The tick failed (a full write queue, a store error): read these lines again
                # next tick instead of skipping them; the file's offset is only persisted with
                # a tick that completed.
                self.feed = JsonlFeed(feed.path, offset=resume_at)
                self._feed_rejected_seen = 0
                feed.close()
            raise
        scopes = tick_scopes(self.g, now)  # each open scope's own tick (grimoire/scopes)
        if scopes:
            summary["scopes"] = scopes
        return summary

    async def _heartbeat(self) -> None:
        assert self._stop is not None
        loop = asyncio.get_running_loop()
        max_ticks = self.config.daemon.max_ticks
        while not self._stop.is_set():
            delay = self.schedule.delay(self._monotonic())
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), timeout=delay)
                    return
                except TimeoutError:
                    pass
            try:
                await loop.run_in_executor(self._tick_executor, self.step)
            except Exception as exc:  # logged loudly; the daemon keeps serving and ticking
                log.error("heartbeat.tick.failed", error=repr(exc), type=type(exc).__name__,
                          exc_info=exc)
            self._maybe_dream()
            if max_ticks is not None and self.ticks_run >= max_ticks:
                log.info("daemon.max_ticks.reached", ticks=self.ticks_run)
                self._stop.set()
                return

    def _maybe_dream(self) -> None:
        """While the heartbeat is idle until the next tick, one bounded dream slot on the
        learning thread, when that thread has nothing else to do (no cycle running, the
        last slot done). The tick thread never waits for it."""
        ctx = self.g.context
        if ctx.dream_hook is None or self.schedule.delay(self._monotonic()) <= 0:
            return
        running = ctx.extras.get("curator.running")
        if (running is not None and not running.done()) or (
                self._dreaming is not None and not self._dreaming.done()):
            return
        self._dreaming = self._curator_executor.submit(self._dream_slot)

    def _dream_slot(self) -> None:
        ctx = self.g.context
        assert ctx.dream_hook is not None
        try:
            counts = ctx.dream_hook(ctx, ctx.now())
            log.debug("dream.slot", **dict(counts))
        except Exception as exc:  # a dream never stops the daemon
            log.error("dream.failed", error=repr(exc), exc_info=exc)

    # -- running --------------------------------------------------------------------------

    async def run(self, signals: StopSignals | None = None) -> int:
        """Serve and tick until a stop; ``signals`` (installed by the caller) are routed here."""
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if signals is not None:
            signals.attach(loop, self.request_stop, self._on_sighup)
            if signals.first is not None:  # signalled while the stores were opening
                self.request_stop(signals.first)
                return 0
        d = self.config.daemon
        self.server = Server(self.g, self.config.socket, max_request_bytes=d.max_request_bytes,
                             max_connections=d.max_connections, idle_timeout_s=d.idle_timeout_s,
                             data_dir=Path(self.config.data_dir),
                             access=Access(self.config.access.scopes))
        await self.server.start()
        self.schedule = TickSchedule(self.interval_s, self._monotonic())
        log.info("daemon.ready", socket=str(self.config.socket), tick_s=self.interval_s,
                 feed=d.feed, pid=os.getpid(), tick=self.g.context.tick)
        self.notifier.ready(f"serving {self.config.socket}; feed {d.feed}")
        heartbeat = asyncio.create_task(self._heartbeat())
        watchdog = asyncio.create_task(self._watchdog())
        await self._stop.wait()
        self.notifier.stopping()
        await self.server.stop()
        await heartbeat
        watchdog.cancel()
        self._tick_executor.shutdown(wait=True)
        self._curator_executor.shutdown(wait=True)  # a running cycle ends before the close
        self._ann_executor.shutdown(wait=True)  # an index build ends before the close
        return 0

    async def _watchdog(self) -> None:
        """WATCHDOG=1 from the event loop itself: if the loop stalls, systemd notices."""
        interval = self.notifier.ping_interval_s()
        if interval is None or not self.notifier.enabled:
            return
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)

    @staticmethod
    def _on_sighup() -> None:
        log.warning("daemon.sighup.ignored",
                    reason="config reload is not supported; restart the daemon to apply changes")


class StopSignals:
    """Process-wide SIGTERM / SIGINT / SIGHUP handling for ``grimoire run``.

    Installed with ``signal.signal`` before the stores open and kept until the
    process exits (asyncio's own signal handlers are reset to the default when
    its loop closes, which would let a second SIGTERM kill the process by the
    default action mid-close). The handler itself only records and hands off:
    the first stop signal is passed to the running loop (``attach``) with
    ``call_soon_threadsafe``, a second one at least ``REPEAT_DEBOUNCE_S`` later
    exits at once, with 128 + signal (written to stdout as one JSON line with
    ``os.write``: the handler never logs through the logger, whose lock the
    interrupted code may hold).
    """

    def __init__(self) -> None:
        self.first: int | None = None
        self.first_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop: Callable[[int], None] | None = None
        self._on_hup: Callable[[], None] | None = None

    def install(self) -> None:
        for signum in _STOP_SIGNALS:
            signal.signal(signum, self._handle)
        signal.signal(signal.SIGHUP, self._handle)

    def attach(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[int], None],
               on_hup: Callable[[], None]) -> None:
        self._loop, self._on_stop, self._on_hup = loop, on_stop, on_hup

    def detach(self) -> None:
        self._loop = self._on_stop = self._on_hup = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        loop = self._loop
        if signum == signal.SIGHUP:
            if loop is not None and self._on_hup is not None:
                loop.call_soon_threadsafe(self._on_hup)
            return
        now = time.monotonic()
        if self.first is not None:
            if now - self.first_at >= REPEAT_DEBOUNCE_S:  # a second signal: exit at once
                # os.write, not the logger: it cannot block on a lock the interrupted code holds.
                os.write(1, b'{"event": "daemon.exit.immediate", "level": "warning", "signal": '
                         + str(int(signum)).encode() + b"}\n")
                os._exit(128 + signum)
            return  # the same stop delivered twice
        self.first, self.first_at = signum, now
        if loop is not None and self._on_stop is not None:
            loop.call_soon_threadsafe(self._on_stop, signum)


def resolve_paths(config: Config) -> Config:
    """A relative ``data_dir`` (or ``socket_path``) resolved once, against the working
    directory at start (under systemd that is ``/`` unless WorkingDirectory= says)."""
    changes: dict[str, Any] = {"data_dir": str(Path(config.data_dir).expanduser().resolve())}
    if config.socket_path:
        changes["socket_path"] = str(Path(config.socket_path).expanduser().resolve())
    return config.replace(**changes)


def freeze_startup_objects() -> None:
    """Move what opening the stores allocated out of the cyclic collector's reach.

    The modules, the model's wrappers, the stores' caches and the config are built once
    and live as long as the daemon. Left tracked, every full collection walks all of
    them (~180k objects on a 10k-episode store: ~0.26 s each, about once per 200
    retrieves, felt by whichever call triggers it). ``gc.freeze`` after one collection
    puts them in the permanent generation; garbage made later is collected as before.
    """
    gc.collect()
    gc.freeze()


def run_daemon(config: Config, inherit: str | None = None) -> int:
    """Open the stores, serve until signalled, close everything; the exit code. With
    ``inherit`` (a testament's directory), the agent first starts as its predecessor's
    successor (``grimoire.portable.succession``), before it serves or ticks."""
    started = time.monotonic()
    limit_malloc_arenas(MALLOC_ARENAS)  # before the model's and LanceDB's threads allocate
    map_large_allocations(MMAP_THRESHOLD)
    use_system_arrow_pool()
    given = config.data_dir
    config = resolve_paths(config)
    # Installed first: a stop signal while the model loads is honoured as one while the
    # stores open (a clean exit), not the default action.
    signals = StopSignals()
    signals.install()
    # Every setting is tried before anything is created: a bad feed, a refused mix of
    # simulated and real memory, an LLM setting or an embedding model that cannot load
    # leave no directory and no marker behind.
    d, data_dir = config.daemon, Path(config.data_dir)
    make_feed(d.feed, scenario=d.scenario, seed=d.seed).close()
    refuse_mixed(data_dir, d.feed)
    check_access(config.access.scopes, config.socket, data_dir)  # who may use which scope
    # The only place that reads the environment for the LLM (its API key); None = no LLM.
    llm = make_llm(config.llm, os.environ)
    embedder = embedder_for(config)
    # Simulated and real memory never share a directory (recorded before any store opens).
    marker = record_feed_kind(data_dir, d.feed, d.scenario)
    log.info("daemon.starting", pid=os.getpid(), data_dir=config.data_dir,
             **({"data_dir_given": given} if given != config.data_dir else {}),
             memory=marker["kind"], model=config.embedding.model)
    clock: Any = SystemClock()
    if config.daemon.speed != 1.0:
        clock = AcceleratedClock(SystemClock()(), config.daemon.speed)
        config = wall_time_settings(config)
    g = Grimoire.open(config=config, clock=clock, embedder=embedder, llm=llm)
    try:
        if isinstance(clock, AcceleratedClock):
            # Never let accelerated time run backwards across restarts (or a kill -9).
            semantic = g.context.semantic
            clock.start_ms = max(clock.start_ms, int(semantic.get_meta("clock_ms", 0)),
                                 int(semantic.get_meta("last_tick_ms", 0)))
        g.context.events.simulated = isinstance(clock, AcceleratedClock)
        if inherit is not None:
            from grimoire.portable.succession import inherit as inherit_testament

            got = inherit_testament(g.context, inherit)
            log.info("daemon.inherited", origin=got["origin"], generation=got["generation"],
                     bloodstains=got["bloodstains"], entries=got["entries"],
                     again=bool(got.get("already_inherited")))
        feed = open_feed(config, g)
        daemon = Daemon(g, feed, config)
        freeze_startup_objects()
        log.info("daemon.opened", seconds=round(time.monotonic() - started, 3))
        try:
            code = asyncio.run(daemon.run(signals))
        finally:
            signals.detach()
            if signals.first is None:  # stopped by max_ticks: a signal now means "hurry"
                signals.first, signals.first_at = signal.SIGTERM, time.monotonic() - 1.0
            feed.close()
            if isinstance(clock, AcceleratedClock):
                g.context.writer.call(lambda: g.context.semantic.set_meta("clock_ms", clock()))
    finally:
        g.close()
    log.info("daemon.stopped", code=code, ticks=daemon.ticks_run,
             skipped=daemon.schedule.skipped)
    return code
