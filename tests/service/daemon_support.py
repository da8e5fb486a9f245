"""Helpers for the server, CLI and daemon tests: an in-process server thread, daemon subprocesses.

Not a test module. Socket paths must stay under the 108-byte AF_UNIX limit,
so sockets live in short ``/tmp/g…`` directories rather than pytest's long
tmp paths.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grimoire.service.server import Server

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def short_dir(prefix: str = "g") -> Iterator[Path]:
    """An owner-only directory with a short path (sockets have a 108-byte path limit)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class ServerThread:
    """A ``Server`` running on its own asyncio loop in a background thread."""

    def __init__(self, target: Any, path: Path, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = Server(target, path, **kwargs)
        self.path = path
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
            raise
        return self

    def stop(self, grace_s: float = 5.0) -> float:
        """Stop the server; returns how long the stop took (seconds)."""
        started = time.monotonic()
        asyncio.run_coroutine_threadsafe(self.server.stop(grace_s), self.loop).result(60)
        took = time.monotonic() - started
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        return took


def raw_connect(path: Path, timeout: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    return sock


def read_lines(sock: socket.socket, n: int = 1) -> list[Any]:
    """Read ``n`` JSON lines (fewer if the server closes first)."""
    buf = b""
    out: list[Any] = []
    while len(out) < n:
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        out.append(json.loads(line))
    return out


def is_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if the peer closed (recv answers EOF) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def rpc(sock: socket.socket, method: str, params: Any = None, req_id: Any = 1) -> Any:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
    if params is not None:
        payload["params"] = params
    sock.sendall(json.dumps(payload).encode() + b"\n")
    return read_lines(sock)[0]


# -- daemon subprocesses ------------------------------------------------------------------------


def daemon_env(**extra: str) -> dict[str, str]:
    """The test environment for a daemon subprocess: the hash embedder, no stray GRIMOIRE_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIMOIRE_")}
    env["GRIMOIRE_EMBEDDING__MODEL"] = "hash-384"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def start_daemon(data: Path, *args: str, env: dict[str, str] | None = None,
                 stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """``python -m grimoire run --data DATA ARGS…`` in a new process group."""
    return subprocess.Popen(
        [sys.executable, "-m", "grimoire", "run", "--data", str(data), *args],
        env=env if env is not None else daemon_env(), stdout=stdout, stderr=subprocess.PIPE,
        cwd=str(REPO), start_new_session=True,
    )


def wait_ready(proc: subprocess.Popen[bytes], sock_path: Path, timeout: float = 90.0) -> float:
    """Wait until the daemon answers ``health``; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"daemon exited with {proc.returncode}: {err[-2000:]}")
        if sock_path.exists():
            try:
                with raw_connect(sock_path, timeout=5) as sock:
                    if rpc(sock, "health").get("result", {}).get("ok"):
                        return time.monotonic() - started
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"daemon not ready after {timeout} s")


def stop_daemon(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM,
                timeout: float = 60.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
