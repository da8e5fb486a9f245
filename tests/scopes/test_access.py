"""The socket peer's uid decides which scopes it may use (``access.scopes``); a denial is a
ScopeDeniedError with its own JSON-RPC code, and is logged."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from grimoire.clock import FrozenClock
from grimoire.errors import ConfigError, ScopeDeniedError, StoreError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.scopes.access import Access
from grimoire.service.client import Client
from tests.service.daemon_support import ServerThread, raw_connect, rpc, short_dir

ME = os.getuid()
NOBODY = 65534


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@pytest.fixture
def g(sock_dir: Path) -> Iterator[Grimoire]:
    with Grimoire.open(sock_dir / "data", clock=FrozenClock(), embedder=HashEmbedder()) as opened:
        yield opened


def test_the_default_policy_is_the_owner_alone_with_every_scope() -> None:
    access = Access({}, owner_uid=ME)
    assert access.admits(ME) and not access.admits(ME + 1) and not access.admits(None)
    access.check(ME, "retrieve", {"scope": "anything"})
    assert not access.shared


def test_a_listed_uid_gets_its_scopes_and_the_owner_may_be_restricted() -> None:
    access = Access({"1001": ["agent", "user-42"], str(ME): ["agent"], "1002": ["*"]},
                    owner_uid=ME)
    assert access.shared and access.admits(1001) and not access.admits(1003)
    access.check(1001, "entry.add", {"scope": "user-42"})
    access.check(1002, "entry.add", {"scope": "whatever"})
    with structlog.testing.capture_logs() as logs:
        with pytest.raises(ScopeDeniedError, match=r"uid 1001 may not use scope 'project'"):
            access.check(1001, "retrieve", {"scope": "project"})
        with pytest.raises(ScopeDeniedError, match="scope 'default'"):
            access.check(ME, "status", {})  # no scope: the default one
    denied = [e for e in logs if e["event"] == "scope.denied"]
    assert [(e["uid"], e["scope"], e["method"]) for e in denied] == [
        (1001, "project", "retrieve"), (ME, "default", "status")]
    assert all(e["log_level"] == "warning" for e in denied)
    access.check(ME, "health", {})  # liveness answers any admitted peer


@pytest.mark.parametrize(("grants", "says"), [
    ({"bob": ["a"]}, "not a uid"), ({"1001": "agent"}, "list of scopes"),
    ({"1001": ["../etc"]}, "bad scope")])
def test_a_bad_grant_is_a_configuration_error(grants: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Access(grants)


def test_over_the_socket_a_denied_scope_is_its_own_error_and_is_logged(
        g: Grimoire, sock_dir: Path) -> None:
    access = Access({str(ME): ["alpha"]})
    st = ServerThread(g, sock_dir / "data" / "grimoire.sock", data_dir=sock_dir / "data",
                      access=access).start()
    try:
        with raw_connect(st.path) as sock, structlog.testing.capture_logs() as logs:
            ok = rpc(sock, "episode.write", {"text": "gas spiked", "scope": "alpha"})
            assert ok["result"]["scope"] == "alpha"
            denied = rpc(sock, "episode.write", {"text": "gas spiked", "scope": "beta"})
            assert denied["error"]["code"] == -32060
            assert denied["error"]["data"]["type"] == "ScopeDeniedError"
            assert "may not use scope 'beta'" in denied["error"]["message"]
            assert rpc(sock, "retrieve", {"query": "gas"})["error"]["code"] == -32060
            assert rpc(sock, "health", {})["result"]["ok"]
        assert [e["scope"] for e in logs if e["event"] == "scope.denied"] == ["beta", "default"]
        with Client(st.path) as client, pytest.raises(ScopeDeniedError):
            client.call("status", {"scope": "beta"})
    finally:
        st.stop()
    assert not (sock_dir / "data" / "scopes" / "beta").exists()  # nothing was opened


def test_a_shared_socket_may_not_sit_in_the_data_directory(g: Grimoire, sock_dir: Path) -> None:
    with pytest.raises(StoreError, match="socket_path to a directory of its own"):
        ServerThread(g, sock_dir / "data" / "grimoire.sock", data_dir=sock_dir / "data",
                     access=Access({str(NOBODY): ["alpha"]})).start()


def _as_uid(uid: int, path: Path, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """Connect as ``uid`` (a forked child: needs root) and send ``requests`` in order."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to uid, talk, report through the pipe, exit
        try:
            os.close(read_fd)
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(path))
            answers, buf = [], b""
            for i, req in enumerate(requests):
                s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, **req}).encode() + b"\n")
                while b"\n" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                line, _, buf = buf.partition(b"\n")
                answers.append(json.loads(line) if line else None)
            result: dict[str, Any] = {"answers": answers}
        except BaseException as exc:
            result = {"crashed": repr(exc)}
        try:
            os.write(write_fd, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    seen: dict[str, Any] = json.loads(data)
    return seen


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
def test_another_uid_uses_only_the_scopes_the_config_grants_it(
        g: Grimoire, sock_dir: Path) -> None:
    os.chmod(sock_dir, 0o711)  # the test's tmp dir: passable, as /run is
    access = Access({str(NOBODY): ["alpha"]})
    st = ServerThread(g, sock_dir / "run" / "g.sock", data_dir=sock_dir / "data",
                      access=access).start()
    try:
        assert stat.S_IMODE(st.path.stat().st_mode) == 0o666
        assert stat.S_IMODE(st.path.parent.stat().st_mode) == 0o711
        assert stat.S_IMODE((sock_dir / "data").stat().st_mode) == 0o700
        g.episode_write(text="owner's default memory")
        seen = _as_uid(NOBODY, st.path, [
            {"method": "episode.write", "params": {"text": "nobody's note", "scope": "alpha"}},
            {"method": "retrieve", "params": {"query": "memory note", "scope": "alpha"}},
            {"method": "retrieve", "params": {"query": "memory note"}},
            {"method": "status", "params": {"scope": "beta"}}])
        wrote, mine, default, beta = seen["answers"]
        assert wrote["result"]["scope"] == "alpha"
        assert [i["content"] for i in mine["result"]["items"]] == ["nobody's note"]
        assert default["error"]["data"]["type"] == "ScopeDeniedError"
        assert "uid 65534" in default["error"]["message"]
        assert beta["error"]["code"] == -32060
        # a uid the config does not list is refused at connect, as before
        other = _as_uid(NOBODY - 1, st.path, [{"method": "health"}])
        assert "result" not in json.dumps(other)
        assert st.server.stats()["refused"] == 1
    finally:
        st.stop()


@pytest.mark.parametrize(("grants", "says"), [
    ({"bob": ["a"]}, "not a uid"),
    ({str(NOBODY): ["alpha"]}, "set socket_path to a directory of its own")])
def test_the_daemon_refuses_a_bad_access_config_before_creating_anything(
        tmp_path: Path, grants: dict[str, Any], says: str) -> None:
    import subprocess
    import sys

    import yaml

    cfg = tmp_path / "g.yaml"
    cfg.write_text(yaml.safe_dump({"access": {"scopes": grants}}), encoding="utf-8")
    grimoire = Path(sys.executable).parent / "grimoire"
    p = subprocess.run([str(grimoire), "run", "--data", str(tmp_path / "d"), "--config",
                        str(cfg), "--feed", "none"], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "d").exists()
