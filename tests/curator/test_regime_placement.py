"""The curator judges a regime claim on actions written without a regime, in the regime
the observations of their moment name (``curator.claims.regimes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator.cycle.evidence import validate_predictions
from grimoire.clock import FrozenClock
from grimoire.records import Category
from tests.curator.test_curator_support import (
    SWAP_CLAIM,
    gas_obs,
    get,
    hour,
    open_grimoire,
    put,
    start_cycle,
    swap,
    write,
)


def _bare_swap(at: int, outcome: str) -> dict[str, Any]:
    episode = swap(at, outcome)
    del episode["regime"]
    episode["text"] = f"eth-dca swap on WETH/USDC: {outcome}"
    return episode


def _judged(tmp_path: Path, clock: FrozenClock, gap_ms: int) -> tuple[int, int]:
    g = open_grimoire(tmp_path, clock, **{"distiller.regime_context_ms": gap_ms})
    try:
        warning = put(g, category=Category.WARNING, claim=SWAP_CLAIM, confidence=0.6)
        clock.set(hour(6))
        # high_vol from 02:00, sideways from 04:00: each swap a minute after an observation
        write(g, [gas_obs(hour(2 + i / 4), 30.0, "high_vol" if i < 8 else "sideways")
                  for i in range(16)]
              + [_bare_swap(hour(2 + i / 4) + 60_000, "negative" if i < 8 else "positive")
                 for i in range(16)])
        validate_predictions(start_cycle(g))
        after = get(g, warning.id)
        return after.validated_count, after.contradicted_count
    finally:
        g.close()


def test_unlabelled_swaps_confirm_a_high_vol_warning_in_their_moments_regime(
        tmp_path: Path, clock: FrozenClock) -> None:
    """Eight swaps in the high_vol stretch lost; none names a regime. Read in the regime of
    the observation a minute before each, they are eight ✓ for "swaps lose in high_vol";
    unplaced (regime_context_ms 0) they are no evidence for it at all."""
    assert _judged(tmp_path / "placed", clock, 3_600_000) == (8, 0)
    assert _judged(tmp_path / "bare", clock, 0) == (0, 0)
