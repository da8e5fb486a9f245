"""``grimoire run`` as a real subprocess: logs, signals, config, socket, no network.

The daemon runs as ``python -m grimoire run`` with ``embedding.model: hash-384``
(set through the environment), so no model files are needed; one slow test
uses the real model.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire.errors import GrimoireError
from grimoire.service.client import Client
from grimoire.service.daemon import REPEAT_DEBOUNCE_S
from tests.service.daemon_support import (
    daemon_env,
    json_lines,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def root() -> Iterator[Path]:
    with short_dir() as path:
        yield path


def _wait_for(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        match = re.fullmatch(r"socket:\[(\d+)\]", target)
        if match:
            inodes.add(match.group(1))
    return inodes


def _inet_inodes(pid: int) -> dict[str, set[str]]:
    """Socket inodes per IP protocol table in the process's network namespace."""
    out: dict[str, set[str]] = {}
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        rows = path.read_text().splitlines()[1:]
        out[table] = {row.split()[9] for row in rows if len(row.split()) > 9}
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_serves_ticks_logs_json_and_drains_on_a_signal(root: Path, sig: int) -> None:
    data = root / "data"
    proc = start_daemon(data, "--feed", "sim", "--speed", "600")
    sock = data / "grimoire.sock"
    try:
        wait_ready(proc, sock)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        with Client(sock) as client:
            ids = [client.call("episode.write", {"text": f"agent note {i}"})["id"]
                   for i in range(5)]
            status = _wait_for(lambda: (s := client.call("status"))["tick"] >= 3 and s)
        assert status["embedding"]["model"] == "hash-384"
        assert status["daemon"]["feed"] == "sim" and status["daemon"]["interval_s"] == 0.3
        assert status["last_events"]["IngestResult"]["source"] == "sim"
        assert status["episodes"]["rows"] >= 5
        code = stop_daemon(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert code == 0, proc.stderr.read().decode() if proc.stderr else ""
    records = json_lines(out)  # every stdout line is a JSON log record (not a terminal)
    events = [r["event"] for r in records]
    for name in ("daemon.starting", "daemon.ready", "daemon.draining", "server.stopped",
                 "grimoire.close", "daemon.stopped"):
        assert name in events, name
    # Per-tick records are debug (status keeps them: last_events above); info stays short.
    assert "IngestResult" not in events and "GrimoireWrite" not in events
    assert all({"event", "level", "timestamp"} <= set(r) for r in records)
    assert not sock.exists()
    # The directory holds simulated memory now: a real run on it is refused, untouched.
    refused = start_daemon(data, "--feed", "none")
    assert refused.wait(120) == 2
    err = refused.stderr.read().decode() if refused.stderr else ""
    assert "holds simulated memory" in err and "--data" in err and "Traceback" not in err
    # Everything acknowledged is there after a restart (the simulator, not ticking during
    # this check), and the tick counter continued.
    proc = start_daemon(data, "--feed", "sim", "--tick-seconds", "3600")
    try:
        wait_ready(proc, sock)
        with Client(sock) as client:
            assert [client.call("episode.get", {"id": i})["text"] for i in ids] == [
                f"agent note {i}" for i in range(5)]
            assert client.call("health")["tick"] >= status["tick"]
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_second_signal_exits_at_once(root: Path) -> None:
    """Two signals while the stores are still opening: the second exits with 128+signal."""
    proc = start_daemon(root / "data", "--feed", "none")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert json.loads(line)["event"] == "daemon.starting"  # handlers are installed by now
    proc.send_signal(signal.SIGTERM)
    # Further apart than the repeat debounce; opening the stores (importing LanceDB alone)
    # takes longer than this.
    time.sleep(REPEAT_DEBOUNCE_S + 0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 128 + signal.SIGTERM
    events = [r["event"] for r in json_lines(proc.stdout.read().decode())]
    assert "daemon.ready" not in events and "daemon.stopped" not in events


def test_the_same_signal_delivered_twice_still_drains_cleanly(root: Path) -> None:
    """Like ``timeout -s INT``: the process and its group both get SIGINT, back to back."""
    data = root / "data"
    proc = start_daemon(data, "--feed", "sim", "--speed", "600")
    try:
        wait_ready(proc, data / "grimoire.sock")
        proc.send_signal(signal.SIGINT)
        os.killpg(proc.pid, signal.SIGINT)  # start_new_session: its group is its pid
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [r["event"] for r in json_lines(proc.stdout.read().decode() if proc.stdout else "")]
    assert code == 0
    assert "daemon.stopped" in events and "daemon.exit.immediate" not in events


def test_a_signal_during_startup_is_a_clean_exit(root: Path) -> None:
    proc = start_daemon(root / "data", "--feed", "none")
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["event"] == "daemon.starting"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    events = [r["event"] for r in json_lines(proc.stdout.read().decode())]
    assert "daemon.ready" not in events and "daemon.stopped" in events


def test_a_second_signal_during_a_drain_exits_at_once(root: Path) -> None:
    """A drain waits for in-flight requests; a second signal does not."""
    data = root / "data"
    sock = data / "grimoire.sock"
    env = daemon_env(GRIMOIRE_DAEMON__MAX_REQUEST_BYTES=str(64 * 2**20))
    proc = start_daemon(data, "--feed", "none", env=env)
    try:
        wait_ready(proc, sock)
        # A batch that takes the writer seconds: the drain has to wait for it.
        heavy = {"episodes": [{"text": f"{i} " + "gas fee swap pool " * 1700} for i in range(300)]}
        in_flight = threading.Thread(target=_call_quietly, args=(sock, "episode.write_batch",
                                                                 heavy), daemon=True)
        in_flight.start()
        # In flight: the heavy batch and the status call asking.
        _wait_for(lambda: _status(sock)["daemon"]["server"]["in_flight"] >= 2, timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:  # the second signal only once the first one is being handled
            seen.append(json.loads(line)["event"])
            if seen[-1] == "daemon.draining":
                break
        time.sleep(REPEAT_DEBOUNCE_S + 0.05)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = seen + [r["event"] for r in json_lines(proc.stdout.read().decode())]
    assert code == 128 + signal.SIGTERM
    assert "daemon.exit.immediate" in events
    assert "daemon.stopped" not in events and "server.stopped" not in events
    # Nothing acknowledged was lost and the stores open cleanly after that exit.
    proc = start_daemon(data, "--feed", "none", env=env)
    try:
        wait_ready(proc, sock)
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _status(sock: Path) -> dict[str, Any]:
    with Client(sock) as client:
        status: dict[str, Any] = client.call("status")
    return status


def _call_quietly(sock: Path, method: str, params: dict[str, Any]) -> None:
    try:
        with Client(sock, timeout=120) as client:
            client.call(method, params)
    except GrimoireError:
        pass  # the daemon was told to exit at once: no answer is the expected outcome


def test_yaml_config_env_overrides_and_a_custom_socket(root: Path) -> None:
    cfg = root / "grimoire.yaml"
    cfg.write_text("daemon:\n  feed: none\n  tick_seconds: 5\n  max_connections: 3\n")
    (root / "run").mkdir(mode=0o700)
    sock = root / "run" / "custom.sock"
    env = daemon_env(GRIMOIRE_DAEMON__TICK_SECONDS="0.05")
    proc = start_daemon(root / "data", "--config", str(cfg), "--socket", str(sock), env=env)
    try:
        wait_ready(proc, sock)
        assert not (root / "data" / "grimoire.sock").exists()
        proc.send_signal(signal.SIGHUP)  # logged and ignored: no reload, no death
        with Client(sock) as client:
            status = _wait_for(lambda: (s := client.call("status"))["tick"] >= 5 and s)
        assert status["daemon"]["feed"] == "none"
        assert status["daemon"]["tick_seconds"] == 0.05  # the environment beats the file
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [r["event"] for r in json_lines(proc.stdout.read().decode() if proc.stdout else "")]
    assert "daemon.sighup.ignored" in events


def test_the_daemon_has_no_network_sockets(root: Path) -> None:
    """No TCP/UDP socket at all (listening or outbound): only the Unix socket and pipes."""
    data = root / "data"
    proc = start_daemon(data, "--feed", "sim", "--speed", "600")
    try:
        wait_ready(proc, data / "grimoire.sock")
        with Client(data / "grimoire.sock") as client:
            for i in range(20):
                client.call("episode.write", {"text": f"note {i}"})
            _wait_for(lambda: client.call("status")["tick"] >= 5)
            mine = _socket_inodes(proc.pid)
            assert mine  # the listening Unix socket and this connection, at least
            for table, inodes in _inet_inodes(proc.pid).items():
                assert not mine & inodes, f"daemon holds a {table} socket"
            unix = {row.split()[6] for row in Path("/proc/net/unix").read_text().splitlines()[1:]
                    if len(row.split()) > 6}
            assert mine <= unix  # every socket it holds is a Unix socket
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _on_a_terminal(root: Path, *args: str) -> str:
    """What a short daemon run prints to a pseudo-terminal (colour codes removed)."""
    master, slave = pty.openpty()
    data = root / "data"
    proc = start_daemon(data, "--feed", "none", "--tick-seconds", "0.05", "--max-ticks", "3",
                        *args, stdout=slave)
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(60) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace"))


def test_logs_are_readable_lines_on_a_terminal(root: Path) -> None:
    text = _on_a_terminal(root)
    lines = [line for line in text.splitlines() if "daemon.ready" in line]
    assert lines, text[-2000:]
    assert not lines[0].lstrip().startswith("{")  # a console line, not JSON
    assert "daemon.max_ticks.reached" in text


def test_run_json_forces_json_logs_on_a_terminal(root: Path) -> None:
    text = _on_a_terminal(root, "--json")
    (ready,) = [line for line in text.splitlines() if "daemon.ready" in line]
    assert json.loads(ready)["event"] == "daemon.ready"


def test_the_real_model_serves_writes(root: Path) -> None:
    """The default (bundled) model: start, write, read back, stop; its identity is stored."""
    env = daemon_env()
    del env["GRIMOIRE_EMBEDDING__MODEL"]
    data = root / "data"
    proc = start_daemon(data, "--feed", "none", env=env)
    try:
        wait_ready(proc, data / "grimoire.sock", timeout=180)
        with Client(data / "grimoire.sock") as client:
            ep = client.call("episode.write", {"text": "gas spiked to 90 gwei during the "
                                               "NFT mint", "metrics": {"gas_gwei": 90}})["id"]
            assert client.call("episode.get", {"id": ep})["metrics"] == {"gas_gwei": 90.0}
            status = client.call("status")
        assert status["embedding"] == {"model": "all-MiniLM-L6-v2-int8", "dim": 384}
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # The same data dir is refused with the test embedder, naming both models.
    proc = start_daemon(data, "--feed", "none")
    assert proc.wait(120) == 1
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert "all-MiniLM-L6-v2-int8" in err and "hash-384" in err


def test_the_readme_main_command_writes_a_real_playbook(root: Path) -> None:
    """README's main job as written (``grimoire run --feed sim --data data/demo --speed
    600``, the bundled model, under the working directory), stopped after the first curator
    cycle: PLAYBOOK.md is written with its front matter, no tick failed, the directory is
    marked as simulated, and the daemon exits 0."""
    env = daemon_env()
    del env["GRIMOIRE_EMBEDDING__MODEL"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "grimoire", "run", "--feed", "sim", "--data", "data/demo",
         "--speed", "600", "--max-ticks", "51"],
        env=env, cwd=str(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    events = json_lines(out.decode())
    assert not [e for e in events if e.get("event") == "heartbeat.tick.failed"]
    (cycle,) = [e for e in events if e.get("event") == "curator.cycle"]
    assert cycle["cycle"] == 1 and cycle["tick"] in (50, 51)  # started at 50, beside ticks
    assert cycle["playbook"].startswith("PLAYBOOK.md updated: ")
    (start,) = [e for e in events if e.get("event") == "daemon.starting"]
    assert start["data_dir"] == str((root / "data" / "demo").resolve())
    assert start["data_dir_given"] == "data/demo" and start["memory"] == "simulated"
    assert json.loads((root / "data" / "demo" / "FEED.json").read_text())["kind"] == "simulated"
    playbook = root / "data" / "demo" / "PLAYBOOK.md"
    text = playbook.read_text(encoding="utf-8")
    assert text.startswith(f"---\nplaybook_format: 1\ntick: {cycle['tick']}\n")
    assert "# PLAYBOOK" in text and "## Global" in text


def test_accelerated_time_never_runs_backwards_across_restarts(root: Path) -> None:
    """At --speed 6000 a run ends hours of simulated time ahead of the wall clock; the next
    run starts from the last stored tick, not from the wall clock, so tick times only grow."""
    from grimoire import Grimoire
    from grimoire.models.embedders import HashEmbedder

    data = root / "data"
    last: list[int] = []
    for _ in range(2):
        proc = start_daemon(data, "--feed", "none", "--speed", "6000", "--tick-seconds", "60",
                            "--max-ticks", "3")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
        with Grimoire.open(data, embedder=HashEmbedder(dim=384, model_id="hash-384")) as g:
            last.append(int(g.context.semantic.get_meta("last_tick_ms")))
    wall = int(time.time() * 1000)
    assert last[0] > wall + 600_000  # the first run really ran ahead (> 10 simulated min)
    assert last[1] > last[0]


def test_the_demo_speed_keeps_the_episode_flush_in_real_time(root: Path) -> None:
    """Issue 27: at --speed 600 ``episodes.flush_ms`` (1 s) was read on the accelerated
    clock, so every other 0.3 s tick appended and fsync'd the LanceDB table (0.1-0.8 s on 2 loaded
    cores) and the README demo skipped ticks. The setting is real time: about one flush
    per ~4 ticks (one every other tick before)."""
    from grimoire.config import Config
    from grimoire.service.daemon import wall_time_settings

    assert wall_time_settings(Config().replace(**{"daemon.speed": 600.0})).episodes.flush_ms \
        == 600_000
    data = root / "d"
    p = subprocess.run(
        [sys.executable, "-m", "grimoire", "run", "--feed", "sim", "--data", str(data),
         "--speed", "600", "--max-ticks", "40", "--log-level", "debug", "--json"],
        env=daemon_env(), capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(line).get("event") for line in p.stdout.splitlines()
              if line.startswith("{")]
    ticks, flushes = events.count("heartbeat.tick"), events.count("episodes.flush")
    assert ticks == 40 and flushes <= ticks // 4, (ticks, flushes)  # 20 before
