"""The optional LLM: an OpenAI-compatible chat-completions client (local Ollama, llama.cpp…).

Grimoire never needs an LLM: every step that can use one (admission's future
utility, Reflexion's outcome comparison / counterfactual / insight steps,
ExpeL prompt distillation, the causality judgement) has a rule-based default.
``make_llm(config)`` returns ``None`` when ``llm.base_url`` is unset, and then
nothing in Grimoire touches the network.

When configured: stdlib HTTP only, a timeout per request, bounded retries on
timeouts / 429 / 5xx with backoff, and tokens and latency counted for
``status``. The API key is read from the environment variable the config
names, by ``make_llm`` only.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from grimoire.config import LLMConfig
from grimoire.errors import LLMError
from grimoire.logs import get_logger

__all__ = ["LLM", "ChatClient", "LLMStats", "make_llm", "parse_json_answer"]

log = get_logger(__name__)


class LLM(Protocol):
    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512,
                 temperature: float = 0.0) -> str: ...


@dataclass
class LLMStats:
    requests: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms_total: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            mean = self.latency_ms_total / self.requests if self.requests else 0.0
            return {"configured": True, "requests": self.requests, "failures": self.failures,
                    "retries": self.retries, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "mean_latency_ms": round(mean, 1)}


class ChatClient:
    """POST {base_url}/chat/completions with bounded retries."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout_s: float = 30.0, retries: int = 2,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"llm.base_url must be an http(s) URL, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.stats = LLMStats()
        self._sleep = sleep

    def _post(self, body: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512,
                 temperature: float = 0.0) -> str:
        body = json.dumps({"model": self.model, "messages": [dict(m) for m in messages],
                           "max_tokens": max_tokens, "temperature": temperature}).encode()
        last_error = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                with self.stats._lock:
                    self.stats.retries += 1
                self._sleep(min(2.0, 0.25 * 2 ** (attempt - 1)))
            started = time.monotonic()
            try:
                answer = self._post(body)
            except urllib.error.HTTPError as exc:
                last_error = f"HTTP {exc.code}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                break  # a 4xx other than 429 will not get better by retrying
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            except json.JSONDecodeError:
                last_error = "the answer was not JSON"
                break
            return self._record(answer, started)
        with self.stats._lock:
            self.stats.requests += 1
            self.stats.failures += 1
        log.warning("llm.request.failed", url=self.url, error=last_error)
        raise LLMError(f"LLM request to {self.url} failed: {last_error}")

    def _record(self, answer: Mapping[str, Any], started: float) -> str:
        elapsed_ms = (time.monotonic() - started) * 1000
        usage = answer.get("usage") or {}
        try:
            text = str(answer["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            with self.stats._lock:
                self.stats.requests += 1
                self.stats.failures += 1
            raise LLMError("the LLM answer has no choices[0].message.content") from None
        with self.stats._lock:
            self.stats.requests += 1
            self.stats.latency_ms_total += elapsed_ms
            self.stats.prompt_tokens += int(usage.get("prompt_tokens", 0) or 0)
            self.stats.completion_tokens += int(usage.get("completion_tokens", 0) or 0)
        return text


def parse_json_answer(text: str) -> Any:
    """The first JSON object in an LLM answer (models like to wrap it in prose or fences)."""
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        raise LLMError("the LLM answer holds no JSON object")
    try:
        return json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise LLMError(f"the LLM answer's JSON is malformed: {exc}") from exc


def make_llm(config: LLMConfig, env: Mapping[str, str]) -> ChatClient | None:
    """The configured client, or None (rule-based only, no network) when no base_url is set."""
    if not config.base_url:
        return None
    return ChatClient(config.base_url, config.model, api_key=env.get(config.api_key_env),
                      timeout_s=config.timeout_s, retries=config.retries)
