"""The Unix-socket JSON-RPC server: method table, protocol errors, limits, peer check, shutdown.

Each test runs a real ``Server`` over a real facade (stores in a tmp dir, the
test embedder) on an asyncio loop in a background thread, and talks to it
with raw sockets or the client library.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import (
    GrimoireError,
    NotFoundError,
    ProtocolError,
    StoreError,
    ValidationError,
)
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.api import METHODS
from grimoire.service.client import Client
from grimoire.service.server import prepare_socket_path
from tests.service.daemon_support import (
    ServerThread,
    is_closed,
    raw_connect,
    read_lines,
    rpc,
    short_dir,
)

#: Every method of API.md (the contract); the test below also reads API.md when it is there.
API_METHODS = {
    "health", "status", "episode.write", "episode.write_batch", "episode.get", "retrieve",
    "outcome.report", "entry.add", "entry.get", "entry.list", "kg.assert", "kg.invalidate",
    "kg.at", "kg.known_at", "kg.neighbors", "causal.link", "causal.chain", "playbook.get",
    "curator.run", "rules.applicable", "causal.consequences",
}
#: Methods added since API.md was written: documented in README.md's method table instead.
BEYOND_API_MD = {"rules.applicable", "forget", "causal.consequences"}
API_MD = Path(__file__).resolve().parents[3] / "shared" / "API.md"
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with short_dir() as path:
        yield path


@pytest.fixture
def g(sock_dir: Path) -> Iterator[Grimoire]:
    with Grimoire.open(sock_dir / "data", clock=FrozenClock(), embedder=HashEmbedder()) as opened:
        yield opened


@pytest.fixture
def served(g: Grimoire, sock_dir: Path) -> Iterator[ServerThread]:
    st = ServerThread(g, sock_dir / "data" / "grimoire.sock", max_connections=8,
                      idle_timeout_s=30, max_request_bytes=64 * 1024,
                      data_dir=sock_dir / "data").start()
    yield st
    st.stop()


# -- the method table ----------------------------------------------------------------------


def test_every_api_method_is_in_the_method_table() -> None:
    assert set(METHODS) >= API_METHODS
    if API_MD.exists():  # the contract itself, when shared/ sits beside the repository
        rows = re.findall(r"^\| ((?:`[a-z_.]+`(?: / )?)+) \|", API_MD.read_text(), re.MULTILINE)
        documented = {m for row in rows for m in re.findall(r"`([a-z_.]+)`", row)}
        assert documented == API_METHODS - BEYOND_API_MD
    rows = re.findall(r"^\| ((?:`[a-z_.]+`(?: / )?)+) \|", README.read_text(), re.MULTILINE)
    in_readme = {m for row in rows for m in re.findall(r"`([a-z_.]+)`", row)}
    assert in_readme >= BEYOND_API_MD


MINIMAL_PARAMS: dict[str, dict[str, Any]] = {
    "health": {}, "status": {},
    "episode.write": {"text": "gas at 20 gwei"},
    "episode.write_batch": {"episodes": [{"text": "a"}, {"text": "b"}]},
    "episode.get": {"id": "01a00000-0000-7000-8000-000000000000"},
    "retrieve": {"query": "gas"},
    "rules.applicable": {"situation": {"actions": ["swap"], "regime": "high_vol"}},
    "outcome.report": {"retrieval_id": "01a00000-0000-7000-8000-000000000000",
                       "outcome": "positive"},
    "entry.add": {"category": "warning", "content": "Avoid swaps when gas_gwei > 80 because "
                  "fees eat the gain"},
    "entry.get": {"id": "01a00000-0000-7000-8000-000000000000"},
    "entry.list": {}, "entry.explain": {"id": "01a00000-0000-7000-8000-000000000000"},
    "kg.assert": {"subject": {"kind": "pool", "id": "p"}, "predicate": "deployed_by",
                  "object": {"kind": "address_cluster", "id": "d"}, "valid_from": 1},
    "kg.invalidate": {"id": "01a00000-0000-7000-8000-000000000000", "at": 5},
    "kg.at": {"subject": {"kind": "pool", "id": "p"}, "block": 3},
    "kg.known_at": {"subject": {"kind": "pool", "id": "p"}, "time": 3},
    "kg.neighbors": {"subject": {"kind": "pool", "id": "p"}, "block": 3},
    "causal.link": {"cause_id": "01a00000-0000-7000-8000-000000000000",
                    "effect_id": "01a00000-0000-7000-8000-000000000001"},
    "causal.chain": {"id": "01a00000-0000-7000-8000-000000000000"},
    "causal.consequences": {"id": "01a00000-0000-7000-8000-000000000000"},
    "playbook.get": {}, "curator.run": {},
    "clade.publish": {"uri": ""}, "clade.pull": {"uri": ""},
    "forget": {"episode": "01a00000-0000-7000-8000-000000000000", "dry_run": True},
}


def test_every_method_answers_a_result_or_a_typed_error(served: ServerThread) -> None:
    """Each method is reachable; machinery from a later issue answers NotAvailableError."""
    assert set(MINIMAL_PARAMS) == set(METHODS)
    not_available = []
    with raw_connect(served.path) as sock:
        for i, (method, params) in enumerate(MINIMAL_PARAMS.items()):
            answer = rpc(sock, method, params, req_id=i)
            assert answer["jsonrpc"] == "2.0" and answer["id"] == i
            if "result" in answer:
                assert isinstance(answer["result"], dict), method
                continue
            error = answer["error"]
            kind = error["data"]["type"]
            assert kind in {"NotAvailableError", "NotFoundError", "ValidationError"}, answer
            if kind == "NotAvailableError":
                assert error["code"] == -32030 and method in error["message"]
                not_available.append(method)
    # The methods built by this issue and the ones before it never say "not available".
    assert not set(not_available) & {"health", "status", "episode.write", "episode.write_batch",
                                     "episode.get", "entry.add", "entry.get", "entry.list",
                                     "kg.assert", "kg.invalidate", "kg.at", "kg.known_at",
                                     "kg.neighbors"}


# -- protocol errors -----------------------------------------------------------------------

BAD_REQUESTS: list[tuple[bytes, int, str | None]] = [
    (b"{not json", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "health", "params": {"x": NaN}}', -32700, None),
    (b"[" * 100_00 + b"]" * 100_00, -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"health","params":{"n":' + b"9" * 5000 + b"}}",
     -32700, None),
    (b"\xff\xfe\x00garbage\x00\x01", -32700, None),
    (b"[1, 2, 3]", -32600, None),
    (b'"a string"', -32600, None),
    (b"42", -32600, None),
    (b"null", -32600, None),
    (b'{"id": 1, "method": "health"}', -32600, None),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "health"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "health"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "health", "params": [1]}', -32602, "params"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "no.such"}', -32601, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "__init__"}', -32601, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "episode.get", "params": {}}', -32602, "params"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "episode.get", "params": {"id": 5}}', -32602, "id"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "health", "params": {"x": 1}}', -32602, "params"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "episode.write", "params": {"self": 1}}',
     -32602, "params"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "episode.write", "params": {"text": 5}}',
     -32602, "text"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "episode.write_batch", "params": '
     b'{"episodes": [{"text": "ok"}, {"text": "x", "importance": 3}]}}',
     -32602, "episodes[1].importance"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "entry.list", "params": {"limit": "ten"}}',
     -32602, "limit"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "kg.at", "params": {"subject": 1, "block": 1}}',
     -32602, "subject"),
]


@pytest.mark.parametrize(("line", "code", "field"), BAD_REQUESTS,
                         ids=[str(i) for i in range(len(BAD_REQUESTS))])
def test_bad_requests_get_an_error_and_the_connection_keeps_serving(
        served: ServerThread, line: bytes, code: int, field: str | None) -> None:
    with raw_connect(served.path) as sock:
        sock.sendall(line + b"\n")
        answer = read_lines(sock)[0]
        assert answer["error"]["code"] == code, answer
        if field is not None:
            assert answer["error"]["data"]["field"] == field, answer
            assert field in answer["error"]["message"]
        assert rpc(sock, "health")["result"]["ok"] is True


def test_not_found_is_a_grimoire_error_not_an_internal_one(served: ServerThread) -> None:
    with raw_connect(served.path) as sock:
        error = rpc(sock, "episode.get", {"id": "missing"})["error"]
    assert error["code"] == -32004
    assert error["data"]["type"] == "NotFoundError"
    assert "missing" in error["message"]


def test_client_raises_the_matching_error_class(served: ServerThread) -> None:
    with Client(served.path) as client:
        with pytest.raises(NotFoundError):
            client.call("episode.get", {"id": "missing"})
        with pytest.raises(ValidationError) as info:
            client.call("episode.write", {"text": ""})
        assert info.value.field == "text"
        ep = client.call("episode.write", {"text": "hello"})["id"]
        assert client.call("episode.get", {"id": ep})["text"] == "hello"
        answers = client.call_many("episode.get", [{"id": ep}, {"id": "nope"}] * 50)
        assert [a["id"] for a in answers[::2]] == [ep] * 50
        assert all(isinstance(a, NotFoundError) for a in answers[1::2])


def test_retrieve_over_the_socket_explains_only_when_asked(served: ServerThread) -> None:
    """Over the socket the factor breakdown, backend ranks and trace are opt-in
    (``explain: true``); by default each item's factors are plain values."""
    with Client(served.path) as client:
        client.call("episode.write", {"text": "gas spiked to 90 gwei on base"})
        lean = client.call("retrieve", {"query": "gas on base"})
        full = client.call("retrieve", {"query": "gas on base", "explain": True})
    assert lean["items"] and "trace" not in lean and "trace" in full
    assert all(isinstance(v, float) for v in lean["items"][0]["factors"].values())
    assert "backend_ranks" not in lean["items"][0]
    assert set(full["items"][0]["factors"]["rrf"]) == {"value", "weight", "contribution"}
    assert full["items"][0]["backend_ranks"]


