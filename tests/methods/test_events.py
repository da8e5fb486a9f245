"""SPEC §12 events: structured log records, kept in memory, visible in status; log rendering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.logs import EventLog, configure_logging, iso_ms
from grimoire.methods.status import EVENT_KINDS
from grimoire.models.embedders import HashEmbedder


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def test_emit_logs_a_record_and_keeps_it_queryable() -> None:
    events = EventLog(capacity=3)
    with structlog.testing.capture_logs() as logs:
        events.emit("GrimoireDecay", 1000, entries_decayed=4, avg_confidence_before=0.6,
                    avg_confidence_after=0.55)
        for i in range(4):
            events.emit("IngestResult", 2000 + i, written=i, rejected=0)
    # Logged at debug, the time as ISO-8601.
    assert logs[0] == {"event": "GrimoireDecay", "at": iso_ms(1000), "entries_decayed": 4,
                       "avg_confidence_before": 0.6, "avg_confidence_after": 0.55,
                       "log_level": "debug"}
    assert iso_ms(1000) == "1970-01-01T00:00:01.000Z"
    assert len(logs) == 5
    assert [e["at"] for e in events.recent()] == [2001, 2002, 2003]  # capacity bounds memory
    assert events.recent(1, "IngestResult")[0]["written"] == 3
    assert events.recent(5, "GrimoireDecay") == []  # pushed out


def test_status_shows_recent_events_and_the_latest_of_each_kind(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path, clock=FrozenClock(), embedder=HashEmbedder()) as g:
        with structlog.testing.capture_logs() as logs:
            g.episode_write(text="gas at 12 gwei")
            g.entry_add(category="warning", content="Avoid swaps when gas_gwei is above 80 "
                        "because fees eat 40% of the gain")
            g.kg_assert(subject={"kind": "pool", "id": "p"}, predicate="deployed_by",
                        object={"kind": "address_cluster", "id": "d"}, valid_from=1)
            g.context.events.emit("CuratorCycleComplete", 5, entries_pruned=1,
                                  entries_promoted=2, heuristics_proposed=3)
            g.tick(feed_episodes=[{"text": "tick episode"}])
        writes = [e["kind"] for e in logs if e["event"] == "GrimoireWrite"]
        assert writes == ["episode", "entry", "triple", "episode"]
        status = g.status()
    assert set(status["last_events"]) == set(EVENT_KINDS)
    assert status["last_events"]["CuratorCycleComplete"]["entries_promoted"] == 2
    assert status["last_events"]["IngestResult"]["written"] == 1
    assert status["last_events"]["GrimoireDecay"] is None
    assert [e["event"] for e in status["events"]][-2:] == ["GrimoireWrite", "IngestResult"]


def test_json_logs_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")  # pytest's stdout is not a terminal
    structlog.get_logger().info("server.listening", socket="/x.sock")
    structlog.get_logger().debug("hidden.below.level")
    record = json.loads(capsys.readouterr().out)
    assert record["event"] == "server.listening" and record["socket"] == "/x.sock"
    assert record["level"] == "info" and record["timestamp"].endswith("Z")


def test_readable_logs_on_request_and_level_filtering(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    configure_logging("warning", json=False)
    log = structlog.get_logger()
    log.info("quiet.event")
    log.warning("daemon.sighup.ignored", reason="restart to apply")
    out = capsys.readouterr().out
    assert "quiet.event" not in out
    line = out.strip()
    assert "daemon.sighup.ignored" in line and "reason" in line
    assert not line.startswith("{")
