"""Learning tests of the rule-based ExpeL distiller on synthetic episodes.

Regularities are planted in numpy-seeded data; the distiller must find them
(recall), find nothing in data without them (precision), downvote a claim
once the data reverses it, and upvote rather than re-add on a repeat run.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import numpy as np
import pytest

from curator.distiller.distill import distill
from curator.distiller.features import build_table
from curator.distiller.operations import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    ExistingClaim,
    Operation,
    OpKind,
)
from curator.distiller.scan import scan
from grimoire.config import DistillerConfig
from grimoire.records import Category, Claim, Episode, EpisodeType, Outcome, Regime

START = 1_767_225_600_000  # 2026-01-01T00:00Z
DAY = 86_400_000
HOUR = 3_600_000
REGIMES = ("bull", "bear", "sideways", "high_vol", "low_vol", "crisis")
REGIME_P = (0.2, 0.15, 0.25, 0.2, 0.15, 0.05)
CFG = DistillerConfig()


def make_episodes(
    seed: int,
    n: int = 2000,
    *,
    days: int = 30,
    start: int = START,
    cheap_gas: bool = False,
    cheap_hours: tuple[int, int] = (2, 4),  # UTC [start, end), may wrap midnight
    warning: str | None = None,  # "bad": swaps on WETH/USDC in high_vol fail; "good": they work
    good_swaps: bool = False,
    gas_sensitive_swaps: bool = False,
    failing_tool: str | None = None,  # swaps through this tool ("uniswap" | "curve") fail
    pair_hours: tuple[str, int, int] | None = None,  # swaps on this pair fail in [start, end)
    id_prefix: str = "e",
) -> list[Episode]:
    """Ticks (60%) and actions (40%) with independent fields unless a regularity is planted.

    Regimes come in 6-hour blocks, as a market's do; gas is lognormal around
    22 gwei; slippage and volume are lognormal; outcomes are 30% negative,
    55% positive, 15% neutral.
    """
    rng = np.random.default_rng(seed)
    times = np.sort(rng.integers(start, start + days * DAY, n))
    hours = (times // HOUR) % 24
    blocks = rng.choice(len(REGIMES), size=days * 4 + 1, p=REGIME_P)
    regimes = np.array(REGIMES)[blocks[(times - start) // (6 * HOUR)]]
    cheap = cheap_gas & (((hours - cheap_hours[0]) % 24) < (cheap_hours[1] - cheap_hours[0]) % 24)
    gas = np.where(cheap, rng.lognormal(np.log(6.0), 0.2, n), rng.lognormal(np.log(22.0), 0.35, n))
    is_tick = rng.random(n) < 0.6
    volume = rng.lognormal(10.0, 1.0, n)
    actions = rng.choice(["swap", "rebalance", "bridge"], p=[0.5, 0.3, 0.2], size=n)
    pairs = rng.choice(["WETH/USDC", "WBTC/WETH", "ARB/USDC"], p=[0.4, 0.3, 0.3], size=n)
    chains = rng.choice(["ethereum", "arbitrum"], p=[0.6, 0.4], size=n)
    swap_tools = rng.choice(["uniswap", "curve"], size=n)
    slippage = rng.lognormal(np.log(8.0), 0.5, n)
    u = rng.random(n)
    noise = rng.normal(0.0, 3.0, n)
    p_neg = np.full(n, 0.30)
    p_pos = np.full(n, 0.55)
    planted = (actions == "swap") & (pairs == "WETH/USDC") & (regimes == "high_vol")
    if warning:
        p_neg[planted], p_pos[planted] = (0.85, 0.10) if warning == "bad" else (0.05, 0.85)
    if good_swaps:
        where = (actions == "swap") & (regimes == "low_vol")
        p_neg[where], p_pos[where] = 0.0, 0.97
    if gas_sensitive_swaps:
        where = (actions == "swap") & (gas > 26.0)
        p_neg[where], p_pos[where] = 0.75, 0.2
    if pair_hours:
        pair, first, last = pair_hours
        where = (actions == "swap") & (pairs == pair) & (hours >= first) & (hours < last)
        p_neg[where], p_pos[where] = 0.9, 0.08
    if failing_tool:
        where = (actions == "swap") & (swap_tools == failing_tool)
        p_neg[where], p_pos[where] = 0.8, 0.15
    out: list[Episode] = []
    for i in range(n):
        t, regime = int(times[i]), Regime(str(regimes[i]))
        if is_tick[i]:
            out.append(Episode(
                id=f"{id_prefix}{i}", text="tick", type=EpisodeType.OBSERVATION, timestamp=t,
                regime=regime, tool="oracle", chain="ethereum",
                metrics={"gas_gwei": float(gas[i]), "volume_usd": float(volume[i])},
            ))
            continue
        action = str(actions[i])
        tool = (str(swap_tools[i]) if action == "swap"
                else {"rebalance": "aave", "bridge": "across"}[action])
        outcome = (Outcome.NEGATIVE if u[i] < p_neg[i] else Outcome.POSITIVE
                   if u[i] < p_neg[i] + p_pos[i] else Outcome.NEUTRAL)
        out.append(Episode(
            id=f"{id_prefix}{i}", text=f"{action} {pairs[i]}", type=EpisodeType.ACTION,
            timestamp=t, regime=regime, outcome=outcome, tool=tool, chain=str(chains[i]),
            token_pair=str(pairs[i]), actions=(action,),
            gain=float((5.0 if outcome is Outcome.POSITIVE else -5.0) + noise[i]),
            metrics={"gas_gwei": float(gas[i]), "slippage_bps": float(slippage[i])},
        ))
    return out


def with_wandering_gas(episodes: list[Episode], seed: int, phi: float = 0.9) -> list[Episode]:
    """Gas as an AR(1) walk in log space: each tick resembles the one before."""
    rng = np.random.default_rng(seed)
    x, out = 0.0, []
    for e in episodes:
        x = phi * x + np.sqrt(1 - phi * phi) * rng.normal()
        out.append(dataclasses.replace(
            e, metrics={**e.metrics, "gas_gwei": float(22.0 * np.exp(0.35 * x))}))
    return out


def with_streaky_outcomes(episodes: list[Episode], seed: int, stay: float = 0.8) -> list[Episode]:
    """Each action repeats the previous outcome with probability ``stay`` (streaks)."""
    rng = np.random.default_rng(seed)
    previous, out = Outcome.POSITIVE, []
    for e in episodes:
        if e.type is EpisodeType.ACTION:
            if rng.random() > stay:
                u = rng.random()
                previous = (Outcome.NEGATIVE if u < 0.3 else Outcome.POSITIVE if u < 0.85
                            else Outcome.NEUTRAL)
            e = dataclasses.replace(e, outcome=previous)
        out.append(e)
    return out


def existing_from(ops: Sequence[Operation]) -> list[ExistingClaim]:
    return [ExistingClaim(f"entry-{i}", op.claim, 0.5) for i, op in enumerate(ops)]


def only(ops: Sequence[Operation], **match: object) -> Operation:
    found = [op for op in ops if all(getattr(op, k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one {match}, got {[o.content for o in ops]}"
    return found[0]


# ----------------------------------------------------------------------- recall


@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
def test_cheap_gas_window_is_found_with_its_exact_window(seed: int) -> None:
    """Gas planted low from 02:00 to 04:00 UTC is one insight naming exactly that window."""
    ops = distill(make_episodes(seed, cheap_gas=True), [], CFG, strategy="lp")
    gas = [op for op in ops if op.claim.target == "metric:gas_gwei"]
    assert len(gas) == 1
    op = gas[0]
    assert op.op is OpKind.ADD and op.category is Category.INSIGHT
    assert op.claim.condition == {"hour_window": [2, 4]}
    assert op.claim.direction == "lower"
    assert 5.0 < op.claim.effect < 7.5 and 19.0 < op.claim.baseline < 25.0
    assert op.claim.strategy == "lp" and op.strategy == "lp"
    assert op.content.startswith("Gas averages ")
    assert "between 02:00 and 04:00 UTC" in op.content and f"(n={op.claim.support})" in op.content
    assert op.evidence["p_value"] < CFG.alpha
    assert len(op.parent_episode_ids) == CFG.max_parent_episodes


def test_a_window_across_midnight_is_found() -> None:
    ops = distill(make_episodes(21, cheap_gas=True, cheap_hours=(23, 2)), [], CFG, strategy=None)
    op = only(ops, category=Category.INSIGHT)
    assert op.claim.condition == {"hour_window": [23, 2]}
    assert "between 23:00 and 02:00 UTC" in op.content


@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
def test_failing_swaps_in_high_vol_become_one_warning(seed: int) -> None:
    """Swaps on WETH/USDC fail in high_vol: one warning on exactly that conjunction."""
    ops = distill(make_episodes(seed, warning="bad"), [], CFG, strategy=None)
    rates = [op for op in ops if op.claim.target == NEGATIVE_RATE]
    assert len(rates) == 1, [op.content for op in ops]
    op = rates[0]
    assert op.category is Category.WARNING and op.op is OpKind.ADD
    assert op.claim.condition == {"action": "swap", "regime": "high_vol",
                                  "token_pair": "WETH/USDC"}
    assert op.regime is Regime.HIGH_VOL
    assert op.claim.effect > 0.7 and op.claim.baseline < 0.4
    assert op.content.startswith("Avoid swap on WETH/USDC when the regime is high_vol: ")
    hits = op.evidence["hits"]
    assert f"{hits} of {op.claim.support} were negative" in op.content
    assert len(op.parent_episode_ids) == hits  # the failed swaps are the supporting episodes


def test_a_pair_failing_at_some_hours_is_found_on_pair_and_hours() -> None:
    """Swaps on one pair fail 14:00-17:00 only: neither the pair over the day nor the hours
    over every pair shows it; the conjunction does (a rule on token pair × hour)."""
    ops = distill(make_episodes(8, n=4000, pair_hours=("ARB/USDC", 14, 17)), [], CFG,
                  strategy=None)
    rates = [op for op in ops if op.claim.target == NEGATIVE_RATE]
    assert len(rates) == 1, [op.content for op in ops]
    condition = rates[0].claim.condition
    assert condition["action"] == "swap" and condition["token_pair"] == "ARB/USDC"
    start, end = condition["hour_window"]
    assert 13 <= start <= 15 and (end - start) % 24 <= 5


def test_the_outcomes_own_measure_does_not_shadow_a_finding() -> None:
    """Actions carry their P&L: 'swaps are negative when P&L is in its lower third' is true
    of every data set and overlaps every real finding's episodes. Tried beside them, it
    was selected first and made them look redundant (then the leak filter dropped it,
    leaving nothing); an outcome is never conditioned on its own measure."""
    episodes = [dataclasses.replace(e, metrics={**e.metrics, "pnl": e.gain})
                if e.type is EpisodeType.ACTION and e.gain is not None else e
                for e in make_episodes(8, n=4000, pair_hours=("ARB/USDC", 14, 17))]
    ops = distill(episodes, [], CFG, strategy=None)
    rates = [op.claim.condition for op in ops if op.claim.target == NEGATIVE_RATE]
    assert any(c.get("token_pair") == "ARB/USDC" and "hour_window" in c for c in rates), rates
    assert not any("metric_band" in c for c in rates)


def test_a_common_condition_is_measured_against_the_rest_not_the_pooled_rate() -> None:
    """Swaps on arbitrum (40% of swaps) lose 60% of the time, the other swaps 30%: a gap
    of 0.30 to the rest, but only 0.18 to the pooled 42%, which holds arbitrum's own swaps.
    The effect is the former, however common the condition (distiller.min_rate_gap 0.2)."""
    rng = np.random.default_rng(5)
    episodes = []
    for e in make_episodes(9, n=4000):
        if e.type is EpisodeType.ACTION and e.actions == ("swap",):
            lose = 0.6 if e.chain == "arbitrum" else 0.3
            e = dataclasses.replace(e, outcome=Outcome.NEGATIVE if rng.random() < lose
                                    else Outcome.POSITIVE)
        episodes.append(e)
    swaps = [e for e in episodes if e.type is EpisodeType.ACTION and e.actions == ("swap",)]
    on = [e.outcome is Outcome.NEGATIVE for e in swaps if e.chain == "arbitrum"]
    rest = [e.outcome is Outcome.NEGATIVE for e in swaps if e.chain != "arbitrum"]
    pooled = (sum(on) + sum(rest)) / len(swaps)
    assert np.mean(on) - pooled < CFG.min_rate_gap <= np.mean(on) - np.mean(rest)
    ops = distill(episodes, [], CFG, strategy=None)
    rates = [op.claim.condition for op in ops if op.claim.target == NEGATIVE_RATE]
    assert {"action": "swap", "chain": "arbitrum"} in rates, [op.content for op in ops]


def test_reliable_swaps_become_a_heuristic() -> None:
    """A good outcome rate reads 'When X, do Y because ...'."""
    ops = distill(make_episodes(4, good_swaps=True), [], CFG, strategy=None)
    op = only(ops, category=Category.HEURISTIC)
    assert op.claim.target == POSITIVE_RATE
    assert op.claim.condition == {"action": "swap", "regime": "low_vol"}
    assert op.content.startswith("When the regime is low_vol, do swap because ")
    assert "were positive" in op.content


def test_a_metric_threshold_is_a_condition() -> None:
    """Swaps that fail when gas is high are found against gas's top third."""
    ops = distill(make_episodes(5, gas_sensitive_swaps=True), [], CFG, strategy=None)
    op = only(ops, category=Category.WARNING)
    assert op.claim.condition == {"action": "swap", "metric_band": ["gas_gwei", "upper"]}
    cut = op.evidence["band_cut"]
    assert 20.0 < cut < 30.0
    assert op.claim.band_cut == cut  # kept in the claim: the curator judges by it
    assert op.content.startswith(f"Avoid swap when gas is above {cut:.1f} gwei: ")


