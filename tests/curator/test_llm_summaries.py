"""LLM-written hierarchical summaries (seed 002) against a local chat-completions stub.

With an LLM configured the summaries phase hands each L1 / L2 to
``LLMPaths.write_summary``: the model writes the prose, while provenance,
tags and period stay those of the rule-based path. An outage or an unusable
answer (empty, garbage, a refusal, too long, a number the data does not hold)
keeps the extractive text. Without an LLM nothing touches the network.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest

from curator.cycle.state import Cycle
from curator.cycle.summaries import _l1_drafts, hierarchical_summaries
from curator.hierarchy.summaries import SummaryDraft
from curator.learn.llm_paths import PATHS_KEY, paths_of
from curator.learn.llm_prompts import (
    SUMMARY_MAX_CHARS,
    SUMMARY_TASK,
    parse_summary,
    summary_messages,
)
from grimoire.clock import FrozenClock
from grimoire.errors import LLMError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.models.llm import ChatClient
from grimoire.records import GrimoireEntry
from tests.curator.test_curator_support import finish_cycle, hour, start_cycle, swap, write
from tests.learn.learn_support import open_grimoire
from tests.llm_stub import fail, read_request, reply, serve

# Six eth-dca swaps: 2 positive, 4 negative, gain -5 to 5 (total -10); the answer restates them.
L1_ANSWER = ("The eth-dca strategy swapped WETH/USDC on uniswap_v3 in high volatility; "
             "4 swaps lost and 2 gained, a total of -10.")
L2_ANSWER = ("Over two sessions and 12 episodes the eth-dca swaps in high volatility "
             "mostly lost.")


class Stub(BaseHTTPRequestHandler):
    """A chat-completions server: summary prompts get ``answer`` (or a failure by ``mode``)."""

    mode: ClassVar[str] = "ok"  # ok | down | empty | garbage | invented | refusal | long
    prompts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        prompt = read_request(self)["messages"][-1]["content"]
        Stub.prompts.append(prompt)
        if Stub.mode == "down" and SUMMARY_TASK in prompt:
            fail(self, 503)
            return
        reply(self, self.answer(prompt), prompt_tokens=50, completion_tokens=20)

    @staticmethod
    def answer(prompt: str) -> str:
        if SUMMARY_TASK not in prompt:
            return json.dumps({"future_utility": 0.5})
        return {
            "ok": f"Summary: {L1_ANSWER if 'of this session' in prompt else L2_ANSWER}",
            "empty": "   \n",
            "garbage": "lorem ipsum {not json",
            "invented": "Gas averaged 999 gwei while the eth-dca swaps lost money.",
            "refusal": "I'm sorry, but I cannot summarise these trading episodes.",
            "long": "The swaps lost money again. " * 60,
        }[Stub.mode]

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.mode, Stub.prompts = "ok", []
    with serve(Stub) as url:
        yield url


CHANGES = {"curator.l2_every_cycles": 2, "curator.write_batch": 8}


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock, hash_embedder: HashEmbedder,
      stub: str) -> Iterator[Grimoire]:
    client = ChatClient(stub, "stub", retries=0, timeout_s=5.0, sleep=lambda s: None)
    grimoire = open_grimoire(tmp_path, clock, hash_embedder, llm=client, changes=CHANGES)
    yield grimoire
    grimoire.close()


def summary_prompts() -> list[str]:
    return [p for p in Stub.prompts if SUMMARY_TASK in p]


def summary_counts(g: Grimoire) -> dict[str, int]:
    counts: dict[str, int] = g.status()["llm"]["paths"]["summary"]
    return counts


def summaries(g: Grimoire, level: int) -> list[GrimoireEntry]:
    return [e for e in g.context.semantic.list_entries(limit=None)
            if f"summary:l{level}" in e.tags]


def rule_based_l1s(cy: Cycle, monkeypatch: pytest.MonkeyPatch) -> list[SummaryDraft]:
    """The drafts this cycle's summaries phase makes without its LLM (pure: nothing stored)."""
    with monkeypatch.context() as m:
        m.delitem(cy.ctx.extras, PATHS_KEY)
        assert paths_of(cy.ctx) is None
        return _l1_drafts(cy)


def session(g: Grimoire, clock: FrozenClock, at: float) -> Cycle:
    write(g, [swap(hour(at) + i * 60_000, "negative" if i % 3 else "positive")
              for i in range(6)])
    clock.set(hour(at + 1))
    return start_cycle(g)


