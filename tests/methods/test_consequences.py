"""``causal.consequences``: the forward walk beside the backward chain (seed 004: "traversing
forward to identify predicted consequences ... limited to 3 hops (default)"), as a method,
a CLI command, on real stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import NotFoundError, ValidationError

MINUTE = 60_000


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    config = Config().replace(**{"embedding.model": "hash-384", "retrieval.auto_link_types": []})
    with Grimoire.open(tmp_path / "data", config=config, clock=clock) as grimoire:
        yield grimoire


def _story(g: Grimoire, clock: FrozenClock) -> list[str]:
    """drought → rationing → black market → riots → curfew, linked explicitly."""
    ids: list[str] = []
    for text in ["drought hits the grain belt", "grain rationing ordered",
                 "black market for grain grows", "food riots in the capital",
                 "curfew declared in the capital"]:
        ids.append(g.episode_write(text=text)["id"])
        if len(ids) > 1:
            g.causal_link(cause_id=ids[-2], effect_id=ids[-1],
                          relationship=f"step {len(ids) - 1}", weight=0.9)
        clock.advance(MINUTE)
    return ids


def test_consequences_walk_forward_three_edges_by_default(g: Grimoire,
                                                          clock: FrozenClock) -> None:
    ids = _story(g, clock)
    out = g.causal_consequences(id=ids[0])
    assert [c["id"] for c in out["consequences"]] == ids[1:4]  # depth 3: not the curfew
    assert [c["depth"] for c in out["consequences"]] == [1, 2, 3]
    assert out["consequences"][2]["weight"] == pytest.approx(0.9 ** 3)
    assert out["consequences"][0]["relationship"] == "step 1"
    assert out["start"]["id"] == ids[0]
    assert "grain rationing ordered" in out["narrative"]
    deeper = g.causal_consequences(id=ids[0], depth=4)
    assert [c["id"] for c in deeper["consequences"]] == ids[1:]
    # the backward chain and the forward walk meet: riots' causes, drought's effects
    assert [s["id"] for s in g.causal_chain(id=ids[3])["chain"]] == ids[:4]


def test_the_newest_event_has_no_recorded_consequence(g: Grimoire, clock: FrozenClock) -> None:
    ids = _story(g, clock)
    out = g.causal_consequences(id=ids[-1])
    assert out["consequences"] == []
    assert "no recorded consequence" in out["narrative"]


def test_a_query_starts_from_the_most_similar_event(g: Grimoire, clock: FrozenClock) -> None:
    ids = _story(g, clock)
    out = g.causal_consequences(query="drought hits the grain belt", depth=1)
    assert out["start"]["id"] == ids[0] and out["similarity"] > 0.9
    assert [c["id"] for c in out["consequences"]] == [ids[1]]


def test_bad_input_is_a_clear_error(g: Grimoire, clock: FrozenClock) -> None:
    ids = _story(g, clock)
    with pytest.raises(ValidationError, match="exactly one"):
        g.causal_consequences(id=ids[0], query="x")
    with pytest.raises(ValidationError, match=r"\[1, 8\]"):
        g.causal_consequences(id=ids[0], depth=0)
    with pytest.raises(ValidationError, match="unknown"):
        g.causal_consequences(id=ids[0], direction="back")
    with pytest.raises(NotFoundError):
        g.causal_consequences(id="01a00000-0000-7000-8000-000000000000")


def test_the_cli_prints_the_consequences(tmp_path: Path, clock: FrozenClock,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from grimoire.cli.app import main

    config = Config().replace(**{"embedding.model": "hash-384", "retrieval.auto_link_types": []})
    with Grimoire.open(tmp_path / "data", config=config, clock=clock) as g:
        ids = _story(g, clock)
    monkeypatch.setenv("GRIMOIRE_EMBEDDING__MODEL", "hash-384")
    assert main(["consequences", "--data", str(tmp_path / "data"), ids[1]]) == 0
    text = capsys.readouterr().out
    assert "black market for grain grows" in text and "[depth 1, weight 0.90]" in text
    assert "curfew" in text  # rationing → market → riots → curfew: three edges
    assert main(["consequences", "--data", str(tmp_path / "data"), "--json", "--depth", "1",
                 ids[1]]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in answer["consequences"]] == [ids[2]]
