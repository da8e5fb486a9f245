"""The optional LLM paths against a local stub server that speaks the chat-completions protocol.

Each path (admission utility, Reflexion steps 3-5, ExpeL prompt distillation,
causality judgement) is tested with sensible answers, with garbage, and with
an outage: a bad LLM is logged and counted, and the rule-based result stands.
Without an LLM nothing may touch the network.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from curator.learn.hook import distill
from curator.learn.llm_paths import paths_of
from curator.learn.verify import verify_proposals
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.config import DistillerConfig
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.models.llm import ChatClient
from grimoire.records import Category, Episode, EpisodeType, Outcome, Regime
from tests.learn.learn_support import (
    T0,
    alert_stream,
    entries,
    gas_observations,
    open_grimoire,
    run_sim,
    write,
)
from tests.llm_stub import fail, read_request, reply, serve

NOW = T0 + 3 * MS_PER_DAY
GAS_CLAIM = {"condition": {"hour_window": [2, 4]}, "target": "metric:gas_gwei",
             "direction": "lower"}


class Stub(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose answers depend on the prompt (and a mode)."""

    mode: ClassVar[str] = "ok"  # ok | garbage | down
    claims: ClassVar[list[Any]] = []
    causal: ClassVar[str] = "Yes: the whale's transfer moved the market into high volatility."
    utility: ClassVar[float] = 0.9
    prompts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        prompt = read_request(self)["messages"][-1]["content"]
        Stub.prompts.append(prompt)
        if Stub.mode == "down":
            fail(self, 503)
            return
        reply(self, self.answer(prompt))

    @staticmethod
    def answer(prompt: str) -> str:
        if Stub.mode == "garbage":
            return "lorem ipsum {not json"
        if "future_utility" in prompt:
            return json.dumps({"future_utility": Stub.utility})
        if "Propose at most" in prompt:
            return "Here:\n```json\n" + json.dumps({"claims": Stub.claims}) + "\n```"
        if "directly lead" in prompt:
            return Stub.causal
        if "INSIGHT" in prompt:
            return "INSIGHT: When gas exceeds 300 gwei, do wait because swaps then break the " \
                   "gas ceiling."
        return "The action cost far more gas than predicted."

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.mode, Stub.claims, Stub.prompts = "ok", [], []
    Stub.causal = "Yes: the whale's transfer moved the market into high volatility."
    with serve(Stub) as url:
        yield url


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder, stub: str) -> Iterator[Grimoire]:
    client = ChatClient(stub, "stub", retries=0, timeout_s=5.0, sleep=lambda s: None)
    # A new event's auto-linked causes are judged too (test_llm_causes.py): left out here,
    # where each test counts the prompts of the path it tests.
    grimoire = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder, llm=client,
                             changes={"llm.cause_candidates": 0})
    yield grimoire
    grimoire.close()


def prompts(word: str) -> list[str]:
    return [p for p in Stub.prompts if word in p]


def llm_stats(g: Grimoire) -> dict[str, Any]:
    stats: dict[str, Any] = g.status()["llm"]
    return stats


# -- (a) admission's future utility -------------------------------------------------------


def test_entry_add_asks_the_llm_for_future_utility(g: Grimoire) -> None:
    result = g.entry_add(category="warning", content="Avoid swaps above 80 gwei.")
    assert result["factors"]["future_utility"] == pytest.approx(0.9)
    assert any("from the LLM path" in r for r in result["reasons"])
    assert len(prompts("useful for future decisions")) == 1
    stats = llm_stats(g)
    assert stats["requests"] == 1 and stats["prompt_tokens"] == 40
    assert stats["completion_tokens"] == 8 and stats["mean_latency_ms"] >= 0
    assert stats["paths"]["utility"] == {"calls": 1, "fallbacks": 0}


@pytest.mark.parametrize("mode", ["garbage", "down"])
def test_a_bad_llm_leaves_the_rule_based_utility(g: Grimoire, mode: str) -> None:
    Stub.mode = mode
    result = g.entry_add(category="warning", content="Avoid swaps above 80 gwei.")
    assert result["decision"] == "admitted"
    assert result["factors"]["future_utility"] != pytest.approx(0.9)
    assert not any("LLM" in r for r in result["reasons"])
    stats = llm_stats(g)
    assert stats["paths"]["utility"] == {"calls": 1, "fallbacks": 1}
    assert stats["failures"] == (1 if mode == "down" else 0)


# -- (c) ExpeL prompt distillation --------------------------------------------------------