def with_sizes(episodes: list[Episode], seed: int, lose_above: float) -> list[Episode]:
    """Every action trades a uniform size in [0, 100); swaps of ``lose_above`` or more
    lose 75% of the time, every other action 30% (the rest win)."""
    rng = np.random.default_rng(seed)
    out = []
    for e in episodes:
        if e.type is EpisodeType.ACTION:
            size = float(rng.uniform(0.0, 100.0))
            lose = 0.75 if e.actions == ("swap",) and size >= lose_above else 0.30
            e = dataclasses.replace(
                e, metrics={**e.metrics, "size_usd": size},
                outcome=Outcome.NEGATIVE if rng.random() < lose else Outcome.POSITIVE)
        out.append(e)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_a_threshold_between_the_thirds_is_found_at_its_own_cut(seed: int) -> None:
    """Swaps of size 88 or more lose: the top third (from ~67) holds more base-rate swaps
    than losing ones, a gap under min_rate_gap. The cut scan finds a cut near 88, and the
    far end of the same split ("smaller swaps win") is not a second finding."""
    episodes = with_sizes(make_episodes(seed, n=4000), seed, lose_above=88.0)
    ops = distill(episodes, [], CFG, strategy=None)
    op = only(ops, category=Category.WARNING)
    assert op.claim.condition == {"action": "swap", "metric_band": ["size_usd", "upper"]}
    assert op.claim.band_cut is not None and 78.0 < op.claim.band_cut < 95.0
    assert op.evidence["band_cut"] == op.claim.band_cut
    assert not any("metric_band" in o.claim.condition for o in ops if o is not op)
    # the fixed thirds alone (the distiller before the scan) miss it
    thirds = dataclasses.replace(CFG, band_quantiles=[1 / 3, 2 / 3])
    assert not any("metric_band" in o.claim.condition
                   for o in distill(episodes, [], thirds, strategy=None))


