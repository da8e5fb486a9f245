"""A store holding the kinds of rules the curator promotes (no tests here), shaped like the
README demo's: a global warning derived from a high_vol slippage insight (swap), a
strategy's own outcome-rate warning on swaps of WETH/USDC in high_vol, an hour-window
heuristic derived from a gas insight, a low_vol warning on another action, a warning told
in words only (no claim), and a candidate that is not active yet.

Entries go straight into the semantic store (``tests.curator.test_curator_support.put``),
exactly as the curator stores them: derived rules carry no claim, their insight does.
"""

from __future__ import annotations

from dataclasses import dataclass

from grimoire import Grimoire
from grimoire.records import Category, Claim, EntryStatus, Provenance, Regime
from tests.curator.test_curator_support import put

SLIPPAGE = Claim(condition={"regime": "high_vol"}, target="metric:slippage_bps",
                 direction="higher", effect=21.0, baseline=14.0, support=120)
SWAPS_LOSE = Claim(condition={"action": "swap", "regime": "high_vol",
                              "token_pair": "WETH/USDC"},
                   target="outcome:negative_rate", direction="higher", effect=0.84,
                   baseline=0.57, support=43, strategy="eth-dca")
NIGHT_GAS = Claim(condition={"hour_window": [2, 4]}, target="metric:gas_gwei",
                  direction="lower", effect=8.0, baseline=24.0, support=60)
LP_LOW_VOL = Claim(condition={"action": "lp_add", "regime": "low_vol"},
                   target="outcome:negative_rate", direction="higher", effect=0.7,
                   baseline=0.4, support=30)


@dataclass(frozen=True)
class Rules:
    slippage_warning: str  # global, derived (swap), regime high_vol
    swap_warning: str  # strategy eth-dca, own claim: swap WETH/USDC in high_vol
    night_heuristic: str  # global, derived (swap), hours 02-04 UTC
    lp_warning: str  # lp_add in low_vol
    told_warning: str  # words only
    candidate_warning: str  # swap in high_vol, not promoted yet


def fill_rules(g: Grimoire) -> Rules:
    slippage = put(g, category=Category.INSIGHT, claim=SLIPPAGE, confidence=0.9,
                   market_regime=Regime.HIGH_VOL, tags=("distiller", "slippage_bps"),
                   content="Slippage averages 21 bps (vs 14 overall) when the regime is "
                           "high_vol (n=120).")
    gas = put(g, category=Category.INSIGHT, claim=NIGHT_GAS, confidence=0.8,
              tags=("distiller", "gas_gwei", "hour_window"),
              content="Gas averages 8 gwei (vs 24 overall) between 02:00 and 04:00 UTC.")
    slippage_warning = put(
        g, category=Category.WARNING, confidence=0.9, market_regime=Regime.HIGH_VOL,
        parent_entry_ids=(slippage.id,), tags=("derived", "metric:slippage_bps", "action:swap"),
        content="Avoid swap when the regime is high_vol because slippage averages 21 bps "
                "(vs 14 bps otherwise; 120 episodes).")
    swap_warning = put(
        g, category=Category.WARNING, claim=SWAPS_LOSE, confidence=0.85, strategy="eth-dca",
        market_regime=Regime.HIGH_VOL, tags=("distiller", "negative_rate", "swap"),
        content="Avoid swap on WETH/USDC when the regime is high_vol: 36 of 43 were negative "
                "(84% vs 57% for swap overall).")
    night = put(
        g, category=Category.HEURISTIC, confidence=0.8, parent_entry_ids=(gas.id,),
        tags=("derived", "metric:gas_gwei", "action:swap"),
        content="When the time is between 02:00 and 04:00 UTC, prefer swap because gas "
                "averages 8 gwei (vs 24 gwei otherwise; 60 episodes).")
    lp = put(g, category=Category.WARNING, claim=LP_LOW_VOL, confidence=0.8,
             market_regime=Regime.LOW_VOL,
             content="Avoid lp_add when the regime is low_vol: 21 of 30 were negative.")
    told = put(g, category=Category.WARNING, provenance=Provenance.AGENT, confidence=0.6,
               content="Never swap in high volatility: slippage eats the gain.")
    candidate = put(g, category=Category.WARNING, status=EntryStatus.CANDIDATE,
                    claim=Claim(condition={"action": "swap", "regime": "high_vol"},
                                target="outcome:negative_rate", direction="higher",
                                effect=0.6, baseline=0.5, support=12),
                    content="Avoid swap when the regime is high_vol: 7 of 12 were negative.")
    return Rules(slippage_warning.id, swap_warning.id, night.id, lp.id, told.id, candidate.id)


def same_advice_warning(g: Grimoire) -> str:
    """A second eth-dca warning on swaps of WETH/USDC in high_vol, read from the other
    outcome: the same advice as ``fill_rules``' swap warning (avoid that swap), another
    reason, and a lower weight."""
    claim = Claim(condition=dict(SWAPS_LOSE.condition), target="outcome:positive_rate",
                  direction="lower", effect=0.25, baseline=0.3, support=43,
                  strategy="eth-dca")
    return put(g, category=Category.WARNING, claim=claim, confidence=0.8, strategy="eth-dca",
               market_regime=Regime.HIGH_VOL, tags=("distiller", "positive_rate", "swap"),
               content="Avoid swap on WETH/USDC when the regime is high_vol: 11 of 43 were "
                       "positive (25% vs 30% for swap overall).").id


#: "swap WETH/USDC in high_vol", as fields (the issue's done-when situation)
SWAP_HIGH_VOL = {"actions": ["swap"], "token_pair": "WETH/USDC", "regime": "high_vol"}