def test_a_retrieval_answered_over_the_socket_can_be_reported_at_once(
        served: ServerThread, g: Grimoire) -> None:
    """The log write is handed off after the answer is sent, but registered before it: an
    outcome reported at once, on another connection, finds its retrieval."""
    with Client(served.path) as one, Client(served.path) as other:
        one.call("episode.write", {"text": "gas spiked to 90 gwei on base"})
        for _ in range(5):
            rid = one.call("retrieve", {"query": "gas on base"})["retrieval_id"]
            assert other.call("outcome.report", {"retrieval_id": rid,
                                                 "outcome": "positive"})["updated"] >= 0
    assert g.context.semantic.get_retrieval(rid) is not None


def test_client_without_a_daemon_says_so(sock_dir: Path) -> None:
    with pytest.raises(ProtocolError, match="is `grimoire run` running"):
        Client(sock_dir / "none.sock").call("health")


def test_notifications_run_but_get_no_answer(served: ServerThread, g: Grimoire) -> None:
    with raw_connect(served.path) as sock:
        sock.sendall(b'{"jsonrpc":"2.0","method":"episode.write","params":{"text":"quiet"}}\n')
        answer = rpc(sock, "health", req_id="after")
        assert answer["id"] == "after"  # the notification had no answer of its own
    assert g.context.episodes.count() == 1


