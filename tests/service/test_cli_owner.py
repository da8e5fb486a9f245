"""The owner's CLI, run as the installed ``grimoire`` in a subprocess (issue 13).

Clear errors for bad input and environment (no traceback), a silent library,
reads with and without a running daemon, human output and ``--json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.daemon_support import (
    daemon_env,
    short_dir,
    start_daemon,
    stop_daemon,
    wait_ready,
)

GRIMOIRE = Path(sys.executable).parent / "grimoire"


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GRIMOIRE), *args], capture_output=True, text=True,
                          env=env or daemon_env(), timeout=timeout, input=stdin,
                          encoding="utf-8")


def no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr


def test_the_console_script_is_installed() -> None:
    assert GRIMOIRE.exists(), "pip install -e . puts the grimoire script beside python"


# -- a silent library -------------------------------------------------------------------------

LIBRARY_PROGRAM = """
import sys, tempfile{extra_import}
{configure}
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
with Grimoire.open(tempfile.mkdtemp(), embedder=HashEmbedder()) as g:
    g.episode_write(text="swap 2 ETH reverted", type="action", outcome="negative")
    g.entry_add(category="warning", content="Avoid swaps when gas is above 80 gwei")
    g.retrieve(query="gas")
    g.tick(feed_episodes=[{{"text": "a tick"}}])
    g.curator_run()
"""


def test_the_library_prints_nothing_unless_the_host_configures_logging() -> None:
    prog = LIBRARY_PROGRAM.format(extra_import="", configure="")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=daemon_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and p.stderr == ""
    prog = LIBRARY_PROGRAM.format(extra_import=", logging",
                                  configure="logging.basicConfig(level=logging.INFO)")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=daemon_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "grimoire.open" in p.stderr and "curator" in p.stderr  # the host asked for them
    assert p.stdout == ""


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


def test_against_a_daemon_and_without_one(daemon: tuple[Path, subprocess.Popen[bytes]]
                                          ) -> None:
    data, proc = daemon
    d = ["--data", str(data)]
    # A second daemon names the process holding the directory.
    p = cli("run", *d, "--socket", str(data / "other.sock"), "--max-ticks", "1")
    no_traceback(p)
    assert p.returncode == 1 and f"in use by process {proc.pid}" in p.stderr

    p = cli("write", "Swap WETH→USDC reverted: 滑点 too high", "--type", "action",
            "--outcome", "negative", *d)
    assert p.returncode == 0 and p.stdout.startswith("written: episode ")
    p = cli("call", "entry.add", json.dumps({"category": "warning", "content":
            "Avoid swaps on WETH/USDC when gas is above 80 gwei: 7 of 9 reverted"}), "--json",
            *d)
    entry_id = json.loads(p.stdout)["id"]
    # A lone surrogate is a validation error naming the field; nothing is written.
    p = cli("call", "episode.write", '{"text": "bad \\ud800 text"}', *d)
    no_traceback(p)
    assert p.returncode == 1
    assert "ValidationError: text: holds an unpaired surrogate U+D800" in p.stderr

    # Human output on a terminal-less pipe too; --json is the machine form; non-ASCII as is.
    p = cli("retrieve", "swap reverted", "-k", "3", *d)
    assert p.returncode == 0 and len(p.stdout.splitlines()) <= 6, p.stdout
    assert "滑点" in p.stdout and "WETH→USDC" in p.stdout
    p = cli("retrieve", "swap reverted", "-k", "3", "--json", *d)
    assert len(json.loads(p.stdout)["items"]) >= 1 and "滑点" in p.stdout
    p = cli("status", *d)
    assert p.returncode == 0 and not p.stdout.startswith("{")
    assert len(p.stdout.splitlines()) < 15 and "episodes  1" in p.stdout
    assert f"pid {proc.pid}" in p.stdout
    assert json.loads(cli("status", "--json", *d).stdout)["episodes"]["rows"] == 1
    # Short ids wherever ids are: entry.get takes PLAYBOOK.md's 8-character prefix.
    p = cli("call", "entry.get", json.dumps({"id": entry_id[:8]}), "--json", *d)
    assert p.returncode == 0 and json.loads(p.stdout)["id"] == entry_id
    p = cli("entry", "show", entry_id[:8], "--json", *d)
    assert json.loads(p.stdout)["id"] == entry_id

    # A broken pipe ends quietly.
    shell = subprocess.run(f"'{GRIMOIRE}' status --json --data '{data}' | head -1",
                           shell=True, capture_output=True, text=True, env=daemon_env(),
                           timeout=120)
    assert shell.stdout.strip() == "{" and shell.stderr == ""

    p = cli("curate", *d)
    assert p.returncode == 0 and p.stdout.startswith("curator cycle 1:")
    assert "PLAYBOOK.md updated" in p.stdout

    # The daemon stops: the owner's reads open the directory themselves.
    assert stop_daemon(proc) == 0
    for args in (["status"], ["explain", entry_id[:8]], ["entry", "list"], ["playbook"],
                 ["kg", "at", "token", "ETH", "1"], ["retrieve", "gas"]):
        p = cli(*args, *d)
        no_traceback(p)
        assert p.returncode == 0, (args, p.stderr)
    assert "daemon    not running" in cli("status", *d).stdout
    assert "Avoid swaps on WETH/USDC" in cli("explain", entry_id[:8], *d).stdout
    p = cli("write", "x", *d)
    assert p.returncode == 1 and "needs the daemon" in p.stderr


def test_playbook_after_a_kill_9_prints_the_file_on_disk() -> None:
    with short_dir() as root:
        data = root / "d"
        proc = start_daemon(data, "--feed", "none", "--tick-seconds", "3600")
        wait_ready(proc, data / "grimoire.sock")
        assert cli("curate", "--data", str(data)).returncode == 0
        proc.kill()
        proc.wait()
        assert (data / "grimoire.sock").exists()  # left behind by the kill
        p = cli("playbook", "--raw", "--data", str(data))
        assert p.returncode == 0 and "playbook_format" in p.stdout
        assert p.stdout == (data / "PLAYBOOK.md").read_text(encoding="utf-8")
        p = cli("playbook", "--data", str(data))  # for a person: no front matter (issue 27)
        assert p.returncode == 0 and p.stdout.startswith("# PLAYBOOK")
