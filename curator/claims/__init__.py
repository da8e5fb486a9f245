"""Judging stored claims against episodes the curator has not seen yet (SPEC §8 steps 1, 6).

``window``: the episodes as columns and where a claim's condition holds; ``judge``:
the verdict rule for metric and outcome-rate claims, and reversals; ``causal``: the
verdict on event links; ``change_points``: where a reversal shows the world changed
under a claim, and the window learners use after it; ``regimes``: the regime an action
written without one is read in (its moment's observations). The names below are the package's
public surface.
"""

from curator.claims.causal import CausalCheck, EventIndex, check_causal
from curator.claims.judge import (
    Verdict,
    against_rest,
    causal_verdict,
    judge_claim,
    midpoint_verdict,
    rate_alternative,
    rate_likelihood_ratio,
    reference_level,
    reversal,
    stratified_level,
)
from curator.claims.window import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    EpisodeWindow,
    actions_of,
    band_mask,
    claim_mask,
    condition_mask,
    event_key,
    event_keys,
    last_pass_start,
    term_field,
)

__all__ = [
    "NEGATIVE_RATE",
    "POSITIVE_RATE",
    "CausalCheck",
    "EpisodeWindow",
    "EventIndex",
    "Verdict",
    "actions_of",
    "against_rest",
    "band_mask",
    "causal_verdict",
    "check_causal",
    "claim_mask",
    "condition_mask",
    "event_key",
    "event_keys",
    "judge_claim",
    "last_pass_start",
    "midpoint_verdict",
    "rate_alternative",
    "rate_likelihood_ratio",
    "reference_level",
    "reversal",
    "stratified_level",
    "term_field",
]
