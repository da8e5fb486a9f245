"""Causal-link discovery from ordered episodes and knowledge-graph assertions (SPEC §7).

Owns: "event A is followed by event B within the lag window more often than
B's base rate" → a ``causal_link`` operation with the median observed lag,
the evidence count and the (cause_id, effect_id) episode pairs from which the
caller writes causal edges (seed 001's ``cause_id``). Links the knowledge
graph asserts count as support.

The test: of the n occurrences of A (those whose whole window lies inside the
observed span), k are followed by a B within ``lag``. Under "A says nothing
about B", each window holds a B with the probability that a window of that
length, dropped anywhere in the span, holds one: the measure of the union of
[b - lag, b) over B's times divided by the span. One-sided exact binomial
tail, Tarone + Holm over all ordered pairs tried, a minimum support and a
minimum lift (P(B follows A) / base). This finds precedence, not mechanism:
the rendered sentence says "is followed by", never "causes"; an LLM may judge
the candidate later (seed 001's "did X directly lead to Y?").

Pure: episodes, stored claims and asserted links in, operations out. Must
not: read or write a store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from curator.distiller import stats
from curator.distiller.features import actions_of
from curator.distiller.match import match_claims
from curator.distiller.operations import ExistingClaim, Operation, OpKind
from curator.views.render import render_against, render_causal
from grimoire.config import DistillerConfig
from grimoire.errors import ValidationError
from grimoire.logs import get_logger
from grimoire.records import Category, Claim, Episode, EpisodeType, Outcome

__all__ = ["EventKey", "KGLink", "default_event_key", "discover_links"]

log = get_logger(__name__)

EventKey = Callable[[Episode], str | None]
_RATED = frozenset({Outcome.POSITIVE, Outcome.NEGATIVE, Outcome.NEUTRAL})


class KGLink(NamedTuple):
    """A link asserted between two event types (the agent's causal.link or causal hints, or
    the knowledge graph), with how many times it was asserted."""

    cause: str
    effect: str
    evidence: int


def default_event_key(episode: Episode) -> str | None:
    """The event type of an episode: its type, and for actions what was done and how it went.

    Observations are ticks, not events (one per tick, they would follow
    everything); they are left out.
    """
    if episode.type is EpisodeType.OBSERVATION:
        return None
    if episode.type is EpisodeType.ACTION:
        done = actions_of(episode)
        name = done[0] if done else "action"
        if episode.outcome in _RATED:
            return f"action:{name}:{episode.outcome.value}"
        return f"action:{name}"
    return episode.type.value


@dataclass(frozen=True)
class _Events:
    times: dict[str, npt.NDArray[np.int64]]
    ids: dict[str, list[str]]
    start: int  # the observed span: first and last episode of the batch
    stop: int


@dataclass(frozen=True)
class _Pair:
    cause: str
    effect: str
    lag: int
    occurrences: int
    followed: int
    base: float
    lags: npt.NDArray[np.int64]
    pairs: list[tuple[str, str]]
    log_p: float = 0.0
    log_min_p: float = 0.0


def _events(episodes: Sequence[Episode], key: EventKey) -> _Events:
    labelled: dict[str, list[tuple[int, str]]] = {}
    for ep in episodes:
        label = key(ep)
        if label:
            labelled.setdefault(label, []).append((ep.timestamp, ep.id))
    start = min((e.timestamp for e in episodes), default=0)
    stop = max((e.timestamp for e in episodes), default=0)
    times: dict[str, npt.NDArray[np.int64]] = {}
    ids: dict[str, list[str]] = {}
    for label, rows in sorted(labelled.items()):
        rows.sort()
        times[label] = np.array([t for t, _ in rows], dtype=np.int64)
        ids[label] = [i for _, i in rows]
    return _Events(times, ids, start, stop)


def _base_rate(effect_times: npt.NDArray[np.int64], lag: int, start: int, end: int) -> float:
    """P(a window (t, t + lag] with t uniform in [start, end] holds an effect event)."""
    if end <= start or effect_times.size == 0:
        return 0.0
    lo = np.clip(effect_times - lag, start, end)
    hi = np.clip(effect_times, start, end)
    prev_hi = np.concatenate(([start], np.maximum.accumulate(hi)[:-1]))
    covered = np.maximum(0, hi - np.maximum(lo, prev_hi)).sum()
    return float(min(1.0, covered / (end - start)))


def _pair(ev: _Events, cause: str, effect: str, lag: int) -> _Pair | None:
    end = ev.stop - lag  # the last time at which an A's whole window is observed
    if cause not in ev.times or end <= ev.start:
        return None
    cause_t = ev.times[cause]
    inside = np.flatnonzero(cause_t <= end)  # censored: a late A's window is cut short
    effect_t = ev.times.get(effect, np.zeros(0, dtype=np.int64))
    base = _base_rate(effect_t, lag, ev.start, end)
    if inside.size == 0:
        return None
    a_t = cause_t[inside]
    if effect_t.size:
        nxt = np.searchsorted(effect_t, a_t, side="right")
        has = nxt < effect_t.size
        nxt_c = np.minimum(nxt, effect_t.size - 1)
        follows = has & (effect_t[nxt_c] - a_t <= lag)
    else:
        nxt_c = np.zeros(a_t.size, dtype=np.int64)
        follows = np.zeros(a_t.size, dtype=bool)
    where = np.flatnonzero(follows)
    lags = effect_t[nxt_c[where]] - a_t[where] if where.size else np.zeros(0, dtype=np.int64)
    pairs = [(ev.ids[cause][int(inside[i])], ev.ids[effect][int(nxt_c[i])]) for i in where]
    return _Pair(cause, effect, lag, int(inside.size), int(where.size), base, lags, pairs)


def _tested(p: _Pair, cfg: DistillerConfig) -> _Pair:
    if p.base <= 0.0 or p.base >= 1.0:
        return p  # B never (or always) in a window: nothing to compare with
    log_min_p = p.occurrences * math.log(p.base)
    rate = p.followed / p.occurrences
    passes = p.followed >= cfg.causal_min_support and rate >= cfg.causal_min_lift * p.base
    log_p = stats.binom_logsf(p.followed, p.occurrences, p.base) if passes else 0.0
    return _Pair(p.cause, p.effect, p.lag, p.occurrences, p.followed, p.base, p.lags,
                 p.pairs, log_p, log_min_p)


def _contradicted_log_p(
    p: _Pair, cfg: DistillerConfig, claimed: Claim | None = None
) -> float | None:
    """log p of "B follows A at least as often as asserted"; None without enough occurrences.

    Asserted: min_lift × base, and for a stored claim at least half its stored
    gap over the base (as for the distiller's claims, ``match``).
    """
    if p.occurrences < cfg.causal_min_support:
        return None
    least = cfg.causal_min_lift * p.base
    if claimed is not None:
        least = max(least, p.base + (claimed.effect - claimed.baseline) / 2.0)
    return stats.binom_logcdf(p.followed, p.occurrences, min(1.0, least))


def discover_links(
    episodes: Sequence[Episode],
    existing: Sequence[ExistingClaim],
    cfg: DistillerConfig,
    *,
    strategy: str | None,
    kg_links: Sequence[KGLink | tuple[str, str, int]] = (),
    event_key: EventKey = default_event_key,
) -> list[Operation]:
    """Causal-link operations (ADD / UPVOTE / EDIT / DOWNVOTE) for this batch of episodes."""
    lag = int(cfg.causal_lag_ms)
    if lag <= 0:
        raise ValidationError("must be > 0", field="distiller.causal_lag_ms")
    links = [_kg_link(link, i) for i, link in enumerate(kg_links)]
    ev = _events(episodes, event_key)
    tried: list[_Pair] = []
    for cause in ev.times:
        for effect in ev.times:
            if cause != effect:
                pair = _pair(ev, cause, effect, lag)
                if pair is not None and pair.occurrences >= cfg.causal_min_support:
                    tried.append(_tested(pair, cfg))
    found, family = _significant(tried, cfg)
    kg_support = _kg_support(links)
    by_pair = {(p.cause, p.effect): p for p in found}
    by_pair.update(_kg_only(ev, kg_support, set(by_pair), lag, cfg))
    claims, evidence = [], []
    for key in sorted(by_pair):
        p = by_pair[key]
        kg = kg_support.get(key, 0)
        # support is the occurrences of A the rate is over, so the sentence's "k of n
        # times" is (effect × support) of support; a link only asserted (no occurrence in
        # the window) counts its assertions, at rate 0 (its own words then say so).
        claims.append(Claim({"event": p.cause, "within_ms": lag}, f"event:{p.effect}",
                            "higher", p.followed / p.occurrences if p.occurrences else 0.0,
                            p.base, p.occurrences or kg, math.exp(p.log_p), strategy))
        evidence.append(_evidence(p, kg, family, cfg))
    mine = [ex for ex in existing
            if ex.claim.strategy == strategy and ex.claim.target.startswith("event:")]
    matches, unmatched = match_claims(claims, mine, cfg.edit_change)
    ops = [
        Operation(op=m.kind, category=Category.CAUSAL_LINK, claim=c,
                  content=render_causal(c, e),
                  target_entry_id=m.existing.entry_id if m.existing else None,
                  parent_episode_ids=_parents(e), tags=_tags(c), strategy=strategy,
                  evidence=e)
        for c, e, m in zip(claims, evidence, matches, strict=True)
    ]
    ops.extend(_downvotes(ev, unmatched, cfg, strategy))
    log.info("causal.run.complete", events=sum(t.size for t in ev.times.values()),
             pairs=len(tried), links=len(claims), strategy=strategy,
             **{kind.value.lower(): sum(op.op is kind for op in ops) for kind in OpKind})
    return ops


def _kg_support(links: Sequence[KGLink]) -> dict[tuple[str, str], int]:
    support: dict[tuple[str, str], int] = {}
    for link in links:
        key = (link.cause, link.effect)
        support[key] = support.get(key, 0) + link.evidence
    return support


def _kg_only(
    ev: _Events, kg_support: dict[tuple[str, str], int], found: set[tuple[str, str]], lag: int,
    cfg: DistillerConfig,
) -> dict[tuple[str, str], _Pair]:
    """Asserted links the episodes did not find: kept with their KG evidence unless contradicted.

    The graph's assertion is prior knowledge, so it needs no significance in
    this batch; it is dropped only when the episodes reject it (plenty of A,
    B after it no more often than chance allows).
    """
    out: dict[tuple[str, str], _Pair] = {}
    for (cause, effect), count in sorted(kg_support.items()):
        if (cause, effect) in found:
            continue
        pair = _pair(ev, cause, effect, lag) or _Pair(
            cause, effect, lag, 0, 0, 0.0, np.zeros(0, dtype=np.int64), [])
        against = _contradicted_log_p(pair, cfg)
        if against is not None and against <= math.log(cfg.alpha):
            log.info("causal.kg_link.contradicted", cause=cause, effect=effect)
            continue
        if pair.followed + count >= cfg.causal_min_support:
            out[(cause, effect)] = _tested(pair, cfg) if pair.occurrences else pair
    return out


def _kg_link(link: KGLink | tuple[str, str, int], index: int) -> KGLink:
    cause, effect, evidence = link
    if not isinstance(cause, str) or not isinstance(effect, str) or not cause or not effect:
        raise ValidationError("cause and effect must be non-empty strings",
                              field=f"kg_links[{index}]")
    if isinstance(evidence, bool) or not isinstance(evidence, int) or evidence < 0:
        raise ValidationError("evidence must be an integer >= 0", field=f"kg_links[{index}]")
    return KGLink(cause, effect, evidence)


def _significant(tried: list[_Pair], cfg: DistillerConfig) -> tuple[list[_Pair], int]:
    if not tried:
        return [], 0
    keep = stats.testable_weighted([p.log_min_p for p in tried], [1.0] * len(tried), cfg.alpha)
    testable = [p for p, k in zip(tried, keep, strict=True) if k]
    rejected = stats.holm([p.log_p for p in testable], cfg.alpha)
    found = [p for p, r in zip(testable, rejected, strict=True) if r and p.log_p < 0.0]
    return found, len(testable)


def _evidence(p: _Pair, kg: int, family: int, cfg: DistillerConfig) -> dict[str, Any]:
    keep = p.pairs[-cfg.max_parent_episodes:]  # the most recent pairs
    evidence: dict[str, Any] = {
        "support": p.followed + kg, "p_value": math.exp(p.log_p), "log_p": p.log_p,
        "effect": p.followed / p.occurrences if p.occurrences else 0.0,
        "baseline": p.base, "occurrences": p.occurrences, "followed": p.followed,
        "within_ms": p.lag, "lag_ms": float(np.median(p.lags)) if p.lags.size else None,
        "pairs": [list(pair) for pair in keep], "pairs_total": len(p.pairs),
        "kg_evidence": kg, "kg_confirmed": kg > 0, "test": "binomial",
        "family_size": family,
    }
    return evidence


def _parents(evidence: dict[str, Any]) -> tuple[str, ...]:
    ids: list[str] = []
    for cause, effect in evidence["pairs"]:
        ids.extend((cause, effect))
    return tuple(dict.fromkeys(ids))


def _tags(claim: Claim) -> tuple[str, ...]:
    return ("causal", str(claim.condition.get("event")), claim.target.removeprefix("event:"))


def _downvotes(
    ev: _Events, unmatched: Sequence[ExistingClaim], cfg: DistillerConfig,
    strategy: str | None,
) -> list[Operation]:
    tested: list[tuple[ExistingClaim, _Pair, float]] = []
    for ex in unmatched:
        cause, within = ex.claim.condition.get("event"), ex.claim.condition.get("within_ms")
        if not isinstance(cause, str) or isinstance(within, bool) or not isinstance(within, int):
            continue  # not a link this module wrote; leave it to its own learner
        pair = _pair(ev, cause, ex.claim.target.removeprefix("event:"), within)
        log_p = _contradicted_log_p(pair, cfg, ex.claim) if pair is not None else None
        if pair is not None and log_p is not None:
            tested.append((ex, pair, log_p))
    rejected = stats.holm([t[2] for t in tested], cfg.alpha)
    ops: list[Operation] = []
    for (ex, pair, log_p), r in zip(tested, rejected, strict=True):
        if not r:
            continue
        claim = Claim(dict(ex.claim.condition), ex.claim.target, ex.claim.direction,
                      pair.followed / pair.occurrences, pair.base, pair.occurrences,
                      math.exp(log_p), strategy)
        evidence = _evidence(pair, 0, len(tested), cfg)
        evidence.update(p_value=math.exp(log_p), log_p=log_p, test="binomial_against",
                        claimed_effect=ex.claim.effect, claimed_baseline=ex.claim.baseline)
        ops.append(Operation(
            op=OpKind.DOWNVOTE, category=Category.CAUSAL_LINK, claim=claim,
            content=render_against(claim, evidence), target_entry_id=ex.entry_id,
            parent_episode_ids=_parents(evidence), tags=_tags(claim), strategy=strategy,
            evidence=evidence,
        ))
    return ops