def test_blank_lines_are_ignored_and_pipelined_requests_answered_in_order(
        served: ServerThread) -> None:
    with raw_connect(served.path) as sock:
        reqs = b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "health"}).encode()
                        + b"\n\n" for i in range(20))
        sock.sendall(b"\n  \n" + reqs)
        assert [a["id"] for a in read_lines(sock, 20)] == list(range(20))


def test_half_closed_connection_still_gets_its_answer(served: ServerThread) -> None:
    with raw_connect(served.path) as sock:
        sock.sendall(b'{"jsonrpc":"2.0","id":9,"method":"health"}\n{"jsonrpc":"2.0","id":10,')
        sock.shutdown(socket.SHUT_WR)
        answers = read_lines(sock, 3)
        assert answers[0]["id"] == 9 and answers[0]["result"]["ok"]
        assert answers[1]["error"]["code"] == -32700  # the partial request at EOF
        assert len(answers) == 2 and is_closed(sock)
    with raw_connect(served.path) as sock:
        assert rpc(sock, "health")["result"]["ok"]


# -- limits --------------------------------------------------------------------------------


def test_the_client_reports_the_daemons_refusal_of_a_request_too_large(
        served: ServerThread) -> None:
    """Issue 27: the daemon answers "request larger than max_request_bytes" and closes while
    the client is still sending; the client said only "the daemon closed the connection"."""
    with Client(served.path, timeout=30) as client, pytest.raises(
            GrimoireError, match="max_request_bytes"):
        client.call("episode.write", {"text": "x" * 8_000_000})
    with Client(served.path) as client:  # the daemon is fine
        assert client.call("health")["ok"]


def test_an_oversized_request_gets_an_error_then_the_connection_closes(
        served: ServerThread, g: Grimoire) -> None:
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "episode.write",
                      "params": {"text": "x" * 100_000}}).encode() + b"\n"
    with raw_connect(served.path) as sock:
        sock.sendall(big)
        answer = read_lines(sock)[0]
        assert answer["error"]["code"] == -32600 and "max_request_bytes" in answer["error"][
            "message"]
        assert is_closed(sock)
    with raw_connect(served.path) as sock:  # no newline at all: closed as well
        sock.sendall(b"\x00" * 70_000)
        assert read_lines(sock)[0]["error"]["code"] == -32600
        assert is_closed(sock)
    with raw_connect(served.path) as sock:
        assert rpc(sock, "health")["result"]["ok"]
    assert g.context.episodes.count() == 0


def test_connection_limit_refuses_the_extra_one_and_recovers(served: ServerThread) -> None:
    socks = [raw_connect(served.path) for _ in range(8)]
    try:
        for s in socks:
            assert rpc(s, "health")["result"]["ok"]
        with raw_connect(served.path) as extra:
            answer = read_lines(extra)[0]
            assert "too many connections" in answer["error"]["message"]
            assert answer["error"]["data"]["type"] == "BusyError"
            assert is_closed(extra)
        socks.pop().close()
        deadline = time.monotonic() + 5
        while served.server.stats()["connections"] >= 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        with raw_connect(served.path) as again:
            assert rpc(again, "health")["result"]["ok"]
    finally:
        for s in socks:
            s.close()


