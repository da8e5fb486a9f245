"""A small synchronous client for the daemon's Unix socket; the CLI uses it, agents may too.

    from grimoire.client import Client
    with Client("data/grimoire/grimoire.sock") as c:
        c.call("episode.write", {"text": "swap 2 ETH", "type": "action"})

A JSON-RPC error comes back as the matching ``GrimoireError`` subclass (by
``data.type``), so callers handle ``ValidationError`` or ``NotFoundError``
the same way whether they use the facade in-process or the socket.
"""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path
from types import TracebackType
from typing import Any

from grimoire import errors as errors_module
from grimoire.errors import GrimoireError, ProtocolError, ValidationError

__all__ = ["Client", "RemoteError"]


class RemoteError(GrimoireError):
    """A JSON-RPC error whose type has no local class (parse errors, internal errors)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def _to_exception(error: dict[str, Any]) -> GrimoireError:
    code = int(error.get("code", -32603))
    message = str(error.get("message", "unknown error"))
    data = error.get("data") or {}
    kind = data.get("type") if isinstance(data, dict) else None
    cls = getattr(errors_module, kind, None) if isinstance(kind, str) else None
    if isinstance(cls, type) and issubclass(cls, GrimoireError) and cls is not GrimoireError:
        if cls is ValidationError:
            exc: GrimoireError = ValidationError(message)
            exc.field = data.get("field")  # type: ignore[attr-defined]
            exc.args = (message,)
            return exc
        return cls(message)
    return RemoteError(code, message, data)


class Client:
    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._ids = itertools.count(1)

    def connect(self) -> None:
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except FileNotFoundError:
            sock.close()
            raise ProtocolError(
                f"no daemon socket at {self.path}: is `grimoire run` running "
                "with this data directory?") from None
        except ConnectionRefusedError:
            sock.close()
            raise ProtocolError(f"nothing is listening on {self.path}") from None
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buffer = b""

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _read_line(self) -> bytes:
        assert self._sock is not None
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                self.close()
                raise ProtocolError("the daemon closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and return its result, or raise its error."""
        self.connect()
        assert self._sock is not None
        req_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params or {}}
        self._sock.sendall(json.dumps(payload, separators=(",", ":")).encode() + b"\n")
        response = json.loads(self._read_line())
        if "error" in response:
            raise _to_exception(response["error"])
        if response.get("id") != req_id:
            raise ProtocolError(f"answer for request {response.get('id')}, expected {req_id}")
        return response.get("result")
