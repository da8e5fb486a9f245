"""A chat-completions server on loopback for the LLM tests: the wire format, served once.

Each test module writes its own ``BaseHTTPRequestHandler`` (what to answer depends on
the prompt it tests); this module holds what they share: reading the request, writing
an answer or a failure in the OpenAI-compatible shape, and serving on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["fail", "read_request", "reply", "serve"]


def read_request(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    """The request body (JSON) of a POST."""
    body: dict[str, Any] = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
    return body


def reply(handler: BaseHTTPRequestHandler, content: str, *, prompt_tokens: int = 40,
          completion_tokens: int = 8) -> None:
    """Answer 200 with one assistant message and its token usage."""
    data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": prompt_tokens,
                                 "completion_tokens": completion_tokens}}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def fail(handler: BaseHTTPRequestHandler, status: int) -> None:
    """Answer with an HTTP error status and no body."""
    handler.send_response(status)
    handler.end_headers()


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on an ephemeral loopback port; yields the ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
