"""The verdict on a stored claim from episodes the curator has not seen yet (SPEC §8 steps 1, 6).

Owns the verdict rule for metric and outcome-rate claims (``judge_claim``), the
levels a metric claim is judged against, and ``reversal``; where a condition holds
is ``curator.claims.window``'s, event links are ``curator.claims.causal``'s. Pure:
episodes and claims in, verdicts out; it never reads a store or a clock.

The verdict rule. A claim says that under its condition the target sits at
``effect`` rather than at ``baseline`` (a metric's mean, an outcome's rate, the
rate at which event B follows event A). The new episodes that match the
condition give an observed value; with at least ``min_support`` of them, the
prediction was *right* when the observation lies on the claim's side of the
midpoint between effect and baseline, *wrong* when it lies on the other side.
The midpoint is the decision boundary between "the claim holds" and "the
base rate holds" when both are equally likely a priori, so one unlucky
episode cannot flip a well-supported window and a real reversal flips it at
once. A metric band is read at the claim's own ``band_cut`` (the number its
sentence states: "when gas is above 31 gwei"), so the episodes in the band
are judged against those outside it like any other condition's. Conditions
this module cannot read (a band with no cut, a term from another extractor)
give no verdict: the claim is left to its own learner.

How much a verdict weighs: every ``min_support`` matching episodes are one
prediction (at most ``max_predictions`` per cycle), all judged by the pooled
window. Forty cheap-window observations are more evidence than three, and
the learners vote once per distillation run (several times a cycle): a
single +0.05 / −0.10 per cycle would leave the curator's own evidence
unheard, while judging the pool (not each group) keeps a true but modest
claim from being worn down by the noise of small groups.

``reversal`` turns a decisively wrong verdict into the claim the new
episodes make instead (the same condition and target, the other direction),
when the observation lies beyond the baseline by at least half the original
gap and by the learner's own minimum effect: the world changed, and the
curator has the evidence in hand before a long learning window catches up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from curator.claims.window import (
    ATTRIBUTES,
    NEGATIVE_RATE,
    POSITIVE_RATE,
    EpisodeWindow,
    Mask,
    claim_mask,
    scope,
)
from curator.distiller import stats
from grimoire.records import Claim

__all__ = ["Verdict", "against_rest", "causal_verdict", "judge_claim", "midpoint_verdict",
           "predictions", "rate_alternative", "rate_likelihood_ratio", "reference_level",
           "reversal", "stratified_level"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the new episodes judged one claim: right, wrong or undecided (None)."""

    right: bool | None
    n: int
    observed: float | None
    effect: float
    baseline: float
    target: str
    predictions: int = 0  # how many predictions this verdict counts for (0 when undecided)
    episode_ids: tuple[str, ...] = ()  # the matching episodes (metric / rate claims)
    reversed: bool = False  # wrong, and the opposite decisively holds (``reversal``)
    # A metric claim's level outside its condition (``reference_level``); None: too few
    # episodes outside it to say, and the claim is judged against its stored baseline.
    reference: float | None = None
    # log p of "the condition's episodes lie on the other side of the rest of this window"
    # (``against_rest``); 0 when there is too little to test. Decides reversals.
    log_p_against: float = 0.0
    # A metric claim's level outside its condition within this same window (the hours and
    # market the new episodes saw); None with fewer than ``min_support`` such episodes.
    rest: float | None = None
    # An outcome rate's alternative to its baseline (``rate_alternative``); None: the effect.
    holds_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "right": self.right, "n": self.n, "predictions": self.predictions,
            **({"reversed": True} if self.reversed else {}),
            "observed": None if self.observed is None else round(self.observed, 6),
            "effect": round(self.effect, 6), "baseline": round(self.baseline, 6),
            "target": self.target,
            **({} if self.reference is None else {"reference": round(self.reference, 6)}),
            **({"holds_at": round(self.holds_at, 6)}
               if self.holds_at is not None and self.holds_at != self.effect else {}),
            **({"log_p_against_rest": round(self.log_p_against, 4)}
               if self.log_p_against < 0 else {}),
        }