def test_llm_claims_are_checked_against_the_data(g: Grimoire) -> None:
    """Numbers come from the episodes; a false or malformed proposal is dropped."""
    write(g, gas_observations(11))
    episodes = g.context.episodes.recent(10_000)
    cfg = DistillerConfig()
    proposals = [GAS_CLAIM,
                 {"condition": {"hour_window": [10, 12]}, "target": "metric:gas_gwei",
                  "direction": "higher"},  # not in the data
                 {"condition": {"moon_phase": "full"}, "target": "metric:gas_gwei",
                  "direction": "lower"},  # not in the vocabulary
                 {"condition": {"hour_window": [2, 4]}, "target": "metric:gas_gwei"},
                 "swap less", None]
    kept, dropped = verify_proposals(proposals, episodes, cfg, strategy=None)
    assert dropped == 5 and len(kept) == 1
    (checked,) = kept
    claim = checked.claim
    assert claim.condition == {"hour_window": [2, 4]} and claim.direction == "lower"
    assert 4.0 < claim.effect < 8.0 and 18.0 < claim.baseline < 24.0  # the data's numbers
    assert claim.support == int(checked.rows.sum()) and claim.p_value < 1e-6
    assert checked.evidence["source"] == "llm_expel"


def test_a_rate_proposal_stated_downwards_is_the_other_rate_upwards() -> None:
    rng = np.random.default_rng(5)

    def ep(i: int) -> Episode:
        calm = i % 2 == 1
        negative = rng.random() < (0.2 if calm else 0.8)
        return Episode(id=f"e{i}", text="swap", type=EpisodeType.ACTION,
                       timestamp=T0 + i * 60_000, actions=("swap",), strategy="s",
                       outcome=Outcome.NEGATIVE if negative else Outcome.POSITIVE,
                       regime=Regime.SIDEWAYS if calm else Regime.HIGH_VOL)

    eps = [ep(i) for i in range(200)]
    proposal = {"condition": {"action": "swap", "regime": "sideways"},
                "target": "outcome:negative_rate", "direction": "lower"}
    kept, dropped = verify_proposals([proposal], eps, DistillerConfig(), strategy="s")
    (checked,) = kept
    assert dropped == 0 and checked.claim.strategy == "s"
    assert checked.claim.target == "outcome:positive_rate" and checked.claim.direction == "higher"
    calm = [e for e in eps if e.regime is Regime.SIDEWAYS]
    assert checked.claim.effect == pytest.approx(
        sum(e.outcome is Outcome.POSITIVE for e in calm) / len(calm))


def test_expel_adds_verified_claims_to_the_rule_based_ones(g: Grimoire) -> None:
    Stub.claims = [GAS_CLAIM,  # the extractor finds it too: one operation, not two
                   {"condition": {"hour_window": [2, 4], "regime": "sideways"},
                    "target": "metric:gas_gwei", "direction": "lower"},
                   {"condition": {"regime": "sideways"}, "target": "metric:gas_gwei",
                    "direction": "higher"}]  # every episode is sideways: nothing to compare
    write(g, gas_observations(12))
    summary = distill(g.context, None, NOW)
    assert len(prompts("Propose at most")) == 1
    assert "Metric means" in prompts("Propose at most")[0]
    assert summary["llm_claims"] == 1 and summary["llm_dropped_claims"] == 1
    assert summary["ops"]["ADD"] == 2
    log = g.context.semantic.list_admissions(limit=None)
    assert any("when the regime is sideways" in r.candidate for r in log)
    assert llm_stats(g)["paths"]["expel"] == {"calls": 1, "fallbacks": 0}
    for _ in range(9):  # llm.expel_every = 10: the next prompt is on the 11th run
        distill(g.context, None, NOW)
    assert len(prompts("Propose at most")) == 1
    distill(g.context, None, NOW)
    assert len(prompts("Propose at most")) == 2


@pytest.mark.parametrize("mode", ["garbage", "down"])
def test_a_bad_expel_answer_leaves_the_rule_based_operations(g: Grimoire, mode: str) -> None:
    Stub.mode = mode
    write(g, gas_observations(13))
    summary = distill(g.context, None, NOW)
    assert summary["admitted"] >= 1 and summary["llm_claims"] == 0
    assert llm_stats(g)["paths"]["expel"]["fallbacks"] == 1


# -- (d) causality judgement --------------------------------------------------------------


def test_a_link_the_llm_judges_causal_carries_its_relationship(g: Grimoire) -> None:
    write(g, alert_stream(14))
    summary = distill(g.context, None, NOW)
    (judgement,) = prompts("directly lead")
    assert "Clade alert: whale moved WETH" in judgement and "Regime shift" in judgement
    assert summary["llm_rejected_links"] == 0 and summary["edges"] >= 1
    edges = g.context.semantic.list_edges(kinds=["discovered"])
    assert {e.relationship for e in edges} == {
        "the whale's transfer moved the market into high volatility."}


