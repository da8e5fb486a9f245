"""``curator.claims.applies``: a stored rule's condition read against a situation (a partial
action episode), with the curator's own reading of a condition. Pure: records only."""

from __future__ import annotations

from typing import Any

from curator.claims.applies import APPLIES, MAY_APPLY, Situation, covered, match_rule
from curator.claims.window import EpisodeWindow
from grimoire.records import (
    Category,
    Claim,
    DecayClass,
    Episode,
    GrimoireEntry,
    Provenance,
    episode_from_params,
)
from tests.curator.test_curator_support import hour


def situation(**fields: Any) -> Situation:
    episode = episode_from_params({**fields, "text": "situation", "type": "action"},
                                  id="s", now_ms=0)
    return Situation.of(episode, fields)


def entry(id: str = "r", *, claim: Claim | None = None, tags: tuple[str, ...] = (),
          parents: tuple[str, ...] = (), category: Category = Category.WARNING
          ) -> GrimoireEntry:
    return GrimoireEntry(id=id, category=category, content="a rule", confidence=0.8,
                         quality_score=0.5, decay_class=DecayClass.TACTICAL,
                         provenance=Provenance.SELF_LEARNED, created_at=0, last_accessed_at=0,
                         claim=claim, tags=tags, parent_entry_ids=parents)


def claim(condition: dict[str, Any], *, strategy: str | None = None,
          band_cut: float | None = None) -> Claim:
    return Claim(condition=condition, target="outcome:negative_rate", direction="higher",
                 effect=0.8, baseline=0.4, support=20, strategy=strategy, band_cut=band_cut)


def verdict(s: Situation, rule: GrimoireEntry, parent: GrimoireEntry | None = None
            ) -> tuple[str, tuple[str, ...]] | None:
    found = match_rule(s, rule, parent)
    return None if found is None else (found.match, found.missing)


SWAP_HIGH_VOL = claim({"action": "swap", "regime": "high_vol", "token_pair": "WETH/USDC"})


def test_every_term_given_and_true_applies_and_one_false_term_fails() -> None:
    rule = entry(claim=SWAP_HIGH_VOL)
    assert verdict(situation(actions=["swap"], regime="high_vol", token_pair="WETH/USDC"),
                   rule) == (APPLIES, ())
    assert verdict(situation(actions=["swap"], regime="bull", token_pair="WETH/USDC"),
                   rule) is None
    assert verdict(situation(actions=["lp_add"], regime="high_vol"), rule) is None


def test_a_term_whose_field_is_missing_may_apply_and_names_the_field() -> None:
    rule = entry(claim=SWAP_HIGH_VOL)
    assert verdict(situation(actions=["swap"], regime="high_vol"), rule) == (
        MAY_APPLY, ("token_pair",))
    assert verdict(situation(regime="high_vol"), rule) == (MAY_APPLY, ("action", "token_pair"))


def test_the_tool_of_an_action_is_its_action_as_the_curator_reads_it() -> None:
    rule = entry(claim=claim({"action": "swap"}))
    assert verdict(situation(tool="swap"), rule) == (APPLIES, ())
    tool_rule = entry(claim=claim({"tool": "uniswap_v3"}))
    assert verdict(situation(actions=["swap"]), tool_rule) == (MAY_APPLY, ("tool",))
    assert verdict(situation(actions=["swap"], tool="uniswap_v3"), tool_rule) == (APPLIES, ())


def test_a_strategy_rule_is_its_strategy_s_and_a_global_rule_everyone_s() -> None:
    mine = entry(claim=claim({"regime": "high_vol"}, strategy="eth-dca"))
    glob = entry(claim=claim({"regime": "high_vol"}))
    assert verdict(situation(regime="high_vol", strategy="eth-dca"), mine) == (APPLIES, ())
    assert verdict(situation(regime="high_vol", strategy="lp"), mine) is None
    assert verdict(situation(regime="high_vol"), mine) == (MAY_APPLY, ("strategy",))
    assert verdict(situation(regime="high_vol", strategy="lp"), glob) == (APPLIES, ())


def test_an_hour_window_is_judged_on_the_situation_time_only() -> None:
    rule = entry(claim=claim({"hour_window": [22, 2]}))  # wraps midnight
    assert verdict(situation(timestamp=hour(23)), rule) == (APPLIES, ())
    assert verdict(situation(timestamp=hour(1.5)), rule) == (APPLIES, ())
    assert verdict(situation(timestamp=hour(2)), rule) is None  # end exclusive
    assert verdict(situation(actions=["swap"]), rule) == (MAY_APPLY, ("timestamp",))


def test_a_band_is_cut_where_the_claim_says() -> None:
    rule = entry(claim=claim({"metric_band": ["gas_gwei", "upper"]}, band_cut=31.0))
    assert verdict(situation(metrics={"gas_gwei": 40.0}), rule) == (APPLIES, ())
    assert verdict(situation(metrics={"gas_gwei": 20.0}), rule) is None
    assert verdict(situation(metrics={"slippage_bps": 9.0}), rule) == (
        MAY_APPLY, ("metrics.gas_gwei",))
    uncut = entry(claim=claim({"metric_band": ["gas_gwei", "upper"]}))
    assert verdict(situation(metrics={"gas_gwei": 40.0}), uncut) is None  # no cut: no verdict


