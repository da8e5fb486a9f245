"""Two Grimoires exchange warnings and validated heuristics through one LanceDB table."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.models.embedders import Embedder
from grimoire.records import EntryStatus

WARNING = "Avoid swaps when gas_gwei is above 80 because fees eat the whole gain"
HEURISTIC = "When RSI is oversold and volume is declining, enter a small mean-reversion position"
CANDIDATE = "When funding rates flip negative, close leveraged long positions within one hour"


def test_two_agents_exchange_through_a_shared_table(tmp_path: Path,
                                                    real_embedder: Embedder) -> None:
    uri = str(tmp_path / "clade")
    with Grimoire.open(tmp_path / "alpha", embedder=real_embedder) as a:
        w = a.entry_add(category="warning", content=WARNING, confidence=0.9)["id"]
        h = a.entry_add(category="heuristic", content=HEURISTIC, confidence=0.8)["id"]
        a.entry_add(category="heuristic", content=CANDIDATE, confidence=0.8)  # not validated
        sem = a.context.semantic
        for eid, bloody in ((h, False), (w, True)):
            entry = sem.get_entry(eid)
            assert entry is not None
            sem.update_entry(dataclasses.replace(entry, status=EntryStatus.ACTIVE,
                                                 validated_count=3, is_bloodstain=bloody))
        first = a.clade_publish(uri)
        assert first["published"] == 2 and first["agent"] == "alpha"
        assert a.clade_publish(uri)["published"] == 0  # publishing again adds nothing
        assert a.clade_pull(uri)["foreign"] == 0  # never re-imports its own items
    with Grimoire.open(tmp_path / "beta", embedder=real_embedder) as b:
        got = b.clade_pull(uri)
        assert got["foreign"] == 2 and got["entries"]["admitted"] == 2
        entries = {e["content"]: e for e in b.entry_list(limit=100)["entries"]}
        assert set(entries) == {WARNING, HEURISTIC}
        assert all(e["provenance"] == "clade" and e["status"] == "candidate"
                   for e in entries.values())
        assert entries[WARNING]["is_bloodstain"] is True
        assert entries[WARNING]["source"]["golem_id"] == "alpha"
        assert entries[HEURISTIC]["confidence"] < 0.8  # discounted by the clade weight
        again = b.clade_pull(uri)  # nothing new: the pulled keys are not read again
        assert again["foreign"] == 0 and again["entries"] == {"already_imported": 0}
        alerts = b.context.episodes.recent(10, types=["clade_alert"])
        assert len(alerts) == 2 and all(e.ref and e.ref.startswith("clade:") for e in alerts)
        assert {e.id for e in alerts} == {e["parent_episode_ids"][0]
                                          for e in entries.values()}
        # what beta pulled is never published back as beta's own
        b.entry_add(category="warning", content="Never bridge funds while the sequencer is "
                    "down because withdrawals stall for hours", confidence=0.9)
        assert b.clade_publish(uri)["published"] == 1
    with Grimoire.open(tmp_path / "alpha", embedder=real_embedder) as a:
        back = a.clade_pull(uri)
        assert back["foreign"] == 1 and back["entries"].get("admitted") == 1


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An S3-compatible server process (moto's, from PyPI) on a loopback port, one bucket."""
    pytest.importorskip("moto")
    import boto3

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "no S3 server"
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                     aws_secret_access_key="test", region_name="us-east-1"
                     ).create_bucket(Bucket="clade")
        for key, value in {"AWS_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": "test",
                           "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                           "AWS_ALLOW_HTTP": "true"}.items():
            monkeypatch.setenv(key, value)
        yield "s3://clade/shared"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
def test_exchange_through_an_s3_compatible_server(s3_server: str, tmp_path: Path,
                                                  real_embedder: Embedder) -> None:
    with Grimoire.open(tmp_path / "alpha", embedder=real_embedder) as a:
        a.entry_add(category="warning", content=WARNING, confidence=0.9)
        assert a.clade_publish(s3_server)["published"] == 1
    with Grimoire.open(tmp_path / "beta", embedder=real_embedder) as b:
        got = b.clade_pull(s3_server)
        assert got["entries"]["admitted"] == 1
        (entry,) = b.entry_list(limit=10)["entries"]
        assert entry["content"] == WARNING and entry["provenance"] == "clade"
