"""Seed 001's recording ritual with an LLM (``curator.learn.cause_judge``), against a local
chat-completions stub: a new event's auto-linked causes are judged, the first confirmed one
kept with the model's sentence, the others dropped; all rejected → a root event; a failing
model leaves the rule-based links as they were."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest

from curator.learn.llm_paths import paths_of
from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.models.llm import ChatClient
from grimoire.stores.semantic.types import EdgeKind
from tests.learn.learn_support import T0, open_grimoire
from tests.llm_stub import fail, read_request, reply, serve

MINUTE = 60_000


class Judge(BaseHTTPRequestHandler):
    """Says yes only when the preceding event is about the oracle; or is down."""

    down: ClassVar[bool] = False
    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        prompt = read_request(self)["messages"][-1]["content"]
        Judge.asked.append(prompt)
        if Judge.down:
            fail(self, 503)
            return
        if "directly lead" not in prompt:
            reply(self, '{"future_utility": 0.5}')
            return
        cause = prompt.split("preceding event: '", 1)[1].split("'", 1)[0]
        reply(self, "Yes: the lagging oracle priced the collateral too high." if "oracle"
              in cause else "No.")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Grimoire]:
    Judge.down, Judge.asked = False, []
    with serve(Judge) as url:
        client = ChatClient(url, "stub", retries=0, timeout_s=5.0, sleep=lambda s: None)
        grimoire = open_grimoire(tmp_path, FrozenClock(T0), HashEmbedder(), llm=client)
        yield grimoire
        grimoire.close()


def _write(g: Grimoire, text: str, **fields: Any) -> str:
    out: str = g.episode_write(text=text, **fields)["id"]
    g.context.clock.advance(MINUTE)  # type: ignore[attr-defined]
    return out


def _settle(g: Grimoire) -> None:
    paths = paths_of(g.context)
    assert paths is not None and paths.worker.drain(10.0)


def test_the_first_confirmed_cause_is_kept_with_the_models_sentence(g: Grimoire) -> None:
    noise = _write(g, "eth liquidation price lagging spot on the lending market")
    oracle = _write(g, "eth oracle price lagging spot on the lending market")
    effect = _write(g, "eth liquidation at a stale oracle price on the lending market")
    _settle(g)
    edges = g.context.semantic.edges_to(effect, [EdgeKind.AUTO])
    assert [e.cause_id for e in edges] == [oracle]
    assert edges[0].relationship == "the lagging oracle priced the collateral too high."
    assert noise != oracle
    assert any("directly lead" in p for p in Judge.asked)


def test_every_candidate_rejected_makes_a_root_event(g: Grimoire) -> None:
    _write(g, "eth gas price rising on the lending market")
    effect = _write(g, "eth gas price rising again on the lending market")
    before = g.context.semantic.edges_to(effect, [EdgeKind.AUTO])
    assert before  # the rule-based test linked it
    _settle(g)
    assert g.context.semantic.edges_to(effect, [EdgeKind.AUTO]) == []


def test_a_failing_model_leaves_the_rule_based_links(g: Grimoire) -> None:
    Judge.down = True
    _write(g, "eth gas price rising on the lending market")
    effect = _write(g, "eth gas price rising again on the lending market")
    before = g.context.semantic.edges_to(effect, [EdgeKind.AUTO])
    _settle(g)
    assert g.context.semantic.edges_to(effect, [EdgeKind.AUTO]) == before != []
    assert g.status()["llm"]["paths"]["causes"]["fallbacks"] >= 1


def test_a_named_cause_is_not_second_guessed(g: Grimoire) -> None:
    cause = _write(g, "eth gas price rising on the lending market")
    _write(g, "eth gas price rising again on the lending market", causal_hint=cause)
    _settle(g)
    assert not [p for p in Judge.asked if "rising again" in p and "directly lead" in p]
