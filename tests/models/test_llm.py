"""The optional LLM client, against a local stub server on loopback that speaks the protocol."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from grimoire.config import LLMConfig
from grimoire.errors import LLMError
from grimoire.models.llm import ChatClient, make_llm, parse_json_answer
from tests.llm_stub import fail, read_request, reply, serve

SLOW = 0
SLOW_SECONDS = 1.0


class StubHandler(BaseHTTPRequestHandler):
    """Answers like an OpenAI-compatible server; a script of status codes drives failures."""

    script: ClassVar[list[int]] = []  # HTTP statuses to answer with; SLOW: sleep, then 200
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = read_request(self)
        StubHandler.seen.append({"path": self.path, "body": body,
                                 "auth": self.headers.get("Authorization")})
        status = StubHandler.script.pop(0) if StubHandler.script else 200
        if status == SLOW:
            time.sleep(SLOW_SECONDS)  # longer than the client's timeout below
            status = 200
        if status != 200:
            fail(self, status)
            return
        last = body["messages"][-1]["content"]
        reply(self, f'{{"echo": {json.dumps(last)}}}', prompt_tokens=11, completion_tokens=5)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def stub() -> Iterator[str]:
    StubHandler.script = []
    StubHandler.seen = []
    with serve(StubHandler) as url:
        yield url


def test_no_base_url_means_no_client() -> None:
    assert make_llm(LLMConfig(), {}) is None


def test_completion_round_trip_counts_tokens(stub: str) -> None:
    client = make_llm(LLMConfig(base_url=stub, model="tiny"), {"GRIMOIRE_LLM_API_KEY": "k"})
    assert client is not None
    text = client.complete([{"role": "user", "content": "is gas cheap?"}])
    assert parse_json_answer(text) == {"echo": "is gas cheap?"}
    seen = StubHandler.seen[0]
    assert seen["path"] == "/v1/chat/completions"
    assert seen["body"]["model"] == "tiny" and seen["auth"] == "Bearer k"
    stats = client.stats.to_dict()
    assert stats["requests"] == 1 and stats["prompt_tokens"] == 11
    assert stats["completion_tokens"] == 5 and stats["failures"] == 0


def test_retries_server_errors_then_succeeds(stub: str) -> None:
    StubHandler.script = [503, 500]
    client = ChatClient(stub, "tiny", retries=2, sleep=lambda s: None)
    assert "hi" in client.complete([{"role": "user", "content": "hi"}])
    assert client.stats.retries == 2 and len(StubHandler.seen) == 3


def test_bounded_retries_then_clear_error(stub: str) -> None:
    StubHandler.script = [500, 500, 500, 500]
    client = ChatClient(stub, "tiny", retries=1, sleep=lambda s: None)
    with pytest.raises(LLMError, match="HTTP 500"):
        client.complete([{"role": "user", "content": "hi"}])
    assert len(StubHandler.seen) == 2 and client.stats.failures == 1


def test_client_errors_are_not_retried(stub: str) -> None:
    StubHandler.script = [400]
    client = ChatClient(stub, "tiny", retries=3, sleep=lambda s: None)
    with pytest.raises(LLMError, match="HTTP 400"):
        client.complete([{"role": "user", "content": "hi"}])
    assert len(StubHandler.seen) == 1


def test_a_reply_slower_than_the_timeout_is_retried_within_the_bound(stub: str) -> None:
    """A stalled server costs at most (retries + 1) timeouts, then a clear LLMError; a
    stall followed by a prompt answer succeeds on the retry."""
    client = ChatClient(stub, "tiny", retries=1, timeout_s=0.2, sleep=lambda s: None)
    StubHandler.script = [SLOW, SLOW]
    with pytest.raises(LLMError, match="timed out"):
        client.complete([{"role": "user", "content": "hi"}])
    assert len(StubHandler.seen) == 2
    assert client.stats.retries == 1 and client.stats.failures == 1
    StubHandler.script = [SLOW]
    assert "hi again" in client.complete([{"role": "user", "content": "hi again"}])
    assert client.stats.retries == 2 and client.stats.failures == 1


def test_unreachable_endpoint_fails_after_retries() -> None:
    client = ChatClient("http://127.0.0.1:9/v1", "tiny", retries=1, timeout_s=0.5,
                        sleep=lambda s: None)
    with pytest.raises(LLMError, match="failed"):
        client.complete([{"role": "user", "content": "hi"}])


def test_bad_urls_and_answers() -> None:
    with pytest.raises(LLMError, match="http"):
        ChatClient("ftp://x", "m")
    with pytest.raises(LLMError, match="no JSON"):
        parse_json_answer("sure thing!")
    assert parse_json_answer('Here:\n```json\n{"score": 0.7}\n```') == {"score": 0.7}
