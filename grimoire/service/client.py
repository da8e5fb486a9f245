"""A small synchronous client for the daemon's Unix socket; the CLI uses it, agents may too.

    from grimoire.service.client import Client
    with Client("data/grimoire/grimoire.sock") as c:
        c.call("episode.write", {"text": "swap 2 ETH", "type": "action"})

A JSON-RPC error comes back as the matching ``GrimoireError`` subclass (by
``data.type``), so callers handle ``ValidationError`` or ``NotFoundError``
the same way whether they use the facade in-process or the socket. Transport
failures (no daemon, connection closed, no answer in time) are
``ProtocolError``. A Client is one connection: use one per thread.
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Sequence
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


def _to_exception(error: Any) -> GrimoireError:
    if not isinstance(error, dict):
        return ProtocolError(f"malformed error object from the daemon: {error!r}")
    code = error.get("code", -32603)
    code = code if isinstance(code, int) else -32603
    message = str(error.get("message", "unknown error"))
    data = error.get("data") or {}
    kind = data.get("type") if isinstance(data, dict) else None
    cls = getattr(errors_module, kind, None) if isinstance(kind, str) else None
    if isinstance(cls, type) and issubclass(cls, GrimoireError) and cls is not GrimoireError:
        if cls is ValidationError:
            exc = ValidationError(message)
            exc.field = data.get("field")
            return exc
        made: GrimoireError = cls(message)
        return made
    return RemoteError(code, message, data)


class Client:
    """One connection to the daemon; ``call`` sends a request and waits for its answer."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
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
        except PermissionError:
            sock.close()
            raise ProtocolError(
                f"permission denied on {self.path}: the socket belongs to another user"
            ) from None
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
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                self.close()
                raise ProtocolError(
                    f"no answer from the daemon within {self.timeout} s") from None
            except ConnectionError:
                chunk = b""
            if not chunk:
                self.close()
                raise ProtocolError("the daemon closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _send(self, payload: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(payload)
        except (ConnectionError, TimeoutError):
            said = self._last_words()
            self.close()
            if said is not None:  # e.g. "request larger than max_request_bytes"
                raise said from None
            raise ProtocolError("the daemon closed the connection") from None

    def _last_words(self) -> GrimoireError | None:
        """The error the daemon answered before it closed the connection on us (a request
        over ``daemon.max_request_bytes`` is refused so, while we are still sending it),
        or None when it said nothing readable."""
        assert self._sock is not None
        try:
            self._sock.settimeout(min(self.timeout or 1.0, 1.0))
            while b"\n" not in self._buffer:
                chunk = self._sock.recv(65536)
                if not chunk:
                    break
                self._buffer += chunk
        except OSError:
            pass
        try:
            response = json.loads(self._buffer.split(b"\n", 1)[0])
        except ValueError:
            return None
        if isinstance(response, dict) and isinstance(response.get("error"), dict):
            return _to_exception(response["error"])
        return None

    def _answer(self, req_id: int) -> Any:
        try:
            response = json.loads(self._read_line())
        except ValueError as exc:
            self.close()
            raise ProtocolError(f"the daemon sent something that is not JSON: {exc}") from None
        if not isinstance(response, dict):
            raise ProtocolError(f"malformed answer from the daemon: {response!r}")
        if "error" in response:
            if response.get("id") not in (req_id, None):
                raise ProtocolError(f"answer for request {response.get('id')}, expected {req_id}")
            raise _to_exception(response["error"])
        if response.get("id") != req_id:
            raise ProtocolError(f"answer for request {response.get('id')}, expected {req_id}")
        return response.get("result")

    @staticmethod
    def _request(req_id: int, method: str, params: dict[str, Any] | None) -> bytes:
        payload = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params or {}}
        return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode() + b"\n"

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and return its result, or raise its error."""
        self.connect()
        req_id = next(self._ids)
        self._send(self._request(req_id, method, params))
        return self._answer(req_id)

    def call_many(self, method: str, params_list: Sequence[dict[str, Any]], *,
                  window: int = 32) -> list[Any]:
        """Pipeline many requests on this connection; one result or error object per request.

        Up to ``window`` requests are in flight at once (the daemon answers them in
        order), so a long list costs about one round trip per window, not one per
        item, and neither side's socket buffer can fill up while the other waits.
        Errors are returned in place, not raised, so one missing id does not hide
        the rest.
        """
        self.connect()
        ids = [next(self._ids) for _ in params_list]
        requests = [self._request(i, method, p) for i, p in zip(ids, params_list, strict=True)]
        out: list[Any] = []
        sent = 0
        for index, req_id in enumerate(ids):
            upto = min(len(ids), index + max(1, window))
            if sent < upto:
                self._send(b"".join(requests[sent:upto]))
                sent = upto
            try:
                out.append(self._answer(req_id))
            except ProtocolError:
                raise
            except GrimoireError as exc:
                out.append(exc)
        return out