def test_a_link_the_llm_judges_not_causal_is_dropped(g: Grimoire) -> None:
    Stub.causal = "No."
    write(g, alert_stream(15))
    summary = distill(g.context, None, NOW)
    assert summary["llm_rejected_links"] == 1 and summary["edges"] == 0
    assert not [e for e in entries(g) if e.category is Category.CAUSAL_LINK]
    distill(g.context, None, NOW)
    assert len(prompts("directly lead")) == 1  # the verdict is remembered


def test_an_unreadable_judgement_keeps_the_statistical_link(g: Grimoire) -> None:
    Stub.causal = "Perhaps, it is hard to say."
    write(g, alert_stream(16))
    summary = distill(g.context, None, NOW)
    assert summary["llm_rejected_links"] == 0
    assert [e for e in entries(g) if e.category is Category.CAUSAL_LINK]
    assert llm_stats(g)["paths"]["causality"]["fallbacks"] == 1


# -- (b) Reflexion steps 3-5 --------------------------------------------------------------


def breach() -> dict[str, Any]:
    return {"type": "action", "text": "swap 2 ETH", "strategy": "dca", "actions": ["swap"],
            "outcome": "negative", "gain": -1.0, "timestamp": NOW - 60_000,
            "metrics": {"gas_gwei": 900.0, "return_bps": -2.0},
            "prediction": {"expected_return_bps": 10.0, "expected_gas_gwei": 30.0}}


def test_reflexion_insights_enter_through_the_gate(g: Grimoire) -> None:
    (action_id,) = g.episode_write_batch([breach()])["ids"]
    paths = paths_of(g.context)
    assert paths is not None and paths.worker.drain(10.0)
    assert len(prompts("Verification record")) == 3  # comparison, counterfactual, insight
    assert g.context.episodes.recent(10, types=["safety_incident"])  # deterministic part
    (insight,) = [e for e in entries(g) if "reflexion" in e.tags]
    assert insight.content.startswith("When gas exceeds 300 gwei")
    assert insight.parent_episode_ids == (action_id,) and insight.strategy == "dca"
    assert insight.confidence in (pytest.approx(0.5), pytest.approx(0.3))
    assert llm_stats(g)["paths"]["reflexion"] == {"calls": 3, "fallbacks": 0}


def test_reflexion_without_a_usable_llm_keeps_the_deterministic_record(g: Grimoire) -> None:
    Stub.mode = "down"
    g.episode_write_batch([breach()])
    paths = paths_of(g.context)
    assert paths is not None and paths.worker.drain(10.0)
    assert g.context.episodes.recent(10, types=["safety_incident"])
    assert [e for e in entries(g) if "reflexion" in e.tags] == []
    assert llm_stats(g)["paths"]["reflexion"]["fallbacks"] == 1


def test_as_predicted_actions_do_not_reach_the_llm(g: Grimoire) -> None:
    g.episode_write_batch([{"type": "action", "text": "swap", "outcome": "positive",
                            "metrics": {"return_bps": 10.0},
                            "prediction": {"expected_return_bps": 10.0}}])
    paths = paths_of(g.context)
    assert paths is not None and paths.worker.drain(10.0)
    assert prompts("Verification record") == []


# -- no LLM: no network -------------------------------------------------------------------


class NetworkGuard:
    def __init__(self) -> None:
        self.attempts: list[Any] = []


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> NetworkGuard:
    """Fail any socket connect that is not a Unix socket (and record the attempt)."""
    guard = NetworkGuard()
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX:
            guard.attempts.append(address)
            raise ConnectionRefusedError(f"network access in a test: {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family != socket.AF_UNIX:
            guard.attempts.append(address)
            raise ConnectionRefusedError(f"network access in a test: {address!r}")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return guard


def test_the_guard_catches_a_connection(no_network: NetworkGuard) -> None:
    from grimoire.errors import LLMError

    client = ChatClient("http://127.0.0.1:9/v1", "m", retries=0, timeout_s=1.0)
    with pytest.raises(LLMError):
        client.complete([{"role": "user", "content": "hi"}])
    assert no_network.attempts


def test_without_an_llm_a_full_learning_run_touches_no_network(
        tmp_path: Path, hash_embedder: HashEmbedder, no_network: NetworkGuard) -> None:
    clock = FrozenClock(T0)
    with open_grimoire(tmp_path, clock, hash_embedder,
                       changes={"distiller.every_episodes": 20}) as g:
        summaries = run_sim(g, clock, "default", 3, 200)
        runs = [d for s in summaries for d in s.get("distilled", [])]
        g.episode_write_batch([breach()])
        g.entry_add(category="warning", content="Avoid swaps above 80 gwei.")
        status = g.status()
    assert len(runs) >= 5 and status["llm"] == {"configured": False}
    assert status["health"]["reflexion"]["incidents"] >= 1
    assert no_network.attempts == []