def test_opposite_outcomes_in_two_of_many_regimes_are_two_findings() -> None:
    """Swaps lose in one regime and win in another: not one split read from both ends (the
    other regimes are neither), so both stay, however little the rest holds without one."""
    # most of the swaps in the two regimes: without one, the other's rest is thin
    episodes = [e for i, e in enumerate(make_episodes(11, n=6000, warning="bad",
                                                      good_swaps=True))
                if e.regime in (Regime.HIGH_VOL, Regime.LOW_VOL) or i % 8 == 0]
    ops = distill(episodes, [], CFG, strategy=None)
    found = {(o.claim.target, o.claim.condition.get("regime")) for o in ops
             if o.claim.target in (NEGATIVE_RATE, POSITIVE_RATE)}
    assert (NEGATIVE_RATE, "high_vol") in found and (POSITIVE_RATE, "low_vol") in found, found


def test_the_cuts_of_one_metric_share_the_scans_weight() -> None:
    """Bonferroni within a cut scan: the cuts of one metric (both sides, one action and
    target) share band_scan_weight hypotheses' worth of alpha, whatever their number."""
    episodes = with_sizes(make_episodes(3, n=2000), 3, lose_above=85.0)
    for quantiles in ([0.5], [0.25, 0.5, 0.75], [q / 20 for q in range(1, 20)]):
        cfg = dataclasses.replace(CFG, band_quantiles=quantiles)
        hyps = scan(build_table(episodes, 3 * cfg.min_support), cfg)
        cuts = [h for h in hyps if h.target == NEGATIVE_RATE
                and h.condition.get("metric_band", [""])[0] == "size_usd"
                and h.condition.get("action") == "swap"]
        assert len(cuts) == 2 * len(quantiles)
        assert sum(h.weight for h in cuts) == pytest.approx(
            min(len(cuts), cfg.band_scan_weight))


