"""The asyncio Unix-socket JSON-RPC 2.0 server: one JSON object per line, owner-only.

Thin by design: it reads a line, checks that it is a JSON-RPC request, calls
``api.dispatch`` on the facade in a worker thread, and writes the answer.
Security: the socket's directory is 0700 and the socket 0600 (made under a
restrictive umask, so there is no window where it is wider), the peer's uid is
checked with SO_PEERCRED, request size, connection count and idle time are
bounded. No TCP listener exists anywhere in Grimoire.

Bad traffic never stops the server: malformed JSON, wrong shapes, unknown
methods and failing methods each get a JSON-RPC error on that connection;
an oversized line gets an error and the connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from grimoire.api import dispatch
from grimoire.errors import GrimoireError, StoreError, ValidationError

__all__ = ["Server", "error_response", "prepare_socket_path"]

log = structlog.get_logger()

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


def prepare_socket_path(path: Path) -> None:
    """Create the socket's directory owner-only and clear a stale socket file.

    A socket file that still answers belongs to a running daemon: refuse.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    if path.exists() or path.is_symlink():
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
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


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
        workers: int = 8,
        allowed_uid: int | None = None,
        dispatcher: Callable[[Any, str, Any], Any] = dispatch,
    ) -> None:
        self.target = target
        self.path = Path(path)
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._dispatch = dispatcher
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grimoire-rpc")
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.requests_served = 0

    async def start(self) -> None:
        prepare_socket_path(self.path)
        old_umask = os.umask(0o177)  # the socket is born 0600
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(self.path), limit=self.max_request_bytes + 1
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        log.info("server.listening", socket=str(self.path))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace_s``), remove the socket."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._connections:
            _done, pending = await asyncio.wait(self._connections, timeout=grace_s)
            for task in pending:
                task.cancel()
        self._executor.shutdown(wait=True, cancel_futures=False)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        log.info("server.stopped", requests=self.requests_served)

    # -- connections ----------------------------------------------------------------------

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.max_connections:
            await self._send(writer, error_response(
                None, INVALID_REQUEST, f"too many connections (max {self.max_connections})"))
            await self._close(writer)
            return
        uid = _peer_uid(writer)
        if uid != self.allowed_uid:
            log.warning("server.peer.refused", uid=uid)
            await self._send(writer, error_response(
                None, INVALID_REQUEST, "connection refused: socket belongs to another user"))
            await self._close(writer)
            return
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._connections.discard(task)
            await self._close(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                line = await asyncio.wait_for(reader.readline(), self.idle_timeout_s)
            except TimeoutError:
                return
            except (asyncio.LimitOverrunError, ValueError):
                await self._send(writer, error_response(
                    None, INVALID_REQUEST,
                    f"request larger than max_request_bytes ({self.max_request_bytes}); "
                    "connection closed"))
                return
            except ConnectionError:
                return
            if not line:
                return  # EOF: the client closed (or half-closed) its side
            if len(line) > self.max_request_bytes:
                await self._send(writer, error_response(
                    None, INVALID_REQUEST, "request larger than max_request_bytes"))
                return
            if not line.strip():
                continue
            response = await self._handle_line(line)
            if response is not None and not await self._send(writer, response):
                return

    async def _handle_line(self, line: bytes) -> dict[str, Any] | None:
        try:
            request = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return error_response(None, PARSE_ERROR, f"parse error: {exc}")
        if not isinstance(request, dict):
            return error_response(
                None, INVALID_REQUEST, "a request must be one JSON object per line")
        req_id = request.get("id")
        if req_id is not None and (isinstance(req_id, bool)
                                   or not isinstance(req_id, str | int | float)):
            return error_response(None, INVALID_REQUEST, "id must be a string or a number")
        if request.get("jsonrpc") != "2.0":
            return error_response(req_id, INVALID_REQUEST, 'jsonrpc must be "2.0"')
        method = request.get("method")
        if not isinstance(method, str):
            return error_response(req_id, INVALID_REQUEST, "method must be a string")
        params = request.get("params", {})
        if not isinstance(params, dict):
            return error_response(
                req_id, INVALID_PARAMS, "params must be an object (by-name parameters)",
                {"type": "ValidationError", "field": "params"})
        response = await self._call(req_id, method, params)
        self.requests_served += 1
        return None if "id" not in request else response

    async def _call(self, req_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self._executor, self._dispatch, self.target, method, params)
        except KeyError as exc:
            if exc.args and exc.args[0] == method:
                return error_response(req_id, METHOD_NOT_FOUND, f"method not found: {method}")
            return self._internal(req_id, method, exc)
        except ValidationError as exc:
            return error_response(req_id, INVALID_PARAMS, str(exc),
                                  {"type": "ValidationError", "field": exc.field})
        except GrimoireError as exc:
            return error_response(req_id, exc.code, str(exc), {"type": type(exc).__name__})
        except Exception as exc:  # a bug in a method must not take the server down
            return self._internal(req_id, method, exc)
        return {"jsonrpc": "2.0", "id": req_id, "result": result}

    @staticmethod
    def _internal(req_id: Any, method: str, exc: BaseException) -> dict[str, Any]:
        log.error("server.method.crashed", method=method, error=repr(exc), exc_info=exc)
        return error_response(req_id, INTERNAL_ERROR, f"internal error in {method}: {exc!r}",
                              {"type": type(exc).__name__})

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> bool:
        try:
            writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True

    @staticmethod
    async def _close(writer: asyncio.StreamWriter) -> None:
        writer.close()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await writer.wait_closed()