def midpoint_verdict(observed: float, effect: float, baseline: float) -> bool | None:
    """True when ``observed`` is on the claim's side of the effect/baseline midpoint."""
    gap = effect - baseline
    if gap == 0 or not np.isfinite(observed):
        return None
    side = (observed - (effect + baseline) / 2.0) * (1.0 if gap > 0 else -1.0)
    if side == 0:
        return None
    return bool(side > 0)


def causal_verdict(followed: int, n: int, effect: float, baseline: float, level: float,
                   *, wrong_by_ratio: bool = False) -> bool | None:
    """Right / wrong / undecided for "B follows A at ``effect`` (vs ``baseline``)" on ``n``
    occurrences, ``followed`` of them followed. The side of the midpoint decides which,
    and only when chance could hardly have put it there: right needs P(≥ followed | n,
    baseline) ≤ ``level``, wrong P(≤ followed | n, effect) ≤ ``level``. A lead seen a few
    times a day (1 of 5 followed, claimed 40%: P = 0.34) is undecided, not wrong: pooled
    again, it is counted once its occurrences say something.

    With ``wrong_by_ratio`` (an outcome-rate rule, ``judge_claim``), wrong needs the
    episodes to be at least 1 / ``level`` times likelier at the baseline, or at the rate
    they show when that lies past the baseline, than at ``effect`` (a likelihood ratio,
    ``rate_likelihood_ratio``) instead: the verdict chooses between "no effect (or the
    opposite one)" and "the effect it asserts", and a tail at ``effect`` alone says only
    that ``effect`` is unlikely, which a rule whose rate sits right at ``effect`` hears
    from ``level`` of its windows: judged every cycle, such a rule was called wrong by one
    of them sooner or later and left PLAYBOOK.md although no window showed "no effect" (a
    90%-win rule asserted at 90% against 70%: 17 of 23 wins has P = 0.023 at 90%, and is
    10 times, not 20, likelier at 70%; a warning learned at 79% against 40%, 6 losses of
    12: P = 0.02 at 79%, 9 times likelier at 40%). A window between the two rates reaches
    the ratio under ``effect`` with probability at most ``level`` (Wald); one past the baseline
    (the world reversed: 2 wins of 5, 43 times likelier at 40% than at 90%) is decided
    about as soon as the tail decided it (a test sums the "wrong" windows' mass under
    ``effect`` for several rates and window sizes: at most ``level`` each)."""
    if n <= 0:
        return None
    side = midpoint_verdict(followed / n, effect, baseline)
    if side is None or not 0.0 <= baseline <= 1.0 or not 0.0 <= effect <= 1.0:
        return side
    if wrong_by_ratio and not side:
        shown = followed / n
        past = shown < baseline if effect > baseline else shown > baseline
        ratio = rate_likelihood_ratio(followed, n, shown if past else baseline, effect)
        return False if ratio >= -np.log(level) else None
    # The tail points the way the claim does: a claimed rate above its baseline is right
    # when this many or more would be rare under the baseline; one below it (a reversed
    # "loses less often" rule) when this many or fewer would be.
    up = effect > baseline
    if side:
        log_p = (stats.binom_logsf(followed, n, baseline) if up
                 else stats.binom_logcdf(followed, n, baseline))
    else:
        log_p = (stats.binom_logcdf(followed, n, effect) if up
                 else stats.binom_logsf(followed, n, effect))
    return side if log_p <= np.log(level) else None


def rate_likelihood_ratio(k: int, n: int, rate: float, other: float) -> float:
    """log of P(k of n | ``rate``) / P(k of n | ``other``) (``stats.binom_logpmf``): +inf
    when ``other`` cannot give k of n and ``rate`` can, 0 when neither can."""
    up, down = stats.binom_logpmf(k, n, rate), stats.binom_logpmf(k, n, other)
    if down == stats.LOG_ZERO:
        return 0.0 if up == stats.LOG_ZERO else np.inf
    return float(up - down)