def test_a_stored_band_claim_is_judged_at_its_own_cut() -> None:
    """A stored "swaps of 88 or more lose 95%" is read at 88, not at this window's top third
    (from ~67, where base-rate swaps dilute it to ~46%, well under what it asserts). The
    scan here cannot re-find it (one cut, at the median), so the claim is judged as stored."""
    episodes = with_sizes(make_episodes(4, n=3000), 4, lose_above=88.0)
    cfg = dataclasses.replace(CFG, band_quantiles=[0.5])
    stored = Claim({"action": "swap", "metric_band": ["size_usd", "upper"]}, NEGATIVE_RATE,
                   "higher", 0.95, 0.35, 100, 1e-6, None, band_cut=88.0)
    ops = distill(episodes, [ExistingClaim("entry-1", stored, 0.8)], cfg, strategy=None)
    assert not any(op.op is OpKind.DOWNVOTE for op in ops), [op.content for op in ops]
    # read at the thirds (a claim stored without its cut), the same words are contradicted
    legacy = dataclasses.replace(stored, band_cut=None)
    ops = distill(episodes, [ExistingClaim("entry-1", legacy, 0.8)], cfg, strategy=None)
    assert any(op.op is OpKind.DOWNVOTE for op in ops)


@pytest.mark.parametrize("seed", [8, 9])
def test_a_failing_tool_is_a_condition(seed: int) -> None:
    """Swaps through curve fail 80% of the time: one warning whose condition names the
    tool. Uniswap gets no warning (it may get a heuristic: beside curve it does better
    than swap overall, which is true)."""
    ops = distill(make_episodes(seed, failing_tool="curve"), [], CFG, strategy=None)
    op = only(ops, category=Category.WARNING)
    assert op.claim.target == NEGATIVE_RATE
    assert op.claim.condition == {"action": "swap", "tool": "curve"}
    assert op.content.startswith("Avoid swap via curve: ")
    assert all(o.claim.condition.get("tool") != "uniswap" for o in ops
               if o.category is Category.WARNING)


