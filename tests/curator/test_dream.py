"""Dreams (SPEC §13): idle replay of older episodes against the rules held now, on a real
store: replay validation, counterfactual checks, seed 004's multipliers, bounded slots."""

from __future__ import annotations

import dataclasses
from typing import Any

from curator.api import dream
from curator.cycle.dream import counterfactual
from curator.cycle.run import cycle_lock
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import DecayConfig
from grimoire.gate.decay import half_life_ms
from grimoire.records import Category
from tests.curator.test_curator_support import SWAP_CLAIM, episode, get, hour, put, write

RULE = "Avoid swap on eth-dca in high_vol: 80% of them lose (vs 35% otherwise)"


def _action(at: int, tool: str, outcome: str, regime: str = "high_vol") -> dict[str, Any]:
    return episode(f"{tool} in {regime}: {outcome}", at=at, type="action", tool=tool,
                   actions=[tool], regime=regime, strategy="eth-dca", outcome=outcome)


def _history(g: Grimoire, *, swap_loses: bool, day: int = 0) -> list[str]:
    """A day of actions in high_vol: swaps (losing or not) and other actions (mostly fine)."""
    swaps = [_action(hour(1 + i / 4, day), "swap",
                     "negative" if (i % 5 != 0) == swap_loses else "positive")
             for i in range(20)]
    others = [_action(hour(8 + i / 4, day), "rebalance", "negative" if i % 5 == 0
                      else "positive") for i in range(20)]
    return write(g, swaps + others)


def _warning(g: Grimoire, parents: list[str], **fields: Any) -> str:
    return put(g, category=Category.WARNING, content=RULE, claim=SWAP_CLAIM, strategy="eth-dca",
               parent_episode_ids=tuple(parents), confidence=0.55, **fields).id


def test_a_rule_replayed_on_older_episodes_is_dream_validated(g: Grimoire,
                                                              clock: FrozenClock) -> None:
    _history(g, swap_loses=True, day=0)  # older: the rule was not found on these
    found_on = _history(g, swap_loses=True, day=2)
    clock.set(hour(12, day=2))
    rule = _warning(g, found_on)
    before = get(g, rule)
    slot = dream(g.context)
    assert slot["rules"] == 1 and slot["validated"] == 1 and slot["episodes"] == 40
    after = get(g, rule)
    assert after.dream_validated and after.strength == before.strength + 0.5
    # seed 004's class D: the half-life doubles; confidence and ✓ / ✗ count live evidence only
    cfg = DecayConfig()
    assert half_life_ms(after, cfg) == 2 * half_life_ms(before, cfg)  # type: ignore[operator]
    assert (after.confidence, after.validated_count, after.contradicted_count) == (
        before.confidence, before.validated_count, before.contradicted_count)
    history = g.entry_explain(rule)
    assert "dream: validated on older episodes" in str(history)
    # The history before it is used up: the next slot has nothing older to replay.
    again = dream(g.context)
    assert again["exhausted"] == 1 and get(g, rule).strength == after.strength
    g.curator_run()  # PLAYBOOK.md tells the owner
    line = next(x for x in g.playbook_get()["markdown"].splitlines()
                if f"`{rule[-6:]}" in x or "Avoid swap" in x)
    assert "dream-validated" in line


def test_a_counterfactual_that_does_not_hold_clears_the_dream_mark(
        g: Grimoire, clock: FrozenClock) -> None:
    _history(g, swap_loses=False, day=0)  # back then swaps did fine, other actions too
    found_on = _history(g, swap_loses=True, day=2)
    clock.set(hour(12, day=2))
    rule = _warning(g, found_on, dream_validated=True)
    slot = dream(g.context)
    assert slot["contradicted"] == 1
    assert not get(g, rule).dream_validated


def test_the_counterfactual_compares_with_and_without_the_action(g: Grimoire) -> None:
    from curator.claims import EpisodeWindow

    ids = _history(g, swap_loses=True)
    window = EpisodeWindow.of([e for e in (g.context.episodes.get(i) for i in ids) if e])
    right, figures = counterfactual(window, SWAP_CLAIM, 3, 0.05)
    assert right is True and figures == {"with": [16, 20], "without": [4, 20]}
    # a metric claim names no action: no counterfactual
    metric = dataclasses.replace(SWAP_CLAIM, target="metric:gas_gwei", condition={
        "regime": "high_vol"})
    assert counterfactual(window, metric, 3, 0.05) == (None, {})


def test_bounded_slots_take_turns_and_never_run_beside_a_cycle(
        tmp_path: Any, clock: FrozenClock) -> None:
    from tests.curator.test_curator_support import open_grimoire

    with open_grimoire(tmp_path / "d", clock, **{"dreams.rules_per_slot": 2}) as g:
        _history(g, swap_loses=True, day=0)
        found_on = _history(g, swap_loses=True, day=2)
        clock.set(hour(12, day=2))
        rules = [put(g, category=Category.WARNING, content=f"{RULE} ({n})", claim=SWAP_CLAIM,
                     strategy="eth-dca", parent_episode_ids=tuple(found_on)).id
                 for n in range(3)]
        first = dream(g.context)
        assert first["rules"] == 2
        second = dream(g.context)  # the one left out first, then the least recently dreamt
        assert second["rules"] == 2
        assert all(get(g, r).dream_validated for r in rules)
        lock = cycle_lock(g.context)
        with lock:
            assert "skipped" in dream(g.context)


def test_dreams_are_off_by_default_and_wired_when_enabled(tmp_path: Any,
                                                          clock: FrozenClock) -> None:
    from tests.curator.test_curator_support import open_grimoire

    with open_grimoire(tmp_path / "off", clock) as g:
        assert g.context.dream_hook is None
    with open_grimoire(tmp_path / "on", clock, **{"dreams.enabled": True}) as g:
        assert g.context.dream_hook is dream


def test_the_daemon_dreams_while_its_heartbeat_is_idle() -> None:
    import subprocess
    import sys

    from tests.service.daemon_support import REPO, daemon_env, short_dir

    with short_dir("dr") as root:
        env = daemon_env(GRIMOIRE_DREAMS__ENABLED="true")
        p = subprocess.run(
            [sys.executable, "-m", "grimoire", "run", "--data", str(root / "d"),
             "--tick-seconds", "0.2", "--max-ticks", "5", "--log-level", "debug", "--json"],
            env=env, cwd=str(REPO), capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert '"dream.slot"' in p.stdout + p.stderr
