"""The curator learns within a scope: one scope's rules never reach another's PLAYBOOK.md,
and the daemon ticks (and so curates) every open scope."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire.clock import FrozenClock
from grimoire.feeds import make_feed
from grimoire.grimoire import Grimoire
from grimoire.scopes.registry import registry
from grimoire.service.daemon import Daemon
from tests.curator.test_curator_support import hour, open_grimoire, swap
from tests.service.test_heartbeat import FakeMonotonic


@pytest.fixture
def cg(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_grimoire(tmp_path / "data", clock) as opened:
        yield opened


def _swaps(losing_regime: str, seed: int) -> list[dict[str, Any]]:
    """60 eth-dca swaps, half in each regime: those in ``losing_regime`` lose 9 times in
    10, the others 2 in 10 (seeded)."""
    rng = random.Random(seed)
    out = []
    for i in range(60):
        regime = "high_vol" if i % 2 else "sideways"
        draw = rng.random()
        lose = draw < 0.9 if regime == losing_regime else draw >= 0.8
        out.append(swap(hour(i * 0.5), "negative" if lose else "positive", regime=regime))
    return out


def _rule_lines(markdown: str) -> list[str]:
    """PLAYBOOK.md's rule lines (``- `id` · conf …``), without the header's examples."""
    return [x.split(" · ", 1)[1] for x in markdown.splitlines()
            if x.startswith("- `") and " · conf " in x]


def test_a_rule_learned_in_one_scope_reaches_only_that_scopes_playbook(
        cg: Grimoire, clock: FrozenClock) -> None:
    cg.episode_write_batch(_swaps("high_vol", 1), scope="alpha")
    cg.episode_write_batch(_swaps("sideways", 2), scope="beta")
    clock.set(hour(31))
    for scope in ("alpha", "beta", "default"):
        cg.curator_run(scope=scope)
    alpha = _rule_lines(cg.playbook_get(scope="alpha")["markdown"])
    learned = [x for x in alpha if "Avoid swap when the strategy is eth-dca and the market "
               "regime is high_vol" in x]
    assert learned, alpha  # alpha learned its warning from its own episodes
    for other in ("beta", "default"):
        lines = _rule_lines(cg.playbook_get(scope=other)["markdown"])
        assert not any("regime is high_vol because negative" in x for x in lines), lines
    assert _rule_lines(cg.playbook_get()["markdown"]) == []  # default: no episodes, no rule
    # each scope's PLAYBOOK.md is its own file, in its own directory
    root = cg.context.data_dir
    on_disk = (root / "scopes" / "alpha" / "PLAYBOOK.md").read_text(encoding="utf-8")
    assert _rule_lines(on_disk) == alpha
    assert _rule_lines((root / "PLAYBOOK.md").read_text(encoding="utf-8")) == []
    # and each scope's entries are its own
    alpha_ids = {e["id"] for e in cg.entry_list(scope="alpha")["entries"]}
    beta_ids = {e["id"] for e in cg.entry_list(scope="beta")["entries"]}
    assert alpha_ids and beta_ids and not alpha_ids & beta_ids
    assert not any("high_vol because negative" in e["content"]
                   for e in cg.entry_list(scope="beta", status=None)["entries"])


def test_the_daemon_ticks_and_curates_every_open_scope(cg: Grimoire) -> None:
    config = cg.context.config.replace(**{"daemon.tick_seconds": 1, "curator.every_ticks": 1})
    cg.context.config = config  # the heartbeat reads the schedule from the context
    mono = FakeMonotonic()
    daemon = Daemon(cg, make_feed("none"), config, monotonic=mono)
    alpha = registry(cg).get("alpha")  # opened after the daemon started, as a request would
    alpha.episode_write_batch(_swaps("high_vol", 3))
    mono.now = 1001.0
    summary = daemon.step()
    assert summary is not None
    assert summary["scopes"]["alpha"]["tick"] == 1
    assert summary["scopes"]["alpha"]["curator"] == {"started": "in the background"}
    alpha.context.extras["curator.running"].result(timeout=120)
    assert (cg.context.data_dir / "scopes" / "alpha" / "PLAYBOOK.md").exists()
    assert alpha.context.semantic.get_meta("tick", 0) == 1
