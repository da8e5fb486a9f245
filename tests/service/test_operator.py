"""The operator's daemon (issue 13): real memory stays real, sd_notify, data_dir resolved."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from grimoire.config import load_config
from grimoire.service.sdnotify import notify, watchdog_interval
from tests.service.daemon_support import (
    daemon_env,
    json_lines,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)

GRIMOIRE = Path(sys.executable).parent / "grimoire"


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GRIMOIRE), "run", *args], capture_output=True, text=True,
                          env=env or daemon_env(), timeout=180, cwd=cwd)


def test_the_default_feed_is_none() -> None:
    assert load_config(env={}).daemon.feed == "none"


def test_a_simulated_and_a_real_feed_never_share_a_data_directory(tmp_path: Path) -> None:
    demo, real = tmp_path / "demo", tmp_path / "real"
    fast = ["--tick-seconds", "0.05", "--max-ticks", "3"]
    p = run("--data", str(demo), "--feed", "sim", *fast, "--socket", str(tmp_path / "a.sock"))
    assert p.returncode == 0, p.stderr
    assert any(r["event"] == "daemon.data.simulated" for r in json_lines(p.stdout))
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps({"text": "swap 1 ETH filled", "type": "action"}) + "\n")
    p = run("--data", str(demo), "--feed", f"jsonl:{feed}", *fast,
            "--socket", str(tmp_path / "a.sock"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"{demo} holds simulated memory and --feed jsonl:{feed} would add real" in p.stderr

    p = run("--data", str(real), "--feed", f"jsonl:{feed}", *fast,
            "--socket", str(tmp_path / "b.sock"))
    assert p.returncode == 0, p.stderr
    p = run("--data", str(real), "--feed", "sim", *fast, "--socket", str(tmp_path / "b.sock"))
    assert p.returncode == 2 and "holds real memory" in p.stderr and "data/demo" in p.stderr


def test_a_relative_data_dir_is_resolved_once_and_logged(tmp_path: Path) -> None:
    p = run("--data", "rel/dir", "--max-ticks", "1", "--tick-seconds", "0.05", cwd=tmp_path,
            env=daemon_env(GRIMOIRE_SOCKET_PATH=str(tmp_path / "c.sock")))
    assert p.returncode == 0, p.stderr
    starting = next(r for r in json_lines(p.stdout) if r["event"] == "daemon.starting")
    assert starting["data_dir"] == str(tmp_path / "rel" / "dir")
    assert (tmp_path / "rel" / "dir" / "semantic.sqlite").exists()


def test_sd_notify_ready_and_watchdog_through_notify_socket() -> None:
    with short_dir() as root:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(str(root / "notify"))
        listener.settimeout(60)
        env = daemon_env(NOTIFY_SOCKET=str(root / "notify"), WATCHDOG_USEC="200000")
        proc = start_daemon(root / "d", "--feed", "none", env=env)
        try:
            wait_ready(proc, root / "d" / "grimoire.sock")
            got = [listener.recv(4096).decode() for _ in range(3)]
        finally:
            assert stop_daemon(proc) == 0
            listener.close()
        assert got[0].startswith("READY=1")
        assert got[1:] == ["WATCHDOG=1", "WATCHDOG=1"]


def test_notify_without_systemd_does_nothing() -> None:
    assert notify("READY=1", env={}) is False
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
