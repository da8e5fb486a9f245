"""The Mattar–Daw replay multiplier (seed 004): an episode's score × (1 + w · gain · need).

Utility U = gain × need in [0, 1] (``decide.replay_rank``: |P&L| over the largest in the
pool; need = 1 / time since it was last served to a decision or replayed, capped within
``retrieval.replay_need_floor_ms``; never served: since it happened) multiplies the score
by ``1 + retrieval.replay_weight · U``. Reads the episodes' serve times from the semantic
store; the ``replay`` line of each lifted episode's breakdown says by how much. Must not
rank.
"""

from __future__ import annotations

from collections.abc import Mapping

from grimoire.context import Context
from grimoire.retrieval.candidates import Breakdown, Candidate
from grimoire.retrieval.decide import replay_rank

__all__ = ["replay"]


def replay(ctx: Context, cands: Mapping[str, Candidate], scores: dict[str, float],
            factors: dict[str, Breakdown], t: int) -> None:
    """Mattar–Daw: multiply episodes' scores by 1 + w · gain · need (in place)."""
    weight = ctx.config.retrieval.replay_weight
    episodes = [c for c in cands.values() if c.kind == "episode" and c.gain]
    if weight <= 0.0 or not episodes:
        return
    states = ctx.semantic.episode_states([c.id for c in episodes])
    last: dict[str, int] = {}
    for episode_id, state in states.items():
        served = [v for v in (state.last_accessed_at, state.replayed_at)
                  if v is not None and v <= t]
        if served:
            last[episode_id] = max(served)
    floor = ctx.config.retrieval.replay_need_floor_ms
    for episode_id, utility in replay_rank(episodes, last, t, floor):
        if utility <= 0.0:
            continue
        multiplier = 1.0 + weight * utility
        scores[episode_id] *= multiplier
        factors[episode_id] = {**factors[episode_id], "replay": {
            "value": utility, "multiplier": multiplier,
            "last_served": float(last.get(episode_id, cands[episode_id].timestamp))}}