def test_a_derived_rule_holds_under_its_insight_s_condition_for_the_actions_it_names() -> None:
    insight = entry("i", claim=claim({"regime": "high_vol"}), category=Category.INSIGHT)
    rule = entry(tags=("derived", "metric:gas_gwei", "action:swap", "action:bridge"),
                 parents=("i",))
    assert verdict(situation(actions=["bridge"], regime="high_vol"), rule, insight) == (
        APPLIES, ())
    assert verdict(situation(actions=["lp_add"], regime="high_vol"), rule, insight) is None
    assert verdict(situation(regime="high_vol"), rule, insight) == (MAY_APPLY, ("action",))
    assert verdict(situation(actions=["swap"], regime="high_vol"), rule, None) is None
    assert verdict(situation(actions=["swap"], regime="high_vol"), rule,
                   entry("other", claim=claim({}))) is None  # not its insight


def test_conditions_no_one_here_reads_are_left_to_similarity() -> None:
    causal = entry(claim=Claim({"event": "clade_alert", "within_ms": 600_000},
                               "event:regime_shift_to_high_vol", "higher", 0.5, 0.03, 6))
    told = entry(claim=None)
    for rule in (causal, told):
        assert verdict(situation(actions=["swap"], regime="high_vol"), rule) is None


def test_covered_reads_each_episode_as_a_situation_with_every_field_given() -> None:
    def ep(i: int, **fields: Any) -> Episode:
        return episode_from_params({"text": f"e{i}", "type": "action", **fields},
                                   id=f"e{i}", now_ms=hour(i))
    window = EpisodeWindow.of([
        ep(0, actions=["swap"], regime="high_vol", strategy="eth-dca",
           metrics={"gas_gwei": 40.0}),
        ep(1, actions=["swap"], regime="bull", strategy="eth-dca", metrics={"gas_gwei": 40.0}),
        ep(2, actions=["swap"], regime="high_vol", strategy="lp", metrics={"gas_gwei": 20.0}),
        ep(3, actions=["bridge"], regime="high_vol")])
    def mask(rule: GrimoireEntry, parent: GrimoireEntry | None = None) -> list[bool]:
        return covered(rule, parent, window).tolist()
    assert mask(entry(claim=claim({"action": "swap", "regime": "high_vol"}))) == [
        True, False, True, False]
    assert mask(entry(claim=claim({"action": "swap", "regime": "high_vol"},
                                  strategy="eth-dca"))) == [True, False, False, False]
    assert mask(entry(claim=claim({"metric_band": ["gas_gwei", "upper"]}, band_cut=31.0))
                ) == [True, True, False, False]  # an episode without gas is in no band
    insight = entry("i", claim=claim({"regime": "high_vol"}), category=Category.INSIGHT)
    derived = entry(tags=("derived", "metric:gas_gwei", "action:bridge"), parents=("i",))
    assert mask(derived, insight) == [False, False, False, True]
    # Nothing to stand on: no claim, an empty condition, a term no one here reads.
    assert mask(entry(claim=None)) == [False] * 4
    assert mask(entry(claim=claim({}))) == [False] * 4
    assert mask(entry(claim=claim({"event": "clade_alert"}))) == [False] * 4


def test_a_causal_link_covers_the_occurrences_of_its_two_events() -> None:
    """A link "A is followed by B" speaks about every occurrence of A and of B, named as the
    curator counts them (a regime shift also by the regime it shifts to), in the link's
    scope: a global link the episodes written without a strategy, as ``check_causal``."""
    def ep(i: int, kind: str, **fields: Any) -> Episode:
        return episode_from_params({"text": f"e{i}", "type": kind, **fields},
                                   id=f"e{i}", now_ms=hour(i))
    window = EpisodeWindow.of([
        ep(0, "clade_alert"),
        ep(1, "regime_shift", regime="high_vol"),
        ep(2, "regime_shift", regime="sideways"),
        ep(3, "clade_alert", strategy="eth-dca"),
        ep(4, "action", actions=["swap"], regime="high_vol"),
        ep(5, "observation", regime="high_vol")])
    link = Claim(condition={"event": "clade_alert", "within_ms": 600_000},
                 target="event:regime_shift_to_high_vol", direction="higher", effect=0.46,
                 baseline=0.02, support=28)
    rule = entry(claim=link, category=Category.CAUSAL_LINK)
    assert covered(rule, None, window).tolist() == [True, True, False, False, False, False]
    mine = entry(claim=Claim(**{**link.to_dict(), "strategy": "eth-dca"}),
                 category=Category.CAUSAL_LINK)
    assert covered(mine, None, window).tolist() == [False, False, False, True, False, False]
    # A link is never a situation's rule: no action has its condition.
    assert match_rule(situation(actions=["swap"], regime="high_vol"), rule) is None
