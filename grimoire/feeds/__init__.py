"""Tick feeds: where the daemon's per-tick episodes come from.

``make_feed("sim" | "jsonl:PATH" | "none", ...)`` builds one; ``SimFeed`` is
the built-in market simulator driven by a scenario YAML (``load_scenario``);
``JsonlFeed`` tails a file of episode params; ``NoneFeed`` yields nothing.
Importing this package has no side effects.
"""

from grimoire.feeds.base import Feed, NoneFeed, make_feed
from grimoire.feeds.jsonl import JsonlFeed
from grimoire.feeds.sim.feed import SimFeed
from grimoire.feeds.sim.scenario import Scenario, load_scenario, parse_scenario, shipped_scenarios

__all__ = [
    "Feed",
    "JsonlFeed",
    "NoneFeed",
    "Scenario",
    "SimFeed",
    "load_scenario",
    "make_feed",
    "parse_scenario",
    "shipped_scenarios",
]
