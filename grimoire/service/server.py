"""The asyncio Unix-socket JSON-RPC 2.0 server: one JSON object per line, owner-only.

Thin by design: it reads a line, checks that it is a JSON-RPC request, calls
``api.dispatch`` on the facade in a worker thread, and writes the answer.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grimoire.errors import GrimoireError, StoreError, ValidationError
from grimoire.logs import get_logger
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


def prepare_socket_path(path: Path, *, data_dir: Path | None = None) -> None:
    """Make sure the socket's directory is owner-only and clear a stale socket file.

    A directory Grimoire creates (or the data directory, which is Grimoire's
    own) is set to 0700. Any other existing directory must already be
    owner-only: chmodding a shared directory such as /tmp or /run would break
    other programs, so that is refused with a message instead. A socket file
    that still answers belongs to a running daemon: refused too.
    """
    parent = path.parent
    ours = data_dir is not None and parent.resolve() == Path(data_dir).resolve()
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
                f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}); put the socket in "
                "an owner-only (0700) directory of yours, e.g. the data directory")
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


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


@dataclass(eq=False)
class _Connection:
    task: asyncio.Task[None]
    busy: bool = False


class Server:
    """Serves one facade object on a Unix socket until ``stop()``."""

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
    ) -> None:
        self.target = target
        self.path = Path(path)
        self.data_dir = data_dir
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._dispatch = dispatcher
        # One worker per possible connection: a connection runs one request at a time, so no
        # request ever waits for a pool thread, and concurrent writes reach the writer
        # together, where they are group-committed.
        self._executor = ThreadPoolExecutor(max_workers=max_connections,
                                            thread_name_prefix="grimoire-rpc")
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._stopping = False
        self.requests_served = 0
        self.connections_refused = 0
        self.errors_sent = 0

    def stats(self) -> dict[str, Any]:
        return {"socket": str(self.path), "connections": len(self._connections),
                "in_flight": sum(1 for c in self._connections.values() if c.busy),
                "requests": self.requests_served, "errors": self.errors_sent,
                "refused": self.connections_refused}

    async def start(self) -> None:
        prepare_socket_path(self.path, data_dir=self.data_dir)
        old_umask = os.umask(0o177)  # the socket is born 0600
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(self.path), limit=self.max_request_bytes + 1
            )
        except OSError as exc:  # e.g. a path over the 107-byte AF_UNIX limit
            raise StoreError(f"cannot listen on {self.path}: {exc}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        log.info("server.listening", socket=str(self.path))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting; finish in-flight requests (up to ``grace_s``); remove the socket.

        Idle connections are closed at once, so a client that keeps a connection
        open never holds up a shutdown.
        """
        self._stopping = True
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for conn in list(self._connections.values()):
            if not conn.busy:
                conn.task.cancel()
        tasks = list(self._connections)
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        self._executor.shutdown(wait=True, cancel_futures=False)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        log.info("server.stopped", requests=self.requests_served)

    # -- connections ----------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._stopping:
            await self._close(writer)
            return
        if len(self._connections) >= self.max_connections:
            self.connections_refused += 1
            log.warning("server.connections.full", max=self.max_connections)
            await self._send(writer, error_response(
                None, INVALID_REQUEST, f"too many connections (max {self.max_connections})",
                {"type": "BusyError"}))
            await self._close(writer)
            return
        uid = _peer_uid(writer)
        if uid != self.allowed_uid:
            self.connections_refused += 1
            log.warning("server.peer.refused", uid=uid)
            await self._send(writer, error_response(
                None, INVALID_REQUEST, "connection refused: the socket belongs to another user"))
            await self._close(writer)
            return
        conn = _Connection(task)
        self._connections[task] = conn
        try:
            await self._serve(reader, writer, conn)
        except asyncio.CancelledError:
            pass  # shutdown closed an idle connection (or one past the grace period)
        finally:
            self._connections.pop(task, None)
            await self._close(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     conn: _Connection) -> None:
        while not self._stopping:
            try:
                line = await asyncio.wait_for(reader.readline(), self.idle_timeout_s)
            except TimeoutError:
                log.debug("server.connection.idle_timeout")
                return
            except (asyncio.LimitOverrunError, ValueError):
                await self._too_large(writer)
                return
            except ConnectionError:
                return
            if not line:
                return  # EOF: the client closed (or half-closed) its side
            if len(line) > self.max_request_bytes:
                await self._too_large(writer)
                return
            if not line.strip():
                continue
            conn.busy = True
            try:
                response = await self._handle_line(line)
            finally:
                conn.busy = False
            if response is not None and not await self._write(writer, response):
                return

    async def _too_large(self, writer: asyncio.StreamWriter) -> None:
        self.errors_sent += 1
        log.warning("server.request.too_large", max=self.max_request_bytes)
        await self._send(writer, error_response(
            None, INVALID_REQUEST,
            f"request larger than max_request_bytes ({self.max_request_bytes}); "
            "connection closed"))

    async def _handle_line(self, line: bytes) -> bytes | None:
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
        response = await self._call(req_id, method, params)
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
               data: dict[str, Any] | None = None) -> bytes:
        self.errors_sent += 1
        return _encode(error_response(req_id, code, message, data))

    async def _call(self, req_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method not in METHODS:
            close = suggest(method)
            hint = f"; did you mean {close}?" if close else " (grimoire --help lists them)"
            return error_response(req_id, METHOD_NOT_FOUND, f"method not found: {method}{hint}",
                                  {"type": "MethodNotFound", "methods": sorted(METHODS),
                                   "did_you_mean": close})
        defaults = METHODS[method].socket_defaults
        if defaults:
            params = {**dict(defaults), **params}
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self._executor, self._dispatch, self.target, method, params)
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

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> bool:
        return await self._write(writer, _encode(message))

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, data: bytes) -> bool:
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True

    @staticmethod
    async def _close(writer: asyncio.StreamWriter) -> None:
        writer.close()
        with contextlib.suppress(ConnectionError, RuntimeError, asyncio.CancelledError):
            await writer.wait_closed()