def test_the_llm_writes_l1_and_l2_prose_with_rule_based_provenance(
        g: Grimoire, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    cy = session(g, clock, 1)
    (plain,) = rule_based_l1s(cy, monkeypatch)
    # The rule-based drafts asked nothing. (Auto-linking may already have asked the
    # model to judge a causal candidate, on the writer's own schedule: not a summary.)
    assert summary_prompts() == []
    first = hierarchical_summaries(cy)
    finish_cycle(cy)
    assert first["l1"] == 1 and first["l2"] == 0
    (l1,) = summaries(g, 1)
    assert l1.content == L1_ANSWER  # the label "Summary:" is stripped
    assert l1.parent_episode_ids == plain.parent_episode_ids and len(plain.parent_episode_ids) == 6
    assert l1.tags == plain.tags and l1.strategy == plain.strategy == "eth-dca"
    assert (l1.valid_from, l1.valid_until) == (plain.valid_from, plain.valid_until)
    (prompt,) = summary_prompts()
    assert "Outcomes: 2 positive, 4 negative" in prompt  # the measured facts
    assert "eth-dca swap on WETH/USDC in high_vol: negative" in prompt  # an episode text
    assert summary_counts(g) == {"calls": 1, "fallbacks": 0}

    cy = session(g, clock, 3)
    (plain2,) = rule_based_l1s(cy, monkeypatch)
    second = hierarchical_summaries(cy)
    finish_cycle(cy)
    assert second["l1"] == 1 and second["l2"] == 1
    (l2,) = summaries(g, 2)
    assert l2.content == L2_ANSWER
    assert set(l2.parent_entry_ids) == {e.id for e in summaries(g, 1)}
    assert l2.parent_episode_ids == plain.parent_episode_ids + plain2.parent_episode_ids
    assert l2.tags[:2] == ("summary", "summary:l2")
    chapter = summary_prompts()[-1]
    assert "Session summaries of the chapter" in chapter and L1_ANSWER in chapter
    assert summary_counts(g) == {"calls": 3, "fallbacks": 0}


@pytest.mark.parametrize("mode", ["down", "empty", "garbage", "invented", "refusal", "long"])
def test_a_bad_answer_keeps_the_extractive_text(
        g: Grimoire, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    Stub.mode = mode
    cy = session(g, clock, 1)
    (plain,) = rule_based_l1s(cy, monkeypatch)
    assert hierarchical_summaries(cy)["l1"] == 1
    (l1,) = summaries(g, 1)
    assert l1.content == plain.content and l1.content.startswith("6 episodes")
    assert l1.parent_episode_ids == plain.parent_episode_ids and l1.tags == plain.tags
    assert len(summary_prompts()) == 1
    assert summary_counts(g) == {"calls": 1, "fallbacks": 1}


def test_an_answer_is_remembered(g: Grimoire) -> None:
    paths = paths_of(g.context)
    assert paths is not None
    facts = "6 episodes: outcomes 2 positive, 4 negative; gain total -10."
    texts = ["eth-dca swap on WETH/USDC in high_vol: negative"] * 6
    assert paths.write_summary(1, facts, texts) == L1_ANSWER
    assert paths.write_summary(1, facts, texts) == L1_ANSWER
    assert len(summary_prompts()) == 1
    Stub.mode = "down"
    with pytest.raises(LLMError):
        paths.write_summary(2, facts, texts)
    assert summary_counts(g) == {"calls": 2, "fallbacks": 1}


# -- the prompt and its parser ------------------------------------------------------------


def test_the_prompt_is_bounded_and_its_instructions_hold_no_numbers() -> None:
    texts = [f"episode {i} gas {i}.5 gwei" for i in range(100)]
    (system, user) = summary_messages(1, "100 episodes. Metrics: gas 0.5–99.5 gwei.", texts,
                                      max_excerpts=5)
    assert system["role"] == "system" and SUMMARY_TASK in user["content"]
    quoted = [line for line in user["content"].splitlines() if line.startswith("- ")]
    assert quoted == [f"- episode {i} gas {i}.5 gwei" for i in (0, 25, 50, 74, 99)]
    task = user["content"].rsplit("\n\n", 1)[1]
    assert not any(c.isdigit() for c in task)
    (_, same) = summary_messages(1, "x", ["a  b", "a b", "c"], max_excerpts=5)
    assert same["content"].count("- a b") == 1  # repeated texts are quoted once
    with pytest.raises(LLMError):
        summary_messages(3, "x", [], max_excerpts=5)


def test_the_parser_accepts_restated_numbers_and_rejects_invented_ones() -> None:
    prompt = "12 episodes, 2026-01-01 01:00–03:05 UTC. Metrics: gas 23.47–40,512 gwei."
    assert parse_summary("```\n**Summary:** Gas ran from 23.5 to 40,512 gwei\n```",
                         prompt) == "Gas ran from 23.5 to 40,512 gwei"
    assert parse_summary("Twelve observations on 2026-01-01 at 01:00 UTC, gas near 23 gwei.",
                         prompt).startswith("Twelve")
    assert parse_summary("Swaps on uniswap_v3 and the ERC20 token lost -10 in total.",
                         "Outcomes: gain total -10.")  # identifiers hold no numbers
    for bad in ("", "Gas was 77 gwei in the session.", "Gas high.",
                '{"summary": "gas was high all session"}', "As an AI I cannot summarise this.",
                "Gas was high. " * (SUMMARY_MAX_CHARS // 10)):
        with pytest.raises(LLMError):
            parse_summary(bad, prompt)


# -- no LLM: no network -------------------------------------------------------------------


def test_without_an_llm_summaries_are_extractive_and_touch_no_network(
        tmp_path: Path, clock: FrozenClock, hash_embedder: HashEmbedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[Any] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX:
            attempts.append(address)
            raise ConnectionRefusedError(f"network access in a test: {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        guard(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard(self, address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    with open_grimoire(tmp_path, clock, hash_embedder, changes=CHANGES) as g:
        assert paths_of(g.context) is None
        for at in (1, 3):
            write(g, [swap(hour(at) + i * 60_000, "negative" if i % 3 else "positive")
                      for i in range(6)])
            clock.set(hour(at + 1))
            phase = g.curator_run()["phases"]["summaries"]
        assert phase["l1"] == 1 and phase["l2"] == 1
        assert all(e.content.startswith("6 episodes") for e in summaries(g, 1))
        (l2,) = summaries(g, 2)
        assert l2.content.startswith("Chapter of 2 session summaries covering 12 episodes")
        assert g.status()["llm"] == {"configured": False}
    assert attempts == []