def predictions(right: bool | None, n: int, min_support: int, cap: int) -> int:
    return 0 if right is None else max(1, min(cap, n // max(1, min_support)))
def judge_claim(window: EpisodeWindow, claim: Claim, min_support: int,
                max_predictions: int = 1, level: float | None = None,
                reference: EpisodeWindow | None = None,
                strata: Sequence[str] = (), least_gap: float = 0.0) -> Verdict | None:
    """The verdict on a metric or outcome-rate claim; None when the claim is not of that kind
    or its condition cannot be read. Fewer than ``min_support`` matching episodes: undecided.

    A metric claim is judged against the level outside its condition (``reference_level``
    over ``reference``, default ``window``) rather than the baseline stored when it was
    learned: "gas is 6 gwei between 02:00 and 04:00 (vs 24)" is right when gas there still
    sits at least half of its 18-gwei gap below the level at the other hours now, whatever
    the market's level did since. The verdict also carries ``against_rest``: how far the condition's
    episodes lie on the other side of the rest of ``window`` (decides reversals).

    An hour-of-day claim is judged within ``strata`` (``distiller.hour_strata``, as it was
    learned): each new episode of the window is compared with the level outside the window
    in its own stratum (its regime), so that a day whose afternoon fell in a calm regime
    is not taken for an afternoon that stopped being busy (direct standardisation).

    An outcome-rate claim, with ``least_gap`` (``distiller.min_rate_gap``) > 0, is judged on
    whether its rule still holds, not on whether the episodes reproduce the rate it was
    learned at (``rate_alternative``). Either way it is wrong only when its episodes are
    likelier at the baseline (or at the rate they show past it) than at the rate it is
    judged at by 1 / ``level`` (``causal_verdict``'s ``wrong_by_ratio``)."""
    mask = claim_mask(window, claim)
    if mask is None:
        return None
    kind, _, name = claim.target.partition(":")
    level_outside: float | None = None
    rest_level: float | None = None
    log_p_against = 0.0
    if kind == "metric" and name:
        column = window.metrics.get(name)
        rows = mask & ~np.isnan(column) if column is not None else np.zeros(window.size, bool)
        values = column[rows] if column is not None else np.zeros(0)
        observed = float(values.mean()) if values.size else None
        n = int(values.size)
        level_outside = reference_level(reference if reference is not None else window,
                                        claim, min_support)
        if level_outside is not None and values.size:
            level_outside = stratified_level(
                reference if reference is not None else window, window, claim, rows,
                strata, min_support, level_outside)
        rest_level = reference_level(window, claim, min_support)
        log_p_against = against_rest(window, claim, mask)
    elif claim.target in (NEGATIVE_RATE, POSITIVE_RATE):
        action = claim.condition.get("action")
        population = mask & window.rated
        if isinstance(action, str) and action not in window.actions:
            population = np.zeros(window.size, dtype=bool)
        n = int(population.sum())
        hits = window.negative if claim.target == NEGATIVE_RATE else window.positive
        k = int((population & hits).sum())
        observed = float(k / n) if n else None
        rows = population
        log_p_against = against_rest(window, claim, mask)
        if level is not None and observed is not None and n >= min_support:
            # a rate on a handful of actions is a coin flip at the midpoint: decided only
            # when chance hardly explains it (as a causal link's occurrences)
            holds = rate_alternative(claim, least_gap)
            right = causal_verdict(k, n, holds, claim.baseline, level, wrong_by_ratio=True)
            if not claim.states_its_direction():
                right = False
            return Verdict(right, n, observed, claim.effect, claim.baseline, claim.target,
                           predictions(right, n, min_support, max_predictions),
                           tuple(window.episodes[i].id for i in np.flatnonzero(rows)),
                           log_p_against=log_p_against, holds_at=holds)
    else:
        return None
    right = None
    if observed is not None and n >= min_support:
        if level_outside is not None:
            # the claimed gap, measured from the level outside the condition now
            gap = claim.effect - claim.baseline
            right = midpoint_verdict(observed, level_outside + gap, level_outside)
        else:
            right = midpoint_verdict(observed, claim.effect, claim.baseline)
        if not claim.states_its_direction():
            # Its running numbers (the evidence counted so far) no longer show what it
            # says ("negative outcomes higher: 34% vs 36% overall"): each new judgement
            # against it until it leaves, never 'right' by a midpoint on the wrong side.
            right = False
    return Verdict(right, n, observed, claim.effect, claim.baseline, claim.target,
                   predictions(right, n, min_support, max_predictions),
                   tuple(window.episodes[i].id for i in np.flatnonzero(rows)),
                   reference=level_outside, log_p_against=log_p_against, rest=rest_level)


def rate_alternative(claim: Claim, least_gap: float) -> float:
    """The rate an outcome-rate claim's verdict weighs against its baseline: what the claim
    asserts, as the learners test it (``distiller.match``): a gap of at least ``least_gap``
    (``distiller.min_rate_gap``) or half its own, whichever is larger; the claim's own
    effect when ``least_gap`` is 0 or its gap is no larger than that.

    Why not the effect: a learner states the most extreme of many hypotheses it tested, so
    the rate it states is inflated by the selection (a warning learned at 93% on 15 swaps
    whose rate is 80%), and a rule weighed against that rate is worn down by ordinary
    windows (6 of 11 swaps lost: below the 81/40 midpoint, P = 0.05 under 81%) although
    every window showed the rule (losses above the 40% base). Whether the episodes still
    show the gap the rule asserts is what makes it right or wrong; the rate it states is
    kept honest apart: every episode a verdict counts joins the claim's running rate
    (``vote_change``)."""
    gap = claim.effect - claim.baseline
    least = max(least_gap, abs(gap) / 2.0)
    if least_gap <= 0.0 or abs(gap) <= least:
        return claim.effect
    return claim.baseline + (least if gap > 0 else -least)


def reference_level(window: EpisodeWindow, claim: Claim, min_support: int) -> float | None:
    """The mean of a metric claim's target over the episodes of its scope *outside* its
    condition (the level the claim is a difference from); None with fewer than
    ``min_support`` of them, or for a claim that is not about a metric."""
    kind, _, name = claim.target.partition(":")
    column = window.metrics.get(name) if kind == "metric" else None
    mask = claim_mask(window, claim)
    if column is None or mask is None:
        return None
    outside = column[scope(window, claim) & ~mask & ~np.isnan(column)]
    return float(outside.mean()) if outside.size >= max(1, min_support) else None


def stratified_level(reference: EpisodeWindow, window: EpisodeWindow, claim: Claim,
                     rows: Mask, strata: Sequence[str], min_support: int,
                     overall: float) -> float:
    """The level outside an hour-of-day claim's window expected for ``rows`` of ``window``
    given their strata: the mean, over those rows, of the level outside the condition in
    ``reference`` among episodes of the same stratum (``overall`` for a stratum with fewer
    than ``min_support`` such episodes). ``overall`` itself for any other claim, or one that
    names a stratum attribute (its episodes share one stratum)."""
    names = [n for n in strata if n in ATTRIBUTES]
    kind, _, name = claim.target.partition(":")
    column = reference.metrics.get(name) if kind == "metric" else None
    if (not names or column is None or "hour_window" not in claim.condition
            or any(n in claim.condition for n in names)):
        return overall
    mask = claim_mask(reference, claim)
    if mask is None:
        return overall
    outside = scope(reference, claim) & ~mask & ~np.isnan(column)
    ref_keys = list(zip(*(reference.attrs[n] for n in names), strict=True))
    sums: dict[tuple[Any, ...], list[float]] = {}
    for i in np.flatnonzero(outside):
        acc = sums.setdefault(ref_keys[i], [0.0, 0.0])
        acc[0] += float(column[i])
        acc[1] += 1.0
    levels = {key: total / count for key, (total, count) in sums.items()
              if count >= max(1, min_support)}
    keys = list(zip(*(window.attrs[n] for n in names), strict=True))
    expected = [levels.get(keys[i], overall) for i in np.flatnonzero(rows)]
    return float(np.mean(expected)) if expected else overall


def against_rest(window: EpisodeWindow, claim: Claim, mask: Mask) -> float:
    """log p of "the claim's condition now lies on the *other* side of the rest of this same
    window": one-sided, in the reversed direction. A metric: Welch's t of the condition's
    values against the scope's others. An outcome rate: Fisher's exact test of the
    condition's actions against the other rated actions of the same kind (the claim's
    action, if it names one). 0 (no evidence) with fewer than 2 values a side.

    The rest of the *same* window shares the condition's hours, market and regime
    labels: episodes that merely carry a noisy label (a 'crisis' tick in a calm
    afternoon), or a market that moved as a whole, look like the rest and are no
    evidence that the claim turned round."""
    within = scope(window, claim)
    gap_up = claim.effect > claim.baseline
    kind, _, name = claim.target.partition(":")
    if kind == "metric":
        column = window.metrics.get(name)
        if column is None:
            return 0.0
        present = ~np.isnan(column)
        a, b = column[mask & present], column[within & ~mask & present]
        if a.size < 2 or b.size < 2:
            return 0.0
        t, df = stats.welch_t(float(a.mean()), float(a.var(ddof=1)), int(a.size),
                              float(b.mean()), float(b.var(ddof=1)), int(b.size))
        if not np.isfinite(t):
            return 0.0
        return stats.t_logsf(-t if gap_up else t, df)
    if claim.target not in (NEGATIVE_RATE, POSITIVE_RATE):
        return 0.0
    population = within & window.rated
    action = claim.condition.get("action")
    if isinstance(action, str):
        found = window.actions.get(action)
        population = population & found if found is not None else population & False
    cell, rest = population & mask, population & ~mask
    n, m = int(cell.sum()), int(rest.sum())
    if n < 2 or m < 2:
        return 0.0
    hits = window.negative if claim.target == NEGATIVE_RATE else window.positive
    k, good = int((cell & hits).sum()), int((population & hits).sum())
    total = n + m
    # reversed: the condition's actions have the outcome *less* often than the rest when
    # the claim says more often, and the other way round
    return (stats.hypergeom_logcdf(k, total, good, n) if gap_up
            else stats.hypergeom_logsf(k, total, good, n))


def reversal(claim: Claim, verdict: Verdict, *, min_support: int, min_effect: float,
             min_rate_gap: float) -> Claim | None:
    """The claim the new episodes make when they reverse ``claim``, else None.

    Needs a wrong verdict on at least ``2 × min_support`` episodes, an observation
    past the baseline (opposite side from the effect) by at least half the claimed gap,
    and an effect of the learner's own minimum size: relative ``min_effect`` for a
    metric, ``min_rate_gap`` for a rate. Event links are not reversed; a band claim turns
    round at its own cut ("swaps lose *less* often when gas is above 31 gwei").
    """
    if (verdict.right is not False or verdict.observed is None
            or verdict.n < 2 * min_support or claim.target.startswith("event:")):
        return None
    metric = claim.target.startswith("metric:")
    # A metric claim turns round only against the level outside its condition now (its
    # reference): a window that went dear while the whole market did has not reversed.
    base = verdict.reference if metric else claim.baseline
    if base is None:
        return None
    gap = claim.effect - claim.baseline
    beyond = (base - verdict.observed) * (1.0 if gap > 0 else -1.0)
    if gap == 0 or beyond < abs(gap) / 2:
        return None
    if metric:
        if base == 0 or beyond / abs(base) < min_effect:
            return None
    elif beyond < min_rate_gap:
        return None
    # The reversed claim states the gap its own window shows (the same hours and market:
    # a reversal seen in a dear crisis afternoon is "62 vs 40 then", not "62 vs a day's 29",
    # which no calm day could confirm again).
    stated = verdict.rest if metric and verdict.rest is not None else base
    if (stated - verdict.observed) * (1.0 if gap > 0 else -1.0) <= 0:
        stated = base
    return Claim(condition=dict(claim.condition), target=claim.target,
                 direction="lower" if gap > 0 else "higher", effect=verdict.observed,
                 baseline=stated, support=verdict.n, strategy=claim.strategy,
                 band_cut=claim.band_cut)

