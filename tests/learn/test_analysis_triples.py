"""Seed 004's graph source 1: with an LLM, the triples its analysis of an episode proposes
are checked by the graph's own parser and asserted with the episode as their source, at the
episode's time; refused kinds or predicates are dropped; garbage writes nothing."""

from __future__ import annotations

import json
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
from grimoire.records.graph import MAX_BLOCK
from tests.learn.learn_support import T0, open_grimoire
from tests.learn.test_llm_paths import breach
from tests.llm_stub import read_request, reply, serve

TRIPLES = [
    {"subject": {"kind": "pool", "id": "WETH/USDC"}, "predicate": "oracle_dependency",
     "object": {"kind": "oracle", "id": "chainlink-eth-usd"}},
    {"subject": {"kind": "planet", "id": "mars"}, "predicate": "token_flow",  # no such kind
     "object": {"kind": "pool", "id": "WETH/USDC"}},
    {"subject": {"kind": "token", "id": "WETH"}, "predicate": "orbits",  # no such predicate
     "object": {"kind": "pool", "id": "WETH/USDC"}},
]


class Analyst(BaseHTTPRequestHandler):
    garbage: ClassVar[bool] = False

    def do_POST(self) -> None:
        prompt = read_request(self)["messages"][-1]["content"]
        if "Entity kinds:" in prompt:
            reply(self, "no idea" if Analyst.garbage else json.dumps({"triples": TRIPLES}))
        else:
            reply(self, "The action cost far more gas than predicted.")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Grimoire]:
    Analyst.garbage = False
    with serve(Analyst) as url:
        client = ChatClient(url, "stub", retries=0, timeout_s=5.0, sleep=lambda s: None)
        grimoire = open_grimoire(tmp_path, FrozenClock(T0), HashEmbedder(), llm=client)
        yield grimoire
        grimoire.close()


def _analysed(g: Grimoire) -> str:
    (action_id,) = g.episode_write_batch([breach()])["ids"]
    paths = paths_of(g.context)
    assert paths is not None and paths.worker.drain(10.0)
    return action_id


def test_the_analysis_triples_the_graph_accepts_are_asserted(g: Grimoire) -> None:
    action_id = _analysed(g)
    (fact,) = g.kg_at({"kind": "pool", "id": "WETH/USDC"}, MAX_BLOCK)["triples"]
    assert fact["predicate"] == "oracle_dependency"
    assert fact["object"]["value"] == {"kind": "oracle", "id": "chainlink-eth-usd"}
    assert fact["source_episode"] == action_id
    assert fact["valid_from"] == g.episode_get(action_id)["timestamp"]
    assert g.context.graph.count() == 1  # the unknown kind and predicate were refused
    assert g.status()["llm"]["paths"]["graph"] == {"calls": 1, "fallbacks": 0}


def test_a_garbage_answer_writes_nothing_and_is_counted(g: Grimoire) -> None:
    Analyst.garbage = True
    _analysed(g)
    assert g.context.graph.count() == 0
    assert g.status()["llm"]["paths"]["graph"]["fallbacks"] == 1
