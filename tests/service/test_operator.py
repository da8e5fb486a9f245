"""The operator's guarantees: simulated and real memory never mix; systemd's notify protocol."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grimoire.errors import ConfigError
from grimoire.service.datadir import MARKER, check_feed_kind, feed_kind
from grimoire.service.systemd import Notifier
from tests.service.daemon_support import daemon_env, short_dir, start_daemon, stop_daemon


def test_feed_kinds() -> None:
    assert feed_kind("sim") == "simulated"
    assert {feed_kind(f) for f in ("none", "jsonl:/tmp/x.jsonl", " none ")} == {"real"}


def test_the_first_run_marks_the_directory_and_the_other_kind_is_refused(
        tmp_path: Path) -> None:
    data = tmp_path / "d"
    first = check_feed_kind(data, "sim", "default")
    assert first["kind"] == "simulated" and first["scenario"] == "default"
    assert json.loads((data / MARKER).read_text())["kind"] == "simulated"
    assert check_feed_kind(data, "sim", "reversal")["scenario"] == "default"  # unchanged
    before = (data / MARKER).read_bytes()
    for feed in ("none", "jsonl:/x.jsonl"):
        with pytest.raises(ConfigError, match=r"holds simulated memory.*--data DIR"):
            check_feed_kind(data, feed, None)
    assert (data / MARKER).read_bytes() == before
    real = tmp_path / "r"
    check_feed_kind(real, "none", None)
    with pytest.raises(ConfigError, match="holds real memory"):
        check_feed_kind(real, "sim", "default")


def test_a_damaged_marker_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / MARKER).write_text("{not json")
    with pytest.raises(ConfigError, match=r"FEED\.json is unreadable"):
        check_feed_kind(tmp_path, "none", None)
    (tmp_path / MARKER).write_text('{"kind": "other"}')
    with pytest.raises(ConfigError, match="kind: simulated or real"):
        check_feed_kind(tmp_path, "none", None)


def test_notifier_outside_systemd_does_nothing() -> None:
    n = Notifier({})
    assert not n.enabled and n.ping_interval_s() is None and not n.ready("x")


def test_notifier_reads_the_watchdog_for_this_process_only() -> None:
    env = {"NOTIFY_SOCKET": "@grimoire-test", "WATCHDOG_USEC": "4000000"}
    assert Notifier(env).ping_interval_s() == 2.0
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid())}).ping_interval_s() == 2.0
    assert Notifier({**env, "WATCHDOG_PID": "1"}).ping_interval_s() is None


def _receive(sock: socket.socket, seconds: float, until: str | None = None
             ) -> list[dict[str, str]]:
    """Notifications for ``seconds``, or up to the first that sets ``until``."""
    out: list[dict[str, str]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue
        out.append(dict(line.split("=", 1) for line in data.decode().splitlines()))
        if until is not None and until in out[-1]:
            break
    return out


@pytest.mark.slow
def test_the_daemon_says_ready_pings_the_watchdog_and_says_stopping() -> None:
    """A real datagram socket stands in for systemd: READY=1 once the socket serves (with
    the daemon's pid), WATCHDOG=1 at half the watchdog time, STOPPING=1 on SIGTERM."""
    with short_dir() as root:
        listen = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listen.bind(str(root / "notify"))
        listen.settimeout(0.5)
        env = {**daemon_env(), "NOTIFY_SOCKET": str(root / "notify"),
               "WATCHDOG_USEC": "400000"}
        data = root / "data"
        proc = start_daemon(data, "--feed", "none", env=env)
        try:
            got = _receive(listen, 90, until="READY")
            assert got and got[-1].get("READY") == "1", got
            assert got[-1]["MAINPID"] == str(proc.pid)
            assert (data / "grimoire.sock").exists()
            more = _receive(listen, 1.2)
            assert sum(m.get("WATCHDOG") == "1" for m in more) >= 3
            assert stop_daemon(proc) == 0
            rest = _receive(listen, 10, until="STOPPING")
            assert any(m.get("STOPPING") == "1" for m in more + rest)
        finally:
            if proc.poll() is None:
                proc.kill()
            listen.close()


def test_the_unit_file_runs_a_real_memory_daemon_under_notify() -> None:
    unit = (Path(__file__).resolve().parents[2] / "contrib" / "grimoire.service").read_text()
    assert "Type=notify" in unit and "WatchdogSec=" in unit
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "--feed none" in exec_start and "--data /" in exec_start
    assert subprocess.run([sys.executable, "-m", "grimoire", "run", "--help"],
                          capture_output=True, text=True, check=True).returncode == 0
