"""``Grimoire.open(read_only=True)`` beside a running daemon (issue 13 item 1, API.md).

A real daemon process owns the data directory (its LOCK, the episode store's lock, the
single writer) and writes through its socket; this test process opens the same directory
read-only and reads it while the daemon keeps serving writes.

What the reader sees:

- every write the daemon acknowledged before the open (episodes still in its journal
  included);
- entries, logs, causal edges and knowledge-graph triples live: each read sees the
  daemon's last commit (SQLite WAL and LMDB readers);
- episodes as of the open (a snapshot of LanceDB plus the journal): the daemon's later
  episodes appear when the directory is opened again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire.config import Config
from grimoire.errors import NotAvailableError
from grimoire.grimoire import Grimoire
from tests.service.daemon_support import (
    REPO,
    daemon_env,
    raw_connect,
    rpc,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)

POOL = {"kind": "pool", "id": "univ3-eth-usdc"}


@pytest.fixture
def daemon() -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    with short_dir() as root:
        data = root / "d"
        proc = start_daemon(data, "--feed", "none", "--tick-seconds", "3600")
        try:
            wait_ready(proc, data / "grimoire.sock")
            yield data, proc
        finally:
            stop_daemon(proc)


def call(data: Path, method: str, params: dict[str, Any] | None = None) -> Any:
    with raw_connect(data / "grimoire.sock") as sock:
        reply = rpc(sock, method, params or {})
    assert "result" in reply, reply
    return reply["result"]


def grimoire_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """This checkout's CLI (``python -m grimoire``), with the daemon's environment."""
    return subprocess.run([sys.executable, "-m", "grimoire", *args], capture_output=True,
                          text=True, env=daemon_env(), cwd=str(REPO), timeout=300)


def open_reader(data: Path) -> Grimoire:
    # The daemon's configuration (tests/service/daemon_support.daemon_env: the hash embedder).
    config = Config().replace(**{"data_dir": str(data), "embedding.model": "hash-384"})
    return Grimoire.open(config=config, read_only=True)


@pytest.mark.slow  # ~15 s: a daemon start, writes, read-only opens, report and export
def test_a_read_only_open_beside_the_daemon_sees_its_acknowledged_writes(
        daemon: tuple[Path, subprocess.Popen[bytes]]) -> None:
    data, proc = daemon
    cause = call(data, "episode.write", {"text": "gas spiked to 140 gwei on mainnet",
                                         "type": "observation"})["id"]
    effects = [call(data, "episode.write", {
        "text": f"swap {i} ETH for USDC reverted: out of gas", "type": "action",
        "outcome": "negative"})["id"] for i in range(1, 6)]
    call(data, "causal.link", {"cause_id": cause, "effect_id": effects[0]})
    warning = call(data, "entry.add", {
        "category": "warning", "content": "Avoid swaps when gas is above 80 gwei"})["id"]
    call(data, "kg.assert", {"subject": POOL, "predicate": "oracle_dependency",
                             "object": {"kind": "oracle", "id": "chainlink"},
                             "valid_from": 100})
    call(data, "curator.run")

    with open_reader(data) as g:  # the daemon keeps its LOCK and keeps running
        status = g.status()
        assert status["episodes"]["rows"] == 6
        assert warning in {e["id"] for e in g.entry_list()["entries"]}
        items = g.retrieve(query="swap reverted out of gas", k=3)["items"]
        assert {i["id"] for i in items} & set(effects), items
        assert g.entry_explain(warning[:8])["entry"]["id"] == warning
        assert g.kg_at(POOL, 150)["triples"][0]["object"]["value"]["id"] == "chainlink"
        assert [c["id"] for c in g.causal_chain(id=effects[0])["chain"]][:1] == [cause]
        assert "Avoid swaps when gas is above 80 gwei" in g.playbook_get()["markdown"]
        with pytest.raises(NotAvailableError, match=r"entry\.add"):
            g.entry_add(category="warning", content="written by a reader")

        # The daemon writes on while the reader is open.
        later_entry = call(data, "entry.add", {
            "category": "heuristic", "content": "Split swaps above 5 ETH into two"})["id"]
        call(data, "kg.assert", {"subject": POOL, "predicate": "oracle_dependency",
                                 "object": {"kind": "oracle", "id": "pyth"},
                                 "valid_from": 200})
        later_episode = call(data, "episode.write", {"text": "bridged 3 ETH to base"})["id"]
        # Live: entries and triples committed after the open.
        assert g.entry_get(later_entry)["content"] == "Split swaps above 5 ETH into two"
        assert g.kg_at(POOL, 250)["triples"][0]["object"]["value"]["id"] == "pyth"
        # A snapshot: episodes written after the open are not there yet.
        assert g.status()["episodes"]["rows"] == 6
        with pytest.raises(Exception, match="no episode"):
            g.episode_get(later_episode)

    with open_reader(data) as again:  # reopened: the newer episode is there
        assert again.episode_get(later_episode)["text"] == "bridged 3 ETH to base"
        assert again.status()["episodes"]["rows"] == 7

    # The CLI's report and export open the directory read-only too: no "stop the daemon".
    report = data.parent / "report.html"
    p = grimoire_cli("report", "--data", str(data), "--out", str(report))
    assert p.returncode == 0 and p.stdout.startswith(f"wrote {report}"), p.stderr
    assert "Avoid swaps when gas is above 80 gwei" in report.read_text(encoding="utf-8")
    bundle = data.parent / "bundle"
    p = grimoire_cli("export", "--json", "--data", str(data), str(bundle))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["counts"]["triples"] >= 1
    assert "Avoid swaps when gas is above 80 gwei" in (bundle / "entries.jsonl").read_text(
        encoding="utf-8")

    # The daemon never noticed: it still answers and writes.
    assert call(data, "episode.write", {"text": "one more after the readers"})["id"]
    assert call(data, "status")["episodes"]["rows"] == 8
    assert proc.poll() is None
    assert stop_daemon(proc) == 0


@pytest.mark.slow  # ~10 s: a daemon start and a few read-only opens under writes
def test_read_only_opens_during_flushes_and_compactions_miss_no_acknowledged_episode() -> None:
    """The daemon flushes every 3 rows and compacts (removing old versions) every 2 flushes
    while a client writes without pause; each read-only open holds every episode whose
    write was acknowledged before the open began: the journal is read before LanceDB, and
    a read whose LanceDB version is removed under it reads the newer one."""
    env = daemon_env(GRIMOIRE_EPISODES__FLUSH_ROWS="3", GRIMOIRE_EPISODES__FLUSH_MS="0",
                     GRIMOIRE_EPISODES__COMPACT_EVERY_APPENDS="2",
                     GRIMOIRE_EPISODES__CLEANUP_OLDER_THAN_S="0")
    with short_dir() as root:
        data = root / "d"
        proc = start_daemon(data, "--feed", "none", "--tick-seconds", "3600", env=env)
        acked: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            with raw_connect(data / "grimoire.sock") as sock:
                n = 0
                while not stop.is_set():
                    n += 1
                    reply = rpc(sock, "episode.write", {"text": f"tick {n}: pool moved"})
                    acked.append(reply["result"]["id"])

        try:
            wait_ready(proc, data / "grimoire.sock")
            thread = threading.Thread(target=writer, daemon=True)
            thread.start()
            for _ in range(4):
                time.sleep(0.3)
                before = list(acked)
                with open_reader(data) as g:
                    store = g.context.episodes
                    missing = [i for i in before if store.get(i) is None]
                    assert not missing, f"{len(missing)} of {len(before)} acked rows missing"
                    assert store.count() >= len(before)
            stop.set()
            thread.join(30)
            assert len(acked) > 20
        finally:
            stop.set()
            assert stop_daemon(proc) == 0
