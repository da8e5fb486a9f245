"""A generated stream replayed day by day with its own past timestamps (issue 24), shared by
``tests/curator/test_data_time.py`` and ``scripts/bench_curator.py --part replay``. No tests here.

The stream (seeded) plants four regularities, each recognised by the structured claim that
states it (``PLANTED``):

- ``gas``: gas is low (8 gwei against 30) 13:00-15:00 UTC every day (observations);
- ``size``: swaps in the top third of trade sizes (``size_usd``) lose 75% of the time, the
  rest 30%;
- ``bear``: bridges in a bear market lose 85% of the time, 25% otherwise;
- ``flip``: rebalances win 80% of the time until the middle day, then lose 80%.

Actions are placed at jittered minutes so that no "A is followed by B" is planted by the
schedule itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from grimoire.clock import MS_PER_DAY, MS_PER_HOUR
from grimoire.records import Claim

__all__ = ["PLANTED", "T0", "WALL", "day_episodes"]

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z: the stream's first day
WALL = T0 + 330 * MS_PER_DAY  # the wall clock of a replay, far ahead of the episodes


def _gas(c: Claim) -> bool:
    w = c.condition.get("hour_window")
    return (c.target == "metric:gas_gwei" and c.direction == "lower" and isinstance(w, list)
            and 12 <= w[0] <= 14 and set(c.condition) == {"hour_window"})


def _size(c: Claim) -> bool:
    return (c.target == "outcome:negative_rate" and c.direction == "higher"
            and c.condition.get("metric_band") == ["size_usd", "upper"])


def _bear(c: Claim) -> bool:
    return (c.target == "outcome:negative_rate" and c.direction == "higher"
            and c.condition.get("regime") == "bear" and c.condition.get("action") == "bridge")


def _flip(c: Claim) -> bool:
    return (c.target.startswith("outcome:") and c.condition.get("action") == "rebalance"
            and len(c.condition) == 1)


PLANTED: dict[str, Callable[[Claim], bool]] = {"gas": _gas, "size": _size, "bear": _bear,
                                               "flip": _flip}


def day_episodes(day: int, days: int, rng: random.Random) -> list[dict[str, Any]]:
    """One day of the stream, oldest first."""
    start = T0 + day * MS_PER_DAY
    regime = "bear" if (day // 3) % 2 else "sideways"
    out: list[dict[str, Any]] = []
    for h in range(24):
        at = start + h * MS_PER_HOUR
        minute = 60_000
        low = 13 <= h < 15
        gas = rng.gauss(8.0, 1.0) if low else rng.gauss(30.0, 3.0)
        out.append({"text": f"WETH/USDC gas {gas:.1f} gwei, regime {regime}", "timestamp": at,
                    "type": "observation", "regime": regime, "token_pair": "WETH/USDC",
                    "metrics": {"gas_gwei": round(gas, 2)}})
        size = rng.uniform(100.0, 10_000.0)
        lose = rng.random() < (0.75 if size > 6_700.0 else 0.30)
        out.append(_action("swap", at + rng.randrange(1, 59) * minute, regime, lose,
                           {"size_usd": round(size, 2)}))
        if h % 2 == 0:
            lose = rng.random() < (0.85 if regime == "bear" else 0.25)
            out.append(_action("bridge", at + rng.randrange(1, 59) * minute, regime, lose, {}))
        if h % 3 == 0:
            p_lose = 0.2 if day < days // 2 else 0.8
            out.append(_action("rebalance", at + rng.randrange(1, 59) * minute, regime,
                               rng.random() < p_lose, {}))
    return sorted(out, key=lambda e: int(e["timestamp"]))


def _action(what: str, at: int, regime: str, lose: bool, metrics: dict[str, float],
            ) -> dict[str, Any]:
    outcome = "negative" if lose else "positive"
    return {"text": f"eth-dca {what} on WETH/USDC in {regime}: {outcome}", "timestamp": at,
            "type": "action", "regime": regime, "token_pair": "WETH/USDC",
            "strategy": "eth-dca", "actions": [what], "tool": "uniswap_v3",
            "outcome": outcome, "gain": 5.0 if not lose else -5.0, "metrics": metrics}


def replay(g: Any, clock: Any, days: int, *, live: bool, seed: int = 1,
           total_days: int | None = None) -> list[int]:
    """Write ``days`` days of the stream in daily batches, one curator cycle after each.

    ``live``: the clock is set to the end of each batch (it agrees with the episodes);
    otherwise it stays far ahead of them (``WALL``, moving 30 s a batch), as when an agent
    backfills its history. Returns each cycle's time."""
    rng = random.Random(seed)
    times: list[int] = []
    if not live:
        clock.set(WALL)
    for day in range(days):
        batch = day_episodes(day, total_days or days, rng)
        if live:
            clock.set(int(batch[-1]["timestamp"]) + 60_000)
        else:
            clock.advance(30_000)
        g.episode_write_batch(batch)
        times.append(int(g.curator_run()["now"]))
    return times
