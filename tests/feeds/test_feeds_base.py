"""make_feed's spec grammar, the empty feed, the Feed protocol and the public surface."""

from __future__ import annotations

from pathlib import Path

import pytest

import grimoire.feeds as feeds
from grimoire.config import load_config
from grimoire.errors import ConfigError
from grimoire.feeds import Feed, JsonlFeed, NoneFeed, SimFeed, make_feed

NOW = 1_767_225_600_000


def test_public_surface() -> None:
    assert set(feeds.__all__) == {"Feed", "JsonlFeed", "NoneFeed", "Scenario", "SimFeed",
                                  "load_scenario", "make_feed", "parse_scenario",
                                  "shipped_scenarios"}


def test_specs(tmp_path: Path) -> None:
    sim = make_feed("sim", scenario="null", seed=3)
    assert isinstance(sim, SimFeed) and sim.scenario.name == "null" and sim.seed == 3
    none = make_feed("none")
    assert isinstance(none, NoneFeed) and none.poll(0, NOW) == [] and none.tick_seconds_hint is None
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": "b"}\n')
    tail = make_feed(f"jsonl:{path}", offset=14)
    assert isinstance(tail, JsonlFeed) and tail.path == path
    assert [e["text"] for e in tail.poll(0, NOW)] == ["b"]
    for feed in (sim, none, tail):
        assert isinstance(feed, Feed)
        feed.close()


def test_config_default_is_no_feed_and_sim_is_the_default_scenario() -> None:
    """Real memory stays real (issue 13): the simulator only runs when asked for."""
    daemon = load_config().daemon
    assert isinstance(make_feed(daemon.feed, scenario=daemon.scenario, seed=daemon.seed),
                      NoneFeed)
    feed = make_feed("sim", scenario=daemon.scenario, seed=daemon.seed)
    assert isinstance(feed, SimFeed) and feed.scenario.name == "default"


@pytest.mark.parametrize("spec", ["", "simulator", "sim:default", "jsonl", "jsonl:", "jsonl:  ",
                                  "none:x", "kafka:topic"])
def test_bad_specs_name_the_key(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"daemon\.feed"):
        make_feed(spec)


def test_bad_seed_and_scenario() -> None:
    with pytest.raises(ConfigError, match=r"daemon\.seed"):
        make_feed("sim", seed=-1)
    with pytest.raises(ConfigError, match=r"daemon\.scenario"):
        make_feed("sim", scenario="no-such-scenario")
