"""Reflexion as a post-write hook: safety incidents written once, deviations recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from tests.learn.learn_support import T0, open_grimoire


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[Grimoire]:
    grimoire = open_grimoire(tmp_path, FrozenClock(T0), hash_embedder)
    yield grimoire
    grimoire.close()


def action(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "type": "action", "text": "swap 2 ETH on WETH/USDC", "strategy": "dca",
        "actions": ["swap"], "token_pair": "WETH/USDC", "outcome": "positive", "gain": 3.0,
        "timestamp": T0 - 60_000,
        "metrics": {"return_bps": 14.0, "slippage_bps": 8.0, "gas_gwei": 20.0},
        "prediction": {"expected_return_bps": 15.0}}
    params.update(overrides)
    return params


def incidents(g: Grimoire) -> list[Any]:
    return g.context.episodes.recent(100, types=["safety_incident"])


def test_a_broken_invariant_writes_one_safety_incident(g: Grimoire) -> None:
    with capture_logs() as logs:
        ids = g.episode_write_batch([action(metrics={"return_bps": 14.0, "slippage_bps": 250.0})]
                                    )["ids"]
    (incident,) = incidents(g)
    assert incident.causal_hint == ids[0] and incident.importance.value == "critical"
    assert incident.strategy == "dca" and incident.metrics == {"observed": 250.0, "limit": 100.0}
    assert "max_slippage_bps" in incident.text
    assert g.context.episodes.count() == 2  # the incident itself is not reflected on again
    result = [e for e in logs if e["event"] == "reflexion.result"]
    assert result[0]["verdict"] == "invariant_broken" and result[0]["incidents"] == 1
    assert g.context.since_distill["dca"] == 2  # the incident counts for its strategy too
    health = g.status()["health"]["reflexion"]
    assert health["incidents"] == 1 and health["verdicts"] == {"invariant_broken": 1}


def test_deviations_are_recorded_for_every_action(g: Grimoire) -> None:
    with capture_logs() as logs:
        g.episode_write_batch([action(), action(metrics={"return_bps": -250.0},
                                               outcome="negative", gain=-30.0),
                               {"type": "observation", "text": "gas 20 gwei"}])
    results = [e for e in logs if e["event"] == "reflexion.result"]
    assert [r["verdict"] for r in results] == ["as_predicted", "worse_than_predicted"]
    assert results[0]["deviations"] == {"return_bps": pytest.approx(-1.0)}
    assert results[1]["deviations"] == {"return_bps": pytest.approx(-265.0)}
    assert results[0]["log_level"] == "debug" and results[1]["log_level"] == "info"
    assert incidents(g) == []


def test_several_breaches_in_one_batch(g: Grimoire) -> None:
    g.episode_write_batch([action(metrics={"gas_gwei": 900.0, "return_bps": 1.0}),
                           action(metrics={"return_bps": -800.0}, outcome="negative",
                                  gain=-80.0)])
    names = sorted(e.text.split("invariant ")[1].split(" ")[0] for e in incidents(g))
    assert names == ["max_gas_gwei", "max_loss_bps"]  # a 15 bps promise is within tolerance
