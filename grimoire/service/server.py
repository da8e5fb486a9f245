"""The Unix-socket JSON-RPC 2.0 server: one JSON object per line, owner-only.

Thin by design: it reads a line, checks that it is a JSON-RPC request, calls
``api.dispatch`` on the facade, and writes the answer. The event loop only
accepts; each connection is served by its own thread, which reads, dispatches
and writes with blocking calls. A request thus costs the two wake-ups of the
transport itself and no more: with the loop reading and writing and a pool
thread dispatching, every request also crossed threads twice (loop → pool →
loop: a queue hand-off, a self-pipe wake-up, the loop's callbacks). Measured on
the shared 2-core machine (issue 15; two daemons on copies of one store, calls
interleaved): health's round trip 0.70-0.73 → 0.38-0.42 ms; py-spy of the old
daemon showed the loop thread waking in epoll and the pool thread in
``_write_to_self`` on every request. A connection runs one request at a time
either way, so a thread per connection (at most ``max_connections``) is what
the pool's worker per connection was.
Security: the socket's directory is owner-only and the socket 0600 (made
under a restrictive umask, so there is no window where it is wider), the
peer's uid is checked with SO_PEERCRED, request size, connection count and
idle time are bounded. No TCP listener exists anywhere in Grimoire.

Bad traffic never stops the server: malformed JSON (NaN and Infinity
included: they are not JSON), wrong shapes, unknown methods and failing
methods each get a JSON-RPC error on that connection; an oversized line gets
an error and the connection is closed.

It must not know what the methods do: the method table is ``api.METHODS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grimoire.errors import GrimoireError, StoreError, ValidationError
from grimoire.logs import get_logger
from grimoire.runtime.afterwards import answering
from grimoire.scopes.access import Access
from grimoire.service.api import METHODS, dispatch, suggest

__all__ = ["Server", "error_response", "prepare_socket_path"]

log = get_logger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def error_response(req_id: Any, code: int, message: str, data: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": error}


def _encode(message: dict[str, Any]) -> bytes:
    # allow_nan=False: NaN and Infinity are not JSON and would break strict clients.
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def prepare_socket_path(path: Path, *, data_dir: Path | None = None,
                        shared: bool = False) -> None:
    """Make sure the socket's directory is owner-only and clear a stale socket file.

    A directory Grimoire creates (or the data directory, which is Grimoire's
    own) is set to 0700. Any other existing directory must already be
    owner-only: chmodding a shared directory such as /tmp or /run would break
    other programs, so that is refused with a message instead. A socket file
    that still answers belongs to a running daemon: refused too.

    ``shared`` (``access.scopes`` grants other uids, ``grimoire.scopes.access``): other
    users must reach the socket, so it may not sit in the data directory; the directory
    Grimoire creates is 0711 (passable, not listable) and an existing one must be owned
    by this user and writable by no one else.
    """
    parent = path.parent
    ours = data_dir is not None and parent.resolve() == Path(data_dir).resolve()
    if shared:
        _prepare_shared_dir(parent, ours)
    else:
        if not parent.exists():
            parent.mkdir(parents=True, mode=0o700)
            ours = True
        if ours:
            os.chmod(parent, 0o700)
        else:
            st = parent.stat()
            if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
                raise StoreError(
                    f"socket directory {parent} is reachable by other users (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}); put the socket "
                    "in an owner-only (0700) directory of yours, e.g. the data directory")
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise StoreError(f"{path} exists and is not a socket; refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: a leftover from a crash
        else:
            raise StoreError(f"another daemon is already listening on {path}")
        finally:
            probe.close()


def _prepare_shared_dir(parent: Path, in_data_dir: bool) -> None:
    if in_data_dir:
        raise StoreError(
            f"access.scopes grants other uids, so they must reach the socket, but it is in "
            f"the data directory {parent}, which must stay owner-only: set socket_path to "
            "a directory of its own (e.g. /run/grimoire/grimoire.sock)")
    if not parent.exists():
        parent.mkdir(parents=True, mode=0o700)
        os.chmod(parent, 0o711)
    st = parent.stat()
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
        raise StoreError(f"socket directory {parent} is writable by other users (mode "
                         f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): another "
                         "user could replace the socket; use a directory only you can write")


def _peer_uid(sock: socket.socket) -> int | None:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


@dataclass(eq=False)
class _Connection:
    sock: socket.socket
    uid: int | None = None  # the peer's, from SO_PEERCRED (grimoire.scopes.access)
    thread: threading.Thread | None = None
    busy: bool = False  # a request is being handled (stop lets it finish)
    closed: bool = False  # shut down by stop(); the thread ends at its next read
    done: threading.Event = field(default_factory=threading.Event)


class _Closed(Exception):
    """The connection is over (EOF, error, idle timeout, or stop)."""


class Server:
    """Serves one facade object on a Unix socket until ``stop()``.

    ``start`` and ``stop`` run on an asyncio loop (the daemon's), which accepts
    connections; each accepted connection gets a thread of its own.
    """

    def __init__(
        self,
        target: Any,
        path: Path,
        *,
        max_request_bytes: int = 1_048_576,
        max_connections: int = 64,
        idle_timeout_s: float = 300.0,
        allowed_uid: int | None = None,
        data_dir: Path | None = None,
        dispatcher: Callable[[Any, str, Any], Any] = dispatch,
        access: Access | None = None,
    ) -> None:
        self.target = target
        self.path = Path(path)
        self.data_dir = data_dir
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        # Which uid may use which scope (None: the owner only, every scope).
        self.access = access
        self._dispatch = dispatcher
        self._listener: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # the connection table, the busy flags and the counters
        self._connections: set[_Connection] = set()
        self._stopping = False
        self._serial = 0
        self.requests_served = 0
        self.connections_refused = 0
        self.errors_sent = 0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"socket": str(self.path), "connections": len(self._connections),
                    "in_flight": sum(1 for c in self._connections if c.busy),
                    "requests": self.requests_served, "errors": self.errors_sent,
                    "refused": self.connections_refused}

    async def start(self) -> None:
        shared = self.access is not None and self.access.shared
        prepare_socket_path(self.path, data_dir=self.data_dir, shared=shared)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is born 0600
        try:
            listener.bind(str(self.path))
            listener.listen(128)
        except OSError as exc:  # e.g. a path over the 107-byte AF_UNIX limit
            listener.close()
            raise StoreError(f"cannot listen on {self.path}: {exc}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o666 if shared else 0o600)  # shared: SO_PEERCRED is the gate
        listener.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._listener = listener
        self._loop.add_reader(listener.fileno(), self._accept)
        log.info("server.listening", socket=str(self.path))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting; finish in-flight requests (up to ``grace_s``); remove the socket.

        Idle connections are closed at once, so a client that keeps a connection
        open never holds up a shutdown. A request still running after ``grace_s``
        loses its connection but is waited for: the stores close after it.
        """
        with self._lock:
            self._stopping = True
            conns = list(self._connections)
            for conn in conns:
                if not conn.busy:
                    self._shut(conn)
        if self._listener is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
        deadline = time.monotonic() + grace_s
        while any(not c.done.is_set() for c in conns) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with self._lock:
            for conn in conns:
                if not conn.done.is_set():
                    self._shut(conn)
        while any(not c.done.is_set() for c in conns):  # the methods themselves always end
            await asyncio.sleep(0.01)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        log.info("server.stopped", requests=self.requests_served)

    # -- connections ----------------------------------------------------------------------

    def _accept(self) -> None:
        """On the loop, when the listener is readable: take every waiting connection."""
        while self._listener is not None:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: try again on the next readiness
                log.warning("server.accept.failed", error=str(exc))
                return
            sock.setblocking(True)
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        refusal: bytes | None = None
        with self._lock:
            if self._stopping:
                refusal = b""
            elif len(self._connections) >= self.max_connections:
                self.connections_refused += 1
                refusal = self._error(None, INVALID_REQUEST,
                                      f"too many connections (max {self.max_connections})",
                                      {"type": "BusyError"}, locked=True)
                log.warning("server.connections.full", max=self.max_connections)
        uid = None
        if refusal is None:
            uid = _peer_uid(sock)
            if not (self.access.admits(uid) if self.access is not None
                    else uid == self.allowed_uid):
                with self._lock:
                    self.connections_refused += 1
                log.warning("server.peer.refused", uid=uid)
                refusal = self._error(
                    None, INVALID_REQUEST,
                    "connection refused: the socket belongs to another user")
        if refusal is not None:
            # A new socket's send buffer is empty: a short answer never blocks the loop.
            sock.settimeout(1.0)
            with contextlib.suppress(OSError):
                if refusal:
                    sock.sendall(refusal)
            sock.close()
            return
        conn = _Connection(sock, uid)
        with self._lock:
            self._connections.add(conn)
            self._serial += 1
            name = f"grimoire-rpc-{self._serial}"
        conn.thread = threading.Thread(target=self._run, args=(conn,), name=name, daemon=True)
        conn.thread.start()

    @staticmethod
    def _shut(conn: _Connection) -> None:
        """Wake the connection's thread from its read: it sees EOF and ends. Under the lock."""
        if not conn.closed:
            conn.closed = True
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def _run(self, conn: _Connection) -> None:
        try:
            self._serve(conn)
        except _Closed:
            pass
        except Exception as exc:  # a bug here must cost one connection, not the server
            log.error("server.connection.crashed", error=repr(exc), exc_info=exc)
        finally:
            with self._lock:
                self._connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.sock.close()
            conn.done.set()

    def _serve(self, conn: _Connection) -> None:
        sock = conn.sock
        sock.settimeout(self.idle_timeout_s if self.idle_timeout_s > 0 else None)
        buf = bytearray()
        scanned = 0  # bytes of buf already known to hold no newline
        eof = False
        while True:
            end = buf.find(b"\n", scanned)
            if end < 0:
                scanned = len(buf)
                if len(buf) > self.max_request_bytes:
                    self._too_large(sock)
                    return
                if eof:
                    if not buf:
                        return  # EOF: the client closed (or half-closed) its side
                    line, buf = bytes(buf), bytearray()  # a last line without its newline
                else:
                    chunk = self._recv(sock)
                    if not chunk:
                        eof = True
                    buf += chunk
                    continue
            else:
                line = bytes(buf[:end + 1])
                del buf[:end + 1]
                scanned = 0
                if len(line) > self.max_request_bytes:
                    self._too_large(sock)
                    return
            if not line.strip():
                continue
            with self._lock:
                if self._stopping:
                    return  # shutting down: a request not yet started is not started
                conn.busy = True
            try:
                # Work a method leaves for after its answer (``runtime.afterwards``: retrieve's
                # log hand-off) runs when this block ends: once the answer is sent, or failed to.
                with answering():
                    response = self._handle_line(line, conn.uid)
                    if response is not None:
                        self._send(sock, response)
            finally:
                with self._lock:
                    conn.busy = False
            if self._stopping:
                return

    def _recv(self, sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except TimeoutError:
            log.debug("server.connection.idle_timeout")
            raise _Closed from None
        except OSError:
            raise _Closed from None

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        try:
            sock.sendall(data)
        except OSError:  # the client went away (or stopped reading for idle_timeout_s)
            raise _Closed from None

    def _too_large(self, sock: socket.socket) -> None:
        log.warning("server.request.too_large", max=self.max_request_bytes)
        self._send(sock, self._error(
            None, INVALID_REQUEST,
            f"request larger than max_request_bytes ({self.max_request_bytes}); "
            "connection closed"))

    def _handle_line(self, line: bytes, uid: int | None = None) -> bytes | None:
        """The encoded answer to one request line (None for a notification)."""
        try:
            request = json.loads(line, parse_constant=_reject_constant)
        except RecursionError:
            return self._error(None, PARSE_ERROR, "parse error: nested too deeply")
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, huge integers, NaN
            return self._error(None, PARSE_ERROR, f"parse error: {exc}")
        if not isinstance(request, dict):
            return self._error(None, INVALID_REQUEST,
                               "a request must be one JSON object per line")
        req_id = request.get("id")
        if req_id is not None and (isinstance(req_id, bool)
                                   or not isinstance(req_id, str | int | float)):
            return self._error(None, INVALID_REQUEST, "id must be a string, a number or null")
        if request.get("jsonrpc") != "2.0":
            return self._error(req_id, INVALID_REQUEST, 'jsonrpc must be "2.0"')
        method = request.get("method")
        if not isinstance(method, str):
            return self._error(req_id, INVALID_REQUEST, "method must be a string")
        params = request.get("params", {})
        if not isinstance(params, dict):
            return self._error(req_id, INVALID_PARAMS,
                               "params must be an object (by-name parameters)",
                               {"type": "ValidationError", "field": "params"})
        response = self._call(req_id, method, params, uid)
        with self._lock:
            self.requests_served += 1
            if "error" in response:
                self.errors_sent += 1
        if "id" not in request:
            return None  # a notification: executed, never answered
        try:
            return _encode(response)
        except (TypeError, ValueError) as exc:
            return self._error(req_id, INTERNAL_ERROR,
                               f"internal error in {method}: result is not JSON ({exc})",
                               {"type": "ProtocolError"})

    def _error(self, req_id: Any, code: int, message: str,
               data: dict[str, Any] | None = None, *, locked: bool = False) -> bytes:
        if locked:
            self.errors_sent += 1
        else:
            with self._lock:
                self.errors_sent += 1
        return _encode(error_response(req_id, code, message, data))

    def _call(self, req_id: Any, method: str, params: dict[str, Any], uid: int | None = None
              ) -> dict[str, Any]:
        if method not in METHODS:
            close = suggest(method)
            hint = f"; did you mean {close}?" if close else " (grimoire --help lists them)"
            return error_response(req_id, METHOD_NOT_FOUND, f"method not found: {method}{hint}",
                                  {"type": "MethodNotFound", "methods": sorted(METHODS),
                                   "did_you_mean": close})
        defaults = METHODS[method].socket_defaults
        if defaults:
            params = {**dict(defaults), **params}
        try:
            if self.access is not None:  # the peer's scopes (ScopeDeniedError, logged)
                self.access.check(uid, method, params)
            result = self._dispatch(self.target, method, params)
        except ValidationError as exc:
            return error_response(req_id, INVALID_PARAMS, str(exc),
                                  {"type": "ValidationError", "field": exc.field})
        except GrimoireError as exc:
            return error_response(req_id, exc.code, str(exc), {"type": type(exc).__name__})
        except Exception as exc:  # a bug in a method must not take the server down; logged
            log.error("server.method.crashed", method=method, error=repr(exc), exc_info=exc)
            return error_response(req_id, INTERNAL_ERROR, f"internal error in {method}: {exc!r}",
                                  {"type": type(exc).__name__})
        return {"jsonrpc": "2.0", "id": req_id, "result": result}