def test_planted_regularities_are_found_together() -> None:
    ops = distill(make_episodes(6, cheap_gas=True, warning="bad"), [], CFG, strategy=None)
    kinds = sorted((op.category.value, op.claim.target) for op in ops)
    assert kinds == [("insight", "metric:gas_gwei"), ("warning", NEGATIVE_RATE)]


# -------------------------------------------------------------------- precision


@pytest.mark.slow
def test_no_regularity_no_operation_over_twenty_seeds() -> None:
    """Independent fields over 20 seeds × 2,000 episodes: no finding at all (alpha = 0.01)."""
    false_findings = []
    for seed in range(100, 120):
        ops = distill(make_episodes(seed), [], CFG, strategy=None)
        false_findings.extend(op.content for op in ops)
    assert false_findings == []


def test_no_regularity_no_operation_three_seeds() -> None:
    """The fast guard of the 20-seed precision test."""
    for seed in range(200, 203):
        assert distill(make_episodes(seed), [], CFG, strategy=None) == []


@pytest.mark.parametrize("seed", [
    40, 41, pytest.param(42, marks=pytest.mark.slow), pytest.param(43, marks=pytest.mark.slow)])
def test_wandering_gas_and_lasting_regimes_are_not_a_regularity(seed: int) -> None:
    """Autocorrelated gas and 6-hour regime blocks: without the correction for
    autocorrelation 10% of such runs claimed "gas is higher in crisis"."""
    episodes = with_wandering_gas(make_episodes(seed), seed)
    assert distill(episodes, [], CFG, strategy=None) == []


