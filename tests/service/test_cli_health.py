"""``grimoire health`` is a probe a monitor can trust: ok and exit 0 only when a daemon
answers; with none running it says so, what the directory holds on disk, and exits 3.
Through the installed ``grimoire``."""

from __future__ import annotations

import json
from pathlib import Path

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder
from tests.service.daemon_support import ServerThread, short_dir
from tests.service.test_cli_errors import cli


def _store(data: Path) -> None:
    with Grimoire.open(data, clock=FrozenClock(), embedder=HashEmbedder()) as g:
        g.episode_write(text="gas hit 80 gwei")
        g.tick()


def test_health_with_no_daemon_says_not_running_and_what_is_on_disk(tmp_path: Path) -> None:
    data = tmp_path / "d"
    _store(data)
    (data / "grimoire.sock").write_text("")  # a stale socket file: nothing accepts on it
    proc = cli("health", "--data", str(data))
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert not proc.stdout.startswith("ok")
    assert "not running" in proc.stdout and "stale socket" in proc.stdout
    assert f"grimoire run --data {data}" in proc.stdout
    assert f"{data} holds a store" in proc.stdout and "tick 1, no curator cycle" in proc.stdout
    proc = cli("health", "--data", str(data), "--json")
    answer = json.loads(proc.stdout)
    assert proc.returncode == 3 and answer["ok"] is False and answer["running"] is False
    assert answer["on_disk"]["grimoire"] is True and answer["on_disk"]["tick"] == 1
    proc = cli("health", "--data", str(tmp_path / "nothing"))
    assert proc.returncode == 3 and "does not exist" in proc.stdout
    assert not (tmp_path / "nothing").exists()


def test_health_with_a_daemon_is_ok() -> None:
    with short_dir() as root, Grimoire.open(root / "data", clock=FrozenClock(),
                                            embedder=HashEmbedder()) as g:
        st = ServerThread(g, root / "data" / "grimoire.sock", data_dir=root / "data").start()
        try:
            proc = cli("health", "--data", str(root / "data"))
        finally:
            st.stop()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: grimoire")


def test_health_help_documents_its_exit_codes() -> None:
    out = " ".join(cli("health", "--help").stdout.split())
    assert "0 the daemon answered" in out and "3 no daemon is running" in out
