"""The heartbeat: one tick's work (run_tick), its schedule, skipped ticks, feeds, events.

Ticks are driven one at a time with an explicit ``now`` (unix ms) and, for the
daemon's loop, a fake monotonic clock: nothing here sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.context import Context
from grimoire.errors import BusyError
from grimoire.feeds import NoneFeed, make_feed
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.daemon import AcceleratedClock, Daemon, TickSchedule, open_feed
from grimoire.service.heartbeat import run_tick

TICK_MS = 40_000


def open_g(path: Path, clock: FrozenClock, **config: Any) -> Grimoire:
    return Grimoire.open(path, config=Config().replace(**config), clock=clock,
                         embedder=HashEmbedder())


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_g(tmp_path, clock) as opened:
        opened.context.distill_hook = None
        opened.context.curator_hook = None
        yield opened


def ticks(g: Grimoire, clock: FrozenClock, n: int, **kwargs: Any) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        clock.advance(TICK_MS)
        out.append(run_tick(g.context, now=clock.now, **kwargs))
    return out


# -- one tick -----------------------------------------------------------------------------------


def test_a_tick_counts_persists_and_reports_its_ingest(g: Grimoire, clock: FrozenClock) -> None:
    feed = [{"text": "gas 20 gwei", "metrics": {"gas_gwei": 20}},
            {"text": "", "type": "observation"},  # refused: empty text
            {"text": "gas 25 gwei", "tick_id": 99}]
    with structlog.testing.capture_logs() as logs:
        summary = ticks(g, clock, 1, feed_episodes=feed, source="sim")[0]
    assert summary["tick"] == 1 and summary["written"] == 2 and summary["rejected"] == 1
    ingest = [e for e in logs if e["event"] == "IngestResult"]
    assert len(ingest) == 1
    assert ingest[0]["written"] == 2 and ingest[0]["rejected"] == 1
    assert ingest[0]["source"] == "sim" and ingest[0]["tick"] == 1
    assert any(e["event"] == "ingest.feed.rejected" and "text" in e["error"] for e in logs)
    assert g.context.semantic.get_meta("tick") == 1
    assert g.context.semantic.get_meta("last_tick_ms") == clock.now
    episodes = g.context.episodes.recent(10)
    assert sorted(e.tick_id for e in episodes) == [1, 99]  # default: this tick's number
    assert g.status()["last_events"]["IngestResult"]["written"] == 2


def test_a_tick_without_a_feed_emits_no_ingest_result(g: Grimoire, clock: FrozenClock) -> None:
    with structlog.testing.capture_logs() as logs:
        ticks(g, clock, 2)
    assert not [e for e in logs if e["event"] == "IngestResult"]
    with structlog.testing.capture_logs() as logs:
        ticks(g, clock, 1, source="jsonl")  # a configured feed reports every tick, even 0/0
    assert [(e["written"], e["rejected"]) for e in logs if e["event"] == "IngestResult"] == [
        (0, 0)]


def test_the_tick_counter_survives_a_restart(tmp_path: Path, clock: FrozenClock) -> None:
    with open_g(tmp_path, clock) as g:
        ticks(g, clock, 7)
    with open_g(tmp_path, clock) as g:
        assert g.health()["tick"] == 7
        assert ticks(g, clock, 1)[0]["tick"] == 8


def test_each_tick_flushes_the_episode_buffer_and_compaction_follows(
        tmp_path: Path, clock: FrozenClock) -> None:
    """The tick lets the store flush buffered rows to LanceDB; compaction runs on schedule."""
    with open_g(tmp_path, clock, **{"episodes.flush_ms": 1000,
                                    "episodes.compact_every_appends": 3}) as g:
        g.context.distill_hook = g.context.curator_hook = None
        g.episode_write(text="first")
        assert g.context.episodes.buffered == 1  # below flush_rows, younger than flush_ms
        flushed = [t["flushed"] for t in ticks(g, clock, 1)]
        assert flushed == [1] and g.context.episodes.buffered == 0
        for i in range(3):
            g.episode_write(text=f"more {i}")
            ticks(g, clock, 1)
        stats = g.context.episodes.stats()
        assert stats["buffered_rows"] == 0 and stats["flushed_rows"] == 4
        assert stats["last_compact"] is not None
        assert stats["flushes_since_compact"] == 1


def test_extra_meta_is_persisted_with_the_tick(g: Grimoire, clock: FrozenClock) -> None:
    ticks(g, clock, 1, meta={"feed.jsonl": {"path": "/x", "offset": 42}})
    assert g.context.semantic.get_meta("feed.jsonl") == {"path": "/x", "offset": 42}


# -- the distillation and curator schedule ----------------------------------------------------


def test_distillation_runs_per_strategy_after_every_ten_new_episodes(
        g: Grimoire, clock: FrozenClock) -> None:
    calls: list[tuple[str | None, int]] = []

    def distil(ctx: Context, strategy: str | None, now: int) -> dict[str, Any]:
        calls.append((strategy, now))
        return {"ops": len(calls)}

    g.context.distill_hook = distil
    g.episode_write_batch(episodes=[{"text": f"a{i}", "strategy": "alpha"} for i in range(12)]
                          + [{"text": f"b{i}", "strategy": "beta"} for i in range(9)]
                          + [{"text": f"g{i}"} for i in range(10)])
    first = ticks(g, clock, 1)[0]
    assert calls == [(None, clock.now), ("alpha", clock.now)]  # beta has only 9
    assert [d["strategy"] for d in first["distilled"]] == [None, "alpha"]
    assert ticks(g, clock, 1)[0].get("distilled") is None  # the counters were reset
    g.episode_write(text="b9", strategy="beta")
    assert [d["strategy"] for d in ticks(g, clock, 1)[0]["distilled"]] == ["beta"]
    # The feed's own episodes count too.
    feed = [{"text": f"sim {i}", "strategy": "alpha"} for i in range(10)]
    assert [d["strategy"] for d in ticks(g, clock, 1, feed_episodes=feed)[0]["distilled"]] == [
        "alpha"]
    assert len(calls) == 4


def test_curator_runs_every_fifty_ticks(g: Grimoire, clock: FrozenClock) -> None:
    cycles: list[int] = []
    g.context.curator_hook = lambda ctx, now: {"cycle": len(cycles) + 1, "tick": cycles.append(
        ctx.tick) or ctx.tick}
    summaries = ticks(g, clock, 101)
    assert cycles == [50, 100]
    assert [s["tick"] for s in summaries if "curator" in s] == [50, 100]
    assert summaries[49]["curator"] == {"cycle": 1, "tick": 50}


def test_unwired_hooks_are_reported_not_faked(g: Grimoire, clock: FrozenClock) -> None:
    g.episode_write_batch(episodes=[{"text": f"x{i}"} for i in range(10)])
    summaries = ticks(g, clock, 50)
    assert summaries[0]["distilled"] == [{"strategy": None, "skipped": "no distiller wired"}]
    assert summaries[49]["curator"] == {"skipped": "no curator wired"}


def test_a_failing_hook_is_logged_and_does_not_stop_the_tick(g: Grimoire,
                                                             clock: FrozenClock) -> None:
    def broken(ctx: Context, strategy: str | None, now: int) -> dict[str, Any]:
        raise RuntimeError("distiller bug")

    g.context.distill_hook = broken
    g.context.curator_hook = lambda ctx, now: {"ran": True}
    g.context.config = g.context.config.replace(**{"curator.every_ticks": 1})
    g.episode_write_batch(episodes=[{"text": f"x{i}"} for i in range(10)])
    with structlog.testing.capture_logs() as logs:
        summary = ticks(g, clock, 1)[0]
    assert summary["distilled"] == [{"strategy": None,
                                     "error": "RuntimeError: distiller bug"}]
    assert summary["curator"] == {"ran": True}
    failed = [e for e in logs if e["event"] == "heartbeat.hook.failed"]
    assert failed and failed[0]["hook"] == "distill" and failed[0]["log_level"] == "error"
    assert g.context.semantic.get_meta("tick") == 1


# -- the schedule on the monotonic clock ---------------------------------------------------------


def test_tick_schedule_skips_what_a_stall_missed() -> None:
    s = TickSchedule(1.0, start=100.0)
    assert not s.due(100.5) and s.delay(100.5) == pytest.approx(0.5)
    assert s.due(101.0)
    assert s.advance(101.2) == 0 and s.next_due == 102.0  # on time
    assert s.advance(107.5) == 5  # the tick due at 102 ran until 107.5: 103…107 are gone
    assert s.next_due == 108.0 and s.skipped == 5
    assert s.advance(109.0) == 0  # ended exactly on the next boundary: that one runs now
    assert s.next_due == 109.0
    assert s.advance(109.001) == 0 and s.next_due == 110.0


@given(start=st.floats(0, 1e6), interval=st.floats(0.01, 100),
       durations=st.lists(st.floats(0, 500), min_size=1, max_size=20))
def test_tick_schedule_never_replays_and_stays_on_its_grid(
        start: float, interval: float, durations: list[float]) -> None:
    """Whatever the stalls: the next tick is in the future, on the grid, skips all counted."""
    s = TickSchedule(interval, start)
    now = start
    ran = 0
    for took in durations:
        now = max(now, s.next_due)  # the loop waits until the tick is due
        ran += 1
        now += took
        s.advance(now)
        assert s.next_due >= now - 1e-6 * max(1.0, abs(now))
        steps = (s.next_due - start) / interval
        assert abs(steps - round(steps)) < 1e-6 * max(1.0, steps)
    assert ran + s.skipped == pytest.approx(round((s.next_due - start) / interval) - 1, abs=1)


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StallingFeed(NoneFeed):
    """A feed whose poll on a chosen tick takes ``stall`` seconds of the fake clock."""

    def __init__(self, mono: FakeMonotonic, stall_on: int, stall: float) -> None:
        super().__init__()
        self.name = "stalling"
        self.mono, self.stall_on, self.stall = mono, stall_on, stall
        self.polled: list[int] = []

    def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
        self.polled.append(tick)
        if tick == self.stall_on:
            self.mono.now += self.stall
        return [{"text": f"tick {tick}"}]


def test_daemon_step_runs_due_ticks_and_skips_after_a_stalled_one(g: Grimoire) -> None:
    mono = FakeMonotonic()
    feed = StallingFeed(mono, stall_on=2, stall=5.5)
    config = g.context.config.replace(**{"daemon.tick_seconds": 40, "daemon.speed": 40})
    d = Daemon(g, feed, config, monotonic=mono)  # one tick per fake second
    assert d.interval_s == 1.0
    assert d.step() is None  # not due yet
    mono.now = 1001.0
    assert d.step()["tick"] == 1
    mono.now = 1002.0
    with structlog.testing.capture_logs() as logs:
        assert d.step()["tick"] == 2  # stalls until 1007.5
    assert d.schedule.skipped == 5 and d.schedule.next_due == 1008.0
    assert [e["skipped"] for e in logs if e["event"] == "heartbeat.ticks.skipped"] == [5]
    assert d.step() is None  # at 1007.5 nothing is replayed
    mono.now = 1008.0
    assert d.step()["tick"] == 3
    assert feed.polled == [1, 2, 3]
    assert g.context.episodes.count() == 3
    assert g.status()["daemon"]["ticks_skipped"] == 5


def test_a_curator_tick_in_the_daemon_succeeds_and_is_logged(
        tmp_path: Path, clock: FrozenClock) -> None:
    """The daemon's tick starts the real curator cycle on the curator's own thread (beside
    the heartbeat, which does not wait for it); the cycle logs one line and does not fail."""
    mono = FakeMonotonic()
    with open_g(tmp_path, clock) as g:
        config = g.context.config.replace(**{"daemon.tick_seconds": 1,
                                             "curator.every_ticks": 1})
        g.context.config = config  # the heartbeat reads the schedule from the context
        d = Daemon(g, NoneFeed(), config, monotonic=mono)
        mono.now = 1001.0
        with structlog.testing.capture_logs() as logs:
            summary = d.step()
            assert summary is not None
            assert summary["curator"] == {"started": "in the background"}
            g.context.extras["curator.running"].result(timeout=120)
        assert d.ticks_failed == 0
        (event,) = [e for e in logs if e["event"] == "curator.cycle"]
        assert event["tick"] == summary["tick"] == 1 and event["cycle"] == 1
        assert event["playbook"].startswith("PLAYBOOK.md updated: ")
        assert g.context.config.playbook_path.exists()


def test_accelerated_clock_runs_speed_times_faster_from_its_start() -> None:
    """--speed: simulated unix ms advance ``speed`` times the monotonic seconds elapsed,
    from ``start_ms`` (which run_daemon raises to the last stored tick on a restart)."""
    mono = FakeMonotonic()
    clock = AcceleratedClock(1_000_000, 600.0, monotonic=mono)
    assert clock() == 1_000_000
    mono.now += 1.5
    assert clock() == 1_000_000 + 900_000
    clock.start_ms = 5_000_000
    assert clock() == 5_000_000 + 900_000
    with pytest.raises(ValueError, match="speed"):
        AcceleratedClock(0, 0.0, monotonic=mono)


def test_a_failing_tick_still_advances_the_schedule(g: Grimoire) -> None:
    mono = FakeMonotonic()

    class Broken(NoneFeed):
        def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
            raise OSError("disk gone")

    d = Daemon(g, Broken(), g.context.config.replace(**{"daemon.tick_seconds": 1}),
               monotonic=mono)
    mono.now = 1001.0
    with pytest.raises(OSError):
        d.step()
    assert d.ticks_failed == 1 and d.schedule.next_due == 1002.0


# -- the jsonl feed resumes at its persisted offset ----------------------------------------------


def test_jsonl_feed_offset_survives_a_restart(tmp_path: Path, clock: FrozenClock) -> None:
    feed_file = tmp_path / "agent.jsonl"
    lines = [json.dumps({"text": f"line {i}", "strategy": "s"}) for i in range(3)]
    feed_file.write_text("\n".join(lines) + "\nnot json\n")
    config_items = {"daemon.feed": f"jsonl:{feed_file}", "daemon.tick_seconds": 1}
    mono = FakeMonotonic()
    with open_g(tmp_path / "data", clock, **config_items) as g:
        feed = open_feed(g.context.config, g)
        d = Daemon(g, feed, g.context.config, monotonic=mono)
        mono.now += 1
        with structlog.testing.capture_logs() as logs:
            summary = d.step()
        assert summary is not None and summary["written"] == 3 and summary["rejected"] == 1
        assert [(e["written"], e["rejected"]) for e in logs if e["event"] == "IngestResult"] == [
            (3, 1)]
        saved = g.context.semantic.get_meta("feed.jsonl")
        assert saved["offset"] == feed_file.stat().st_size
        feed.close()
    with feed_file.open("a") as f:
        f.write(json.dumps({"text": "line 3"}) + "\n" + json.dumps({"text": "line 4"}))
    with open_g(tmp_path / "data", clock, **config_items) as g:
        feed = open_feed(g.context.config, g)
        d = Daemon(g, feed, g.context.config, monotonic=mono)
        mono.now += 1
        assert d.step()["written"] == 1  # line 3 only: line 4 has no newline yet
        texts = sorted(e.text for e in g.context.episodes.scan())
        assert texts == ["line 0", "line 1", "line 2", "line 3"]
        feed.close()
    # Another path does not inherit this file's offset.
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"text": "other 0"}) + "\n")
    with open_g(tmp_path / "data", clock, **{**config_items,
                                             "daemon.feed": f"jsonl:{other}"}) as g:
        feed = open_feed(g.context.config, g)
        assert feed.offset == 0  # type: ignore[attr-defined]
        feed.close()


def test_make_feed_specs() -> None:
    assert make_feed("none").name == "none"
    assert make_feed("sim").name == "sim"


def test_a_failed_tick_reads_the_same_jsonl_lines_again(tmp_path: Path,
                                                        clock: FrozenClock) -> None:
    """A tick refused by a full write queue does not lose the file's lines: they come next."""
    feed_file = tmp_path / "agent.jsonl"
    feed_file.write_text("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(3)))
    mono = FakeMonotonic()
    with open_g(tmp_path / "data", clock, **{"daemon.feed": f"jsonl:{feed_file}",
                                             "daemon.tick_seconds": 1,
                                             "daemon.write_queue": 1}) as g:
        d = Daemon(g, open_feed(g.context.config, g), g.context.config, monotonic=mono)
        gate, busy = threading.Event(), threading.Event()
        holders = [threading.Thread(target=g.context.writer.call,
                                    args=(lambda: (busy.set(), gate.wait()),)),
                   threading.Thread(target=g.context.writer.call, args=(lambda: None,))]
        holders[0].start()
        busy.wait(10)
        holders[1].start()  # waits in the queue, which is now full
        while g.context.writer.qsize() < 1:
            time.sleep(0.001)
        mono.now += 1
        with pytest.raises(BusyError):
            d.step()
        gate.set()
        for t in holders:
            t.join(10)
        mono.now += 1
        assert d.step()["written"] == 3
        assert sorted(e.text for e in g.context.episodes.scan()) == [
            "line 0", "line 1", "line 2"]
        d.feed.close()


def test_skipped_ticks_are_warned_about_at_most_once_a_minute(g: Grimoire) -> None:
    """Each overrun counts; the warning comes once per minute with the skips since the last."""
    mono = FakeMonotonic()

    class Stalls(NoneFeed):
        def poll(self, tick: int, now_ms: int) -> list[dict[str, Any]]:
            mono.now += 2.5  # every tick overruns its 1 s interval: 2 ticks skipped
            return []

    config = g.context.config.replace(**{"daemon.tick_seconds": 40, "daemon.speed": 40})
    d = Daemon(g, Stalls(), config, monotonic=mono)
    with structlog.testing.capture_logs() as logs:
        for _ in range(30):  # 30 ticks, 90 fake seconds
            mono.now = max(mono.now, d.schedule.next_due)
            d.step()
    warned = [e for e in logs if e["event"] == "heartbeat.ticks.skipped"
              and e["log_level"] == "warning"]
    assert len(warned) == 2  # at the first overrun, and once the minute had passed
    assert warned[0]["skipped"] == 2
    assert sum(e["skipped"] for e in warned) < d.schedule.skipped == 60
    assert g.status()["daemon"]["ticks_skipped"] == 60


def test_the_daemon_builds_the_episode_vector_index_in_the_background(
        tmp_path: Path, clock: FrozenClock) -> None:
    """Past episodes.ann_threshold a tick hands the LanceDB index build to its own thread
    (the tick returns without it); once built, its recall@10 is in the status."""
    mono = FakeMonotonic()
    with open_g(tmp_path, clock, **{"episodes.ann_threshold": 600,
                                    "daemon.tick_seconds": 1}) as g:
        g.context.curator_hook = None
        g.episode_write_batch([{"text": f"gas {i % 89} gwei on pool {i % 7} note {i}"}
                               for i in range(700)])
        g.context.episodes.flush()
        d = Daemon(g, NoneFeed(), g.context.config, monotonic=mono)
        mono.now = 1001.0
        assert d.step() is not None
        assert d.ann_job is not None
        d.ann_job.result(timeout=120)
        ann = g.status()["episodes"]["ann"]
        assert ann["indexed_rows"] >= 600 and ann["recall_at_10"] is not None
        mono.now = 1002.0
        d.step()  # nothing new: no second build
        assert g.status()["episodes"]["ann"]["indexed_rows"] == ann["indexed_rows"]