@pytest.mark.parametrize("seed", [
    50, 51, pytest.param(52, marks=pytest.mark.slow), pytest.param(53, marks=pytest.mark.slow)])
def test_streaks_of_outcomes_are_not_a_regularity(seed: int) -> None:
    episodes = with_streaky_outcomes(make_episodes(seed), seed)
    assert distill(episodes, [], CFG, strategy=None) == []


def test_planted_regularities_survive_autocorrelated_noise() -> None:
    """The correction must not blind the distiller: a real gas window still stands out."""
    episodes = with_wandering_gas(make_episodes(60), 60)
    cheap = [dataclasses.replace(e, metrics={**e.metrics, "gas_gwei": e.metrics["gas_gwei"] * 0.27})
             if 2 <= (e.timestamp // HOUR) % 24 < 4 else e for e in episodes]
    op = only(distill(cheap, [], CFG, strategy=None), category=Category.INSIGHT)
    assert op.claim.condition == {"hour_window": [2, 4]}
    assert op.evidence["variance_inflation"] >= 1.0


STRATIFIED = dataclasses.replace(CFG, hour_strata=["regime"])
REGIME_GAS = {"bull": 1.3, "bear": 1.2, "sideways": 1.0, "high_vol": 1.8, "low_vol": 0.7,
              "crisis": 2.5}


def with_regime_gas(episodes: list[Episode], hours: tuple[int, int] | None = None,
                    lift: float = 1.0) -> list[Episode]:
    """Gas scaled by the regime (6-hour blocks: slow swings), and by ``lift`` in ``hours``."""
    out = []
    for e in episodes:
        gas = e.metrics["gas_gwei"] * REGIME_GAS[e.regime.value if e.regime else "sideways"]
        if hours is not None and hours[0] <= (e.timestamp // HOUR) % 24 < hours[1]:
            gas *= lift
        out.append(dataclasses.replace(e, metrics={**e.metrics, "gas_gwei": gas}))
    return out


def test_an_hour_window_is_found_through_regime_swings() -> None:
    """Five days in which the regime moves gas for hours at a time: the raw levels bury a
    ×1.6 window at 12:00-15:00 under that variance (and its autocorrelation); the window
    compared within each regime (distiller.hour_strata) stands out."""
    episodes = with_regime_gas(make_episodes(2, days=5), (12, 15), 1.6)
    ops = distill(episodes, [], STRATIFIED, strategy=None)
    windows = [op.claim for op in ops if "hour_window" in op.claim.condition]
    assert [(c.target, c.direction, c.condition) for c in windows] == [
        ("metric:gas_gwei", "higher", {"hour_window": [12, 15]})]
    op = only(ops, claim=windows[0])
    assert op.evidence["test"] == "stratified_welch_t+mann_whitney"
    # the claim keeps the raw levels: what the owner sees at those hours
    cell = [e.metrics["gas_gwei"] for e in episodes if 12 <= (e.timestamp // HOUR) % 24 < 15]
    assert op.claim.effect == pytest.approx(float(np.mean(cell)))
    raw = dataclasses.replace(CFG, hour_strata=[])
    assert not [op for op in distill(episodes, [], raw, strategy=None)
                if "hour_window" in op.claim.condition]


@pytest.mark.parametrize("seeds", [range(70, 76), pytest.param(range(76, 100),
                                                               marks=pytest.mark.slow)])
def test_regime_swings_alone_give_no_hour_window(seeds: range) -> None:
    """The stratified test keeps its level: regimes that move gas (a true effect of the
    regime) and no clock effect yield no hour-of-day finding."""
    for seed in seeds:
        ops = distill(with_regime_gas(make_episodes(seed, days=5)), [], STRATIFIED,
                      strategy=None)
        assert not [op.content for op in ops if "hour_window" in op.claim.condition], seed


def test_small_batches_of_noise_yield_nothing() -> None:
    """Few episodes make many tiny cells; they must not turn into rules."""
    for seed in range(10):
        assert distill(make_episodes(seed, n=60), [], CFG, strategy=None) == []


# ----------------------------------------------------------------- properties


def test_result_does_not_depend_on_episode_order() -> None:
    episodes = make_episodes(16, cheap_gas=True, warning="bad")
    shuffled = list(episodes)
    random.Random(0).shuffle(shuffled)
    a = distill(episodes, [], CFG, strategy=None)
    b = distill(shuffled, [], CFG, strategy=None)
    assert [op.content for op in a] == [op.content for op in b]
    assert [set(op.parent_episode_ids) for op in a] == [set(op.parent_episode_ids) for op in b]


def test_operations_serialise_to_json() -> None:
    import json

    ops = distill(make_episodes(17, cheap_gas=True, warning="bad"), [], CFG, strategy="s")
    for op in ops:
        data = json.loads(json.dumps(op.to_dict()))
        assert Claim.from_dict(data["claim"]).key == op.claim.key
        assert data["op"] == "ADD" and data["content"] == op.content


def test_empty_and_tiny_inputs() -> None:
    assert distill([], [], CFG, strategy=None) == []
    assert distill(make_episodes(1, n=5), [], CFG, strategy=None) == []


def test_run_is_logged_with_its_counts() -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        distill(make_episodes(18, cheap_gas=True), [], CFG, strategy="s")
    [event] = [e for e in logs if e["event"] == "distiller.run.complete"]
    assert event["episodes"] == 2000 and event["findings"] == 1 and event["add"] == 1
    assert event["family"] > 100 and event["strategy"] == "s"


def test_bad_config_is_refused_with_the_field_named() -> None:
    from grimoire.errors import ValidationError

    with pytest.raises(ValidationError, match=r"distiller\.alpha"):
        distill([], [], DistillerConfig(alpha=0.0), strategy=None)
    with pytest.raises(ValidationError, match=r"distiller\.hour_strata"):
        distill([], [], DistillerConfig(hour_strata=["weather"]), strategy=None)


def test_hour_windows_that_have_not_come_round_take_no_share_of_alpha() -> None:
    """Issue 24: a window no run may report yet (its hours not seen on two days) is not
    tried, so it dilutes no other hypothesis's alpha; once it has come round, it is."""
    one_day = make_episodes(1, n=800, days=1)
    hyps = scan(build_table(one_day, 3 * CFG.min_support), CFG)
    assert hyps and not any("hour_window" in h.condition for h in hyps)
    two_days = make_episodes(1, n=800, days=2)
    assert any("hour_window" in h.condition
               for h in scan(build_table(two_days, 3 * CFG.min_support), CFG))
