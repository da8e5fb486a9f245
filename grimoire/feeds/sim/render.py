"""Episode parameter dicts and their texts for the simulator.

Turns numbers the simulator already drew into ``episode.write`` parameter
dicts (API.md) whose ``text`` renders the same numbers, so that a reader, an
embedding and a metric miner all see one story. Draws nothing and keeps no
state; field names must stay those of ``grimoire.records.episode``.
"""

from __future__ import annotations

from typing import Any

from grimoire.feeds.sim.market import VOL_WINDOW, MarketTick
from grimoire.feeds.sim.scenario import Scenario
from grimoire.records.enums import EpisodeType, Importance, Outcome, Regime

__all__ = ["action_params", "event_params", "money", "observation_params", "shift_params"]

BIG_MOVE_BPS = 75.0  # an action whose |return| exceeds this is `notable`


def money(usd: float, *, signed: bool = False) -> str:
    """``$48.2M`` for millions and up, ``$1,250`` for hundreds, ``$4.12`` below."""
    sign = ("+" if usd >= 0 else "-") if signed else ("-" if usd < 0 else "")
    value = abs(usd)
    if value >= 1e9:
        return f"{sign}${value / 1e9:.1f}B"
    if value >= 1e6:
        return f"{sign}${value / 1e6:.1f}M"
    if value >= 100:
        return f"{sign}${value:,.0f}"
    return f"{sign}${value:,.2f}"


def _base(scenario: Scenario, kind: EpisodeType, tick: int, now_ms: int,
          regime: Regime | None, ref: str) -> dict[str, Any]:
    return {"type": kind.value, "timestamp": now_ms, "tick_id": tick,
            "regime": None if regime is None else regime.value,
            "chain": scenario.chain, "ref": f"sim:{scenario.name}:t{tick}:{ref}"}


def observation_params(scenario: Scenario, tick: int, now_ms: int, regime: Regime,
                       market: MarketTick) -> dict[str, Any]:
    text = (f"{scenario.pair} {market.price:,.2f} ({market.return_bps / 100:+.2f}%), "
            f"gas {market.gas_gwei:.1f} gwei, slippage {market.slippage_bps:.0f} bps, "
            f"liquidity {money(market.pool_liquidity)}, volume {money(market.volume)}, "
            f"regime {regime.value}")
    return {**_base(scenario, EpisodeType.OBSERVATION, tick, now_ms, regime, "obs"),
            "text": text, "token_pair": scenario.pair, "outcome": Outcome.DESCRIPTIVE.value,
            "importance": Importance.ROUTINE.value, "metrics": market.metrics()}


def shift_params(scenario: Scenario, tick: int, now_ms: int, old: Regime, new: Regime,
                 price: float, vol_bps: float) -> dict[str, Any]:
    text = (f"Regime shift on {scenario.pair}: {old.value} → {new.value} at {price:,.2f} "
            f"(realized vol {vol_bps:.0f} bps per tick over the last {VOL_WINDOW} ticks)")
    importance = Importance.CRITICAL if new is Regime.CRISIS else Importance.NOTABLE
    return {**_base(scenario, EpisodeType.REGIME_SHIFT, tick, now_ms, new, "shift"),
            "text": text, "token_pair": scenario.pair, "outcome": Outcome.DESCRIPTIVE.value,
            "importance": importance.value, "actions": [],
            "metrics": {"price": round(price, 2), "realized_vol_bps": round(vol_bps, 2)}}


def action_params(scenario: Scenario, tick: int, now_ms: int, regime: Regime | None,
                  index: int, *,
                  strategy: str, tool: str, action: str, pair: str, size_usd: float,
                  return_bps: float, gain: float, gas_gwei: float, slippage_bps: float,
                  fees: float, prediction: dict[str, float]) -> dict[str, Any]:
    outcome = Outcome.POSITIVE if gain > 0 else Outcome.NEGATIVE
    text = (f"{strategy} {action} {money(size_usd)} on {pair} via {tool}: "
            f"{money(gain, signed=True)} ({return_bps:+.1f} bps), gas {gas_gwei:.1f} gwei, "
            f"slippage {slippage_bps:.1f} bps, fees {money(fees)}")
    importance = Importance.NOTABLE if abs(return_bps) > BIG_MOVE_BPS else Importance.ROUTINE
    return {**_base(scenario, EpisodeType.ACTION, tick, now_ms, regime, f"a{index}"),
            "text": text, "tool": tool, "token_pair": pair, "strategy": strategy,
            "actions": [action], "outcome": outcome.value, "importance": importance.value,
            "gain": gain,
            "metrics": {"size_usd": round(size_usd, 2), "return_bps": round(return_bps, 2),
                        "pnl": gain, "gas_gwei": round(gas_gwei, 2),
                        "slippage_bps": round(slippage_bps, 2), "fees": round(fees, 2)},
            "prediction": {k: round(v, 2) for k, v in prediction.items()}}


def event_params(scenario: Scenario, tick: int, now_ms: int, regime: Regime, index: int, *,
                 kind: EpisodeType, importance: Importance, template: str,
                 price: float) -> dict[str, Any]:
    text = template.format_map({"pair": scenario.pair, "chain": scenario.chain,
                                "price": f"{price:,.2f}", "regime": regime.value,
                                "tick": tick})
    return {**_base(scenario, kind, tick, now_ms, regime, f"e{index}"),
            "text": text, "outcome": Outcome.DESCRIPTIVE.value, "importance": importance.value}