def test_idle_connections_are_closed(g: Grimoire, sock_dir: Path) -> None:
    st = ServerThread(g, sock_dir / "idle.sock", idle_timeout_s=0.2).start()
    try:
        with raw_connect(st.path) as sock:
            assert rpc(sock, "health")["result"]["ok"]
            assert is_closed(sock, timeout=5)
    finally:
        st.stop()


# -- the socket's permissions and peer check ------------------------------------------------


def test_socket_is_owner_only(served: ServerThread) -> None:
    assert stat.S_IMODE(served.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.path.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(served.path.stat().st_mode)


def test_prepare_socket_path_refuses_shared_directories_and_live_sockets(
        sock_dir: Path, served: ServerThread) -> None:
    shared = sock_dir / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    with pytest.raises(StoreError, match="reachable by other users"):
        prepare_socket_path(shared / "g.sock")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755  # never chmodded behind our back
    prepare_socket_path(shared / "g.sock", data_dir=shared)  # the data dir is ours: fixed
    assert stat.S_IMODE(shared.stat().st_mode) == 0o700
    fresh = sock_dir / "new" / "deeper" / "g.sock"
    prepare_socket_path(fresh)
    assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700
    with pytest.raises(StoreError, match="already listening"):
        prepare_socket_path(served.path, data_dir=served.path.parent)
    not_a_socket = sock_dir / "file.sock"
    not_a_socket.write_text("precious")
    with pytest.raises(StoreError, match="not a socket"):
        prepare_socket_path(not_a_socket)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock_dir / "stale.sock"))
    stale.close()  # bound, never listened: what a crash leaves behind
    prepare_socket_path(sock_dir / "stale.sock")
    assert not (sock_dir / "stale.sock").exists()


def _as_nobody(path: Path) -> dict[str, Any]:
    """Connect from a forked child that became uid 65534 (nobody) first; what it saw."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os and socket calls, then _exit
        result: dict[str, Any]
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            try:
                s.connect(str(path))
            except PermissionError:
                result = {"connect": "permission denied"}
            else:
                data = b""  # the server speaks first, refusing; then it closes
                while chunk := s.recv(65536):
                    data += chunk
                result = {"connect": "ok", "answer": data.decode()}
        except BaseException as exc:  # report it to the parent instead of dying silently
            result = {"connect": "crashed", "error": repr(exc)}
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
def test_another_uid_is_refused(served: ServerThread) -> None:
    """File modes stop other users; if they are loosened, SO_PEERCRED still refuses them."""
    assert _as_nobody(served.path) == {"connect": "permission denied"}
    os.chmod(served.path.parent, 0o777)
    os.chmod(served.path.parent.parent, 0o755)
    os.chmod(served.path, 0o777)
    try:
        result = _as_nobody(served.path)
    finally:
        os.chmod(served.path.parent, 0o700)
        os.chmod(served.path.parent.parent, 0o700)
        os.chmod(served.path, 0o600)
    assert result["connect"] == "ok", result
    answer = json.loads(result["answer"])
    assert "another user" in answer["error"]["message"]
    assert "result" not in answer  # no status, nothing else: the connection was closed
    assert served.server.stats()["refused"] == 1


# -- shutdown --------------------------------------------------------------------------------


def test_stop_closes_idle_connections_at_once(g: Grimoire, sock_dir: Path) -> None:
    st = ServerThread(g, sock_dir / "s.sock", idle_timeout_s=300).start()
    sock = raw_connect(st.path)
    assert rpc(sock, "health")["result"]["ok"]
    assert st.stop(grace_s=20) < 5  # never waits for the idle client
    assert is_closed(sock)
    sock.close()
    assert not st.path.exists()


class _Slow:
    """A dispatch target whose only method takes a while (an in-flight request at stop)."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def health(self) -> dict[str, Any]:
        self.started.set()
        time.sleep(0.5)
        return {"ok": True}


def test_stop_lets_an_in_flight_request_finish(sock_dir: Path) -> None:
    slow = _Slow()
    st = ServerThread(slow, sock_dir / "slow.sock").start()
    sock = raw_connect(st.path)
    sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"health"}\n')
    assert slow.started.wait(10)
    st.stop(grace_s=10)
    assert read_lines(sock)[0]["result"] == {"ok": True}
    assert is_closed(sock)
    sock.close()


def test_a_socket_path_too_long_is_a_clear_error(g: Grimoire, sock_dir: Path) -> None:
    deep = sock_dir / ("d" * 60) / ("e" * 60)
    with pytest.raises(StoreError, match="cannot listen on"):
        ServerThread(g, deep / "g.sock").start()
