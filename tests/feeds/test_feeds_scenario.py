"""Scenario loading and validation: shipped names, custom paths, clear errors naming the key."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from grimoire.errors import ConfigError
from grimoire.feeds import SimFeed, load_scenario, make_feed, parse_scenario, shipped_scenarios
from grimoire.feeds.sim.scenario import SCENARIO_DIR
from grimoire.records import Regime, episode_from_params


def raw_default() -> dict[str, Any]:
    loaded = yaml.safe_load((SCENARIO_DIR / "default.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_shipped_scenarios_load() -> None:
    for name in shipped_scenarios():
        sc = load_scenario(name)
        assert sc.name == name
        assert sc.tick_seconds_hint > 0
        assert sc.label_noise == 0.15  # estimated, not true, regimes (issue 11)
        for row in sc.transitions:
            assert abs(sum(row) - 1) < 1e-9
    default = load_scenario(None)
    assert default.name == "default"
    assert [w.name for w in default.hour_windows] == ["cheap_gas_02_04_utc"]
    assert default.hour_windows[0].hours == (2, 4)
    assert default.outcome_rules[0].regime is Regime.HIGH_VOL
    assert default.lead_lags[0].follow_regime is Regime.HIGH_VOL
    assert {"slippage_evening", "pair_hour", "lp_lowvol", "size_threshold", "reversal_pair",
            "interaction", "many_pairs", "unlabelled"} <= set(shipped_scenarios())
    assert load_scenario("size_threshold").outcome_rules[0].size_usd == (6200.0, float("inf"))
    assert load_scenario("unlabelled").unlabelled_actions == 1.0
    null = load_scenario("null")
    assert not (null.hour_windows or null.outcome_rules or null.lead_lags)
    assert len({p for p in null.regime_params.values()}) == 1  # regimes are mere labels


def test_reversal_differs_from_default_only_in_reversals() -> None:
    """reversal.yaml is default.yaml plus reverse_at_tick and a horizon with room after the
    reversal (kept in step by this test)."""
    default = raw_default()
    reversal = yaml.safe_load((SCENARIO_DIR / "reversal.yaml").read_text(encoding="utf-8"))
    assert reversal.pop("horizon_ticks") == 2 * 1500
    for doc in (default, reversal):
        doc.pop("name"), doc.pop("description")
        for reg in doc["regularities"]:
            for key in ("reverse_at_tick", "reversed_mean", "reversed_negative_rate",
                        "reversed_probability"):
                reg.pop(key, None)
    assert default == reversal
    rev = load_scenario("reversal")
    assert rev.hour_windows[0].reverse_at_tick == 1500
    assert rev.outcome_rules[0].reverse_at_tick == 1500
    assert rev.lead_lags[0].reverse_at_tick is None
    assert rev.horizon_ticks == 3000 and load_scenario("default").horizon_ticks is None


def test_horizon_ticks_must_be_a_positive_integer(tmp_path: Path) -> None:
    raw = raw_default()
    for bad in (0, -5, 2.5, "long", True):
        raw["horizon_ticks"] = bad
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        with pytest.raises(ConfigError, match="horizon_ticks"):
            load_scenario(str(path))


def test_custom_path_works(tmp_path: Path) -> None:
    raw = raw_default()
    raw["name"] = "mine"
    raw["regularities"][0]["hours"] = [22, 1]  # wraps midnight
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    sc = load_scenario(str(path))
    assert sc.name == "mine" and sc.hour_windows[0].hours == (22, 1)
    feed = make_feed("sim", scenario=path, seed=1)
    eps = feed.poll(0, 1_767_225_600_000)
    assert eps[0]["ref"] == "sim:mine:t0:obs"
    for e in eps:
        episode_from_params(e, id="x", now_ms=0)


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError,
                       match=r"daemon.scenario: cannot read .*default, interaction, lp_lowvol"):
        load_scenario(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(str(bad))
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\(top level\): expected a mapping"):
        load_scenario(str(empty))


Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        node: Any = raw
        parts = path.split("/")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _delete(path: str) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        node: Any = raw
        parts = path.split("/")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[parts[-1]]
    return mutate


def _rename_regime(raw: dict[str, Any]) -> None:
    raw["regimes"]["params"]["bul"] = raw["regimes"]["params"].pop("bull")


def _duplicate_regularity(raw: dict[str, Any]) -> None:
    raw["regularities"].append(copy.deepcopy(raw["regularities"][0]))


def _drop_high_vol(raw: dict[str, Any]) -> None:
    raw["regimes"]["params"].pop("high_vol")
    raw["regimes"].pop("transitions")
    raw["regularities"] = raw["regularities"][2:]


ERRORS: list[tuple[str, Mutation, str]] = [
    ("unknown top-level key", _set("tick_seconds", 60), r"tick_seconds: unknown key"),
    ("missing key", _delete("tick_seconds_hint"), r"tick_seconds_hint: is required"),
    ("zero tick", _set("tick_seconds_hint", 0), r"tick_seconds_hint: must be > 0"),
    ("unknown nested key", _set("market/gas_gwei/sd", 1), r"market\.gas_gwei\.sd: unknown key"),
    ("number as text", _set("market/volume/mean", "2.5e6"),
     r"market\.volume\.mean: expected a finite number.*2\.5e\+6"),
    ("misspelt regime", _rename_regime, r"regimes\.params\.bul: 'bul' is not a regime"),
    ("bad initial regime", _set("regimes/initial", "moon"), r"regimes\.initial: 'moon'"),
    ("transition row sum", _set("regimes/transitions/bull/bull", 0.5),
     r"regimes\.transitions\.bull: probabilities sum to"),
    ("transition to unknown regime", _set("regimes/transitions/bull/boom", 0.0),
     r"regimes\.transitions\.bull\.boom"),
    ("probability above 1", _set("strategies/eth-dca/rate", 1.5),
     r"strategies\.eth-dca\.rate: must be <= 1"),
    ("bad size range", _set("strategies/eth-dca/size_usd", [500, 100]),
     r"strategies\.eth-dca\.size_usd: low 500 is above high 100"),
    ("bad template", _set("events/1/texts/0", "at {nope}"), r"events\[1\]\.texts\[0\]: bad"),
    ("reserved event type", _set("events/0/type", "observation"), r"events\[0\]\.type"),
    ("bad importance", _set("events/0/importance", "urgent"), r"events\[0\]\.importance"),
    ("unknown kind", _set("regularities/0/kind", "hourly"), r"regularities\[0\]\.kind"),
    ("hour above 24", _set("regularities/0/hours", [25, 3]), r"regularities\[0\]\.hours"),
    ("empty window", _set("regularities/0/hours", [3, 3]), r"regularities\[0\]\.hours"),
    ("fractional hour", _set("regularities/0/hours", [2.5, 4]), r"regularities\[0\]\.hours"),
    ("unknown metric", _set("regularities/0/metric", "gas"), r"regularities\[0\]\.metric"),
    ("negative reverse tick", _set("regularities/0/reverse_at_tick", -1),
     r"regularities\[0\]\.reverse_at_tick: expected an integer >= 0"),
    ("rule regime typo", _set("regularities/1/when/regime", "highvol"),
     r"regularities\[1\]\.when\.regime: 'highvol'"),
    ("rule pair nobody trades", _set("regularities/1/when/token_pair", "WETH/USDT"),
     r"regularities\[1\]\.when\.token_pair: 'WETH/USDT' is not used by any strategy"),
    ("rule unknown condition", _set("regularities/1/when/pool", "x"),
     r"regularities\[1\]\.when\.pool: unknown key"),
    ("empty rule", _set("regularities/1/when", {}), r"regularities\[1\]\.when: needs"),
    ("size with no bound", _set("regularities/1/when/size_usd", {}),
     r"regularities\[1\]\.when\.size_usd: needs above, below or both"),
    ("size bounds crossed", _set("regularities/1/when/size_usd", {"above": 3000, "below": 1000}),
     r"regularities\[1\]\.when\.size_usd: above 3000 is not below 1000"),
    ("size nobody trades", _set("regularities/1/when/size_usd", {"above": 50_000}),
     r"regularities\[1\]\.when\.size_usd: no strategy of the rule trades sizes on both"),
    ("size unknown key", _set("regularities/1/when/size_usd", {"over": 3000}),
     r"regularities\[1\]\.when\.size_usd\.over: unknown key"),
    ("unlabelled above 1", _set("regimes/unlabelled_actions", 1.5),
     r"regimes\.unlabelled_actions: must be <= 1"),
    ("lead with observation type", _set("regularities/2/lead/type", "observation"),
     r"regularities\[2\]\.lead\.type"),
    ("follow-up with a rate", _set("regularities/2/follow",
                                   {"type": "clade_alert", "rate": 1, "texts": ["x"]}),
     r"regularities\[2\]\.follow\.rate: unknown key"),
    ("bad lag", _set("regularities/2/lag_ticks", [0, 3]),
     r"regularities\[2\]\.lag_ticks\[0\]: expected an integer >= 1"),
    ("duplicate name", _duplicate_regularity, r"regularities\[3\]\.name: duplicate"),
    ("rule on a regime the scenario lacks", _drop_high_vol, r"regularities\[0\]\.follow\.regime"),
]


@pytest.mark.parametrize(("mutate", "message"), [(m, msg) for _, m, msg in ERRORS],
                         ids=[name for name, _, _ in ERRORS])
def test_validation_error_names_the_key(mutate: Mutation, message: str) -> None:
    raw = raw_default()
    mutate(raw)
    with pytest.raises(ConfigError, match=message) as info:
        parse_scenario(raw, source="test.yaml")
    assert str(info.value).startswith("scenario test.yaml: ")


def test_follow_event_lead_lag_is_emitted() -> None:
    """A lead_lag may schedule an event instead of a regime shift."""
    raw = raw_default()
    raw["regularities"] = [{
        "name": "report_then_intent", "kind": "lead_lag",
        "lead": {"type": "replicant_report", "rate": 0.2, "texts": ["replicant says go"]},
        "follow": {"type": "coordination_intent", "importance": "notable",
                   "texts": ["peer intends to follow the replicant"]},
        "probability": 1.0, "lag_ticks": [2, 2]}]
    raw["events"] = []
    sim = SimFeed(parse_scenario(raw), seed=3)
    eps = [e for t in range(300) for e in sim.poll(t, 1_767_225_600_000 + t * 180_000)]
    leads = {e["tick_id"] for e in eps if e["type"] == "replicant_report"}
    follows = {e["tick_id"] for e in eps if e["type"] == "coordination_intent"}
    assert len(leads) >= 10
    assert {t + 2 for t in leads} == follows


def test_custom_hour_rules_and_metric_windows_apply() -> None:
    """An outcome rule conditioned on hours and a wrapping window on another metric work."""
    raw = raw_default()
    raw["regularities"] = [
        {"name": "late_slippage", "kind": "hour_window", "metric": "slippage_bps",
         "hours": [22, 2], "mean": 60.0},
        {"name": "night_rebalances_fail", "kind": "outcome_rate",
         "when": {"action": "rebalance", "hours": [2, 4]}, "negative_rate": 1.0},
    ]
    sim = SimFeed(parse_scenario(raw), seed=5)
    eps = [e for t in range(1500) for e in sim.poll(t, 1_767_225_600_000 + t * 180_000)]

    def hour(e: dict[str, Any]) -> int:
        return int(e["timestamp"] // 3_600_000 % 24)

    late = [e["metrics"]["slippage_bps"] for e in eps
            if e["type"] == "observation" and hour(e) in (22, 23, 0, 1)]
    rest = [e["metrics"]["slippage_bps"] for e in eps
            if e["type"] == "observation" and hour(e) not in (22, 23, 0, 1)]
    assert sum(late) / len(late) > 3 * sum(rest) / len(rest)
    night = [e["outcome"] for e in eps if e["type"] == "action"
             and e["actions"] == ["rebalance"] and 2 <= hour(e) < 4]
    day = [e["outcome"] for e in eps if e["type"] == "action"
           and e["actions"] == ["rebalance"] and not 2 <= hour(e) < 4]
    assert len(night) >= 5 and set(night) == {"negative"}
    assert 0.2 < day.count("negative") / len(day) < 0.5


def _poll(raw: dict[str, Any], seed: int, ticks: int) -> list[dict[str, Any]]:
    sim = SimFeed(parse_scenario(raw), seed=seed)
    return [e for t in range(ticks) for e in sim.poll(t, 1_767_225_600_000 + t * 180_000)]


def test_size_threshold_rule_follows_the_action_own_size() -> None:
    """An outcome rule on the action's own trade size: big swaps lose, small ones do not."""
    raw = raw_default()
    raw["regularities"] = [{"name": "big_swaps_lose", "kind": "outcome_rate",
                            "when": {"action": "swap", "size_usd": {"above": 3500}},
                            "negative_rate": 1.0}]
    acts = [e for e in _poll(raw, 4, 1500) if e["type"] == "action"
            and e["actions"] == ["swap"]]
    big = [e["outcome"] for e in acts if e["metrics"]["size_usd"] >= 3500]
    small = [e["outcome"] for e in acts if e["metrics"]["size_usd"] < 3500]
    assert len(big) >= 50 and set(big) == {"negative"}
    assert 0.2 < small.count("negative") / len(small) < 0.5


def test_unlabelled_actions_carry_no_regime() -> None:
    """unlabelled_actions leaves that share of action episodes without a regime; the
    observations keep theirs, and every other draw of the run is unchanged."""
    raw = raw_default()
    raw["regimes"]["unlabelled_actions"] = 0.5
    eps = _poll(raw, 6, 800)
    plain = _poll(raw_default(), 6, 800)
    acts = [e for e in eps if e["type"] == "action"]
    bare = [e for e in acts if e["regime"] is None]
    assert 0.4 < len(bare) / len(acts) < 0.6
    assert all(e["regime"] is not None for e in eps if e["type"] != "action")
    for e in bare:
        episode_from_params(e, id="x", now_ms=e["timestamp"])  # valid without a regime
    strip = ("regime",)
    assert ([{k: v for k, v in e.items() if k not in strip} for e in eps]
            == [{k: v for k, v in e.items() if k not in strip} for e in plain])
