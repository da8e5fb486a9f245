"""Estimated, not true, regimes: the simulator's label noise (scenario regimes.label_noise)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from grimoire.errors import ConfigError
from grimoire.feeds import SimFeed, load_scenario
from grimoire.feeds.sim.scenario import SCENARIO_DIR, Scenario, parse_scenario, shipped_scenarios

TICK_MS = 180_000
T0 = 1_767_225_600_000


def _labels(scenario: Scenario, ticks: int, seed: int = 7) -> list[tuple[str, str, dict]]:
    """(true regime, label, episode) for every episode but regime shifts."""
    feed = SimFeed(scenario, seed)
    out = []
    for tick in range(1, ticks + 1):
        for ep in feed.poll(tick, T0 + tick * TICK_MS):
            if ep["type"] != "regime_shift":
                out.append((feed.regime.value, ep["regime"], ep))
    return out


def test_shipped_scenarios_label_regimes_with_noise() -> None:
    for name in shipped_scenarios():
        assert load_scenario(name).label_noise == pytest.approx(0.15), name


def test_about_p_of_the_ticks_carry_another_regime() -> None:
    scenario = load_scenario("default")
    rows = _labels(scenario, 6000)
    # One estimate per tick, shared by the tick's episodes: count ticks, not episodes.
    per_tick = {ep["tick_id"]: (true, label) for true, label, ep in rows}
    wrong = [label for true, label in per_tick.values() if label != true]
    assert abs(len(wrong) / len(per_tick) - 0.15) < 0.02
    assert set(wrong) <= {r.value for r in scenario.regimes}
    for true, label, ep in rows:
        tick_true, tick_label = per_tick[ep["tick_id"]]
        assert (true, label) == (tick_true, tick_label)
        assert f"regime {label}" in ep["text"] or ep["type"] != "observation"


def test_without_noise_every_label_is_true_and_noise_changes_nothing_else() -> None:
    noisy = load_scenario("default")
    clean = dataclasses.replace(noisy, label_noise=0.0)
    a, b = _labels(clean, 1500), _labels(noisy, 1500)
    assert all(true == label for true, label, _ in a)
    assert any(true != label for true, label, _ in b)
    strip = [{k: v for k, v in ep.items() if k not in ("regime", "text")} for _, _, ep in a]
    assert strip == [{k: v for k, v in ep.items() if k not in ("regime", "text")}
                     for _, _, ep in b]


def test_a_bad_label_noise_is_a_config_error_naming_the_key() -> None:
    raw = yaml.safe_load((SCENARIO_DIR / "default.yaml").read_text(encoding="utf-8"))
    raw["regimes"]["label_noise"] = 1.5
    with pytest.raises(ConfigError, match=r"regimes\.label_noise"):
        parse_scenario(raw, source="test.yaml")
    raw["regimes"]["label_noise"] = 0.2
    raw["regimes"]["params"] = {"sideways": raw["regimes"]["params"]["sideways"]}
    raw["regimes"]["initial"] = "sideways"
    raw["regimes"].pop("transitions")
    raw["regularities"] = []
    with pytest.raises(ConfigError, match=r"regimes\.label_noise.*two regimes"):
        parse_scenario(raw, source="test.yaml")
