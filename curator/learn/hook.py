"""The heartbeat's distill hook: ExpeL distiller + causal discovery, applied to the stores.

``distill(ctx, strategy, now)`` reads the strategy's recent episodes (for
``strategy=None``, the global ones: episodes written without a strategy) and
the stored claims of that strategy (an action written without a regime read in the regime
its moment's observations name, ``curator.claims.regimes``), runs ``curator.distiller.distill`` and
``curator.learn.causal_discovery.discover_links``, drops findings that restate
arithmetic or read an hour window that has not come round again (``filter``), and
those on a claim family the curator saw change inside the window
(``change_points``: a window that mixes two worlds is evidence for neither; such a
family is judged on the episodes since its change point instead, by a second run of
the distiller on them),
optionally lets the LLM add claims and judge new causal links
(``llm_paths``), then applies the operations
(``apply``): ADD through the admission gate, UPVOTE / DOWNVOTE as
batched votes, EDIT with a curator delta, causal links as entries plus
``discovered`` causal edges between their evidence episodes.

Votes are not applied here: ``record_votes`` adds them to the semantic meta
key ``pending_votes`` = ``{entry_id: {"up": n, "down": n}}``, and the curator
cycle consumes them once per cycle (logged as re-findings, never counted) and clears
the key.

Runs on the caller's thread (the heartbeat, or a curator phase); every write
goes to the writer thread in its own short job, so the agent's writes never
wait for a whole distillation.

Asserted links count as support for causal discovery (``asserted_links``):
the edges of the causal graph (the semantic store's ``causal_edges``) that
someone asserted between two episodes, i.e. kind ``explicit`` (the agent's
``causal.link`` and write-time ``causal_hint``) and ``kg`` (derived from the
knowledge graph). Each asserted (cause, effect) episode pair counts once
under the event labels of its two ends (``event_key``, the labels discovery
counts in), if the effect is in the window, the cause precedes it by at most
``causal_lag_ms`` (the lag the claim states) and both ends carry a label.
Edges of kind ``discovered`` do not count: discovery wrote them from its own
findings, so counting them would feed a link its own output. Nor do ``auto``
edges: similarity-based auto-linking guesses, it does not assert. The LMDB
knowledge graph itself is not read: it holds on-chain entities (pools,
tokens, contracts), not episode event types, and there is no mapping between
the two that would not be invented.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from curator.claims import change_points
from curator.claims.change_points import since_change, without_straddling
from curator.claims.regimes import with_market_regimes
from curator.distiller.distill import distill as run_distiller
from curator.distiller.operations import ExistingClaim, Operation, OpKind
from curator.learn.apply import apply_operations, curator_time
from curator.learn.causal_discovery import EventKey, KGLink, default_event_key, discover_links
from curator.learn.filter import without_echoes, without_leaks
from curator.learn.votes import VOTES_KEY, record_votes
from grimoire.config import DistillerConfig
from grimoire.context import Context
from grimoire.gate.decay import effective_confidence
from grimoire.logs import get_logger
from grimoire.records import EntryStatus, Episode, EpisodeType
from grimoire.stores.semantic.types import EdgeKind, EntryFilter

__all__ = ["LEARN_STATS_KEY", "VOTES_KEY", "asserted_links", "distill", "event_key",
           "existing_claims", "record_votes", "strategy_window"]

log = get_logger(__name__)

LEARN_STATS_KEY = "learn_stats"
# Every status but archived: a quarantined claim is still "known" (re-proposing it would
# quarantine a copy every run); an archived one may come back through the gate.
_LIVE = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED, EntryStatus.QUARANTINED)
_WINDOW_GROWTH = 4  # global window: look back at most this many times further, doubling
# Edge kinds that assert a link; DISCOVERED (discovery's own output) and AUTO (a similarity
# guess) are left out, see the module docstring.
ASSERTED_KINDS = (EdgeKind.EXPLICIT, EdgeKind.KG)
_MAX_FETCHED_CAUSES = 256  # cause episodes outside the window read per run, at most


def strategy_window(ctx: Context, strategy: str | None, n: int) -> list[Episode]:
    """The ``n`` newest episodes of ``strategy`` (None: of no strategy, global), oldest first."""
    if strategy is not None:
        return ctx.episodes.recent(n, strategy=strategy)
    # The episode index filters on a strategy name, not on its absence: read further back
    # until enough strategy-less episodes are in hand (bounded, the store may hold few).
    fetch = 2 * n
    mine: list[Episode] = []
    for _ in range(_WINDOW_GROWTH):
        batch = ctx.episodes.recent(fetch)
        mine = [ep for ep in batch if ep.strategy is None]
        if len(mine) >= n or len(batch) < fetch:
            break
        fetch *= 2
    return mine[-n:] if n else []


def existing_claims(ctx: Context, strategy: str | None, now: int) -> list[ExistingClaim]:
    """The stored structured claims of ``strategy`` (not archived), at their decayed confidence."""
    entries = ctx.semantic.list_entries(
        EntryFilter(statuses=_LIVE, strategies=(strategy,)), limit=None)
    return [ExistingClaim(e.id, e.claim, effective_confidence(e, now, ctx.config.decay))
            for e in entries if e.claim is not None]


def event_key(cfg: DistillerConfig) -> EventKey:
    """The event label causal discovery uses: regime shifts by target regime if configured."""
    def key(episode: Episode) -> str | None:
        if (cfg.causal_regime_targets and episode.type is EpisodeType.REGIME_SHIFT
                and episode.regime is not None):
            return f"regime_shift_to_{episode.regime.value}"
        return default_event_key(episode)
    return key


def asserted_links(ctx: Context, episodes: list[Episode], key: EventKey,
                   lag_ms: int) -> list[KGLink]:
    """Asserted causal edges into the window's episodes, counted per (cause, effect) label.

    Edges of ``ASSERTED_KINDS`` whose effect is a labelled episode of the
    window (one indexed query); the cause episodes outside the window are read
    one by one (the store has no batch get), at most ``_MAX_FETCHED_CAUSES`` of
    them, those of the newest effects first. Edges whose cause is not an
    episode (an entry id) are skipped, as are edges whose cause does not
    precede its effect by 0 to ``lag_ms`` (the claim says "within lag"). A
    pair asserted under two kinds counts once.
    """
    by_id = {ep.id: ep for ep in episodes}
    edges = _asserted_into(ctx, by_id, key, lag_ms)
    missing = [cause for cause in dict.fromkeys(c for c, _ in edges) if cause not in by_id]
    for cause_id in missing[:_MAX_FETCHED_CAUSES]:
        cause = ctx.episodes.get(cause_id)
        if cause is not None:
            by_id[cause_id] = cause
    counted: set[tuple[str, str]] = set()
    counts: dict[tuple[str, str], int] = {}
    for cause_id, effect in edges:
        cause = by_id.get(cause_id)
        if cause is None or (cause_id, effect.id) in counted:
            continue
        if not 0 <= effect.timestamp - cause.timestamp <= lag_ms:
            continue
        label_a, label_b = key(cause), key(effect)
        if label_a is None or label_b is None or label_a == label_b:
            continue
        counted.add((cause_id, effect.id))
        counts[(label_a, label_b)] = counts.get((label_a, label_b), 0) + 1
    if edges:
        log.debug("learn.asserted_links", edges=len(edges), counted=len(counted),
                  fetched=min(len(missing), _MAX_FETCHED_CAUSES), pairs=len(counts))
    return [KGLink(a, b, n) for (a, b), n in sorted(counts.items())]


def _asserted_into(ctx: Context, window: Mapping[str, Episode], key: EventKey,
                   lag_ms: int) -> list[tuple[str, Episode]]:
    """(cause id, effect episode) of the asserted edges into ``window``'s labelled episodes
    (observations carry no label), newest effect first."""
    labelled = [i for i, ep in window.items() if key(ep) is not None]
    edges = ctx.semantic.edges_into(labelled, kinds=ASSERTED_KINDS)
    out = [(e.cause_id, window[e.effect_id]) for e in edges
           if e.lag_ms is None or e.lag_ms <= lag_ms]  # the stored lag: a cheap pre-filter
    out.sort(key=lambda pair: (-pair[1].timestamp, pair[1].id, pair[0]))
    return out


def _rule_ops(ctx: Context, episodes: list[Episode], existing: list[ExistingClaim],
              cfg: DistillerConfig, strategy: str | None) -> list[Operation]:
    ops = run_distiller(episodes, existing, cfg, strategy=strategy)
    key = event_key(cfg)
    links = asserted_links(ctx, episodes, key, int(cfg.causal_lag_ms))
    ops.extend(discover_links(episodes, existing, cfg, strategy=strategy, event_key=key,
                              kg_links=links))
    return ops


def _since_changes(episodes: list[Episode], existing: list[ExistingClaim],
                   cfg: DistillerConfig, strategy: str | None, points: Mapping[str, int],
                   ) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """The operations on each changed family from the episodes since its change point alone
    (one distiller run per change point inside the window), filtered as the window's are;
    and the dropped ones with the reason."""
    kept: list[Operation] = []
    dropped: list[tuple[Operation, str]] = []
    if not episodes:
        return kept, dropped
    for at in since_change(points, episodes[0].timestamp, episodes[-1].timestamp):
        after = [ep for ep in episodes if ep.timestamp >= at]
        found = [op for op in run_distiller(after, existing, cfg, strategy=strategy)
                 if points.get(change_points.family(op.claim)) == at]
        found, leaks = without_leaks(found, cfg, timestamps=[ep.timestamp for ep in after])
        found, echoes = without_echoes(found, after, cfg)
        kept.extend(found)
        dropped.extend(leaks + echoes)
    return kept, dropped


def _record_stats(ctx: Context, strategy: str | None, summary: Mapping[str, Any]) -> None:
    ms = float(summary["ms"])
    with ctx.state_lock:
        stats = ctx.extras.setdefault(LEARN_STATS_KEY, {"runs": 0, "total_ms": 0.0,
                                                        "max_ms": 0.0, "last": {}})
        stats["runs"] += 1
        stats["total_ms"] += ms
        stats["max_ms"] = max(stats["max_ms"], ms)
        stats["last"][strategy or ""] = dict(summary)


def distill(ctx: Context, strategy: str | None, now: int) -> dict[str, Any]:
    """Distil ``strategy``'s recent episodes and apply the operations; returns their counts.

    It learns at the data's own time, the newest episode it reads (``now``, the caller's
    clock, only when there is none): a backfilled or replayed history is learned as a live
    one, whatever the clock reads (SPEC §13). That time never runs behind the curator's
    last cycle: episodes delivered behind it (one strategy's backfill) are learned at the
    cycle's time, so what the learner writes is dated on the cycles' one clock (an entry
    is not made already decayed, and a change recorded under the completed cycle's number
    is not dated before that cycle)."""
    started = time.perf_counter()
    cfg = ctx.config.distiller
    # an action written without a regime is read in the regime its moment's record names
    episodes = with_market_regimes(ctx, strategy_window(ctx, strategy, cfg.window_episodes))
    if episodes:
        now = max(max(e.timestamp for e in episodes), curator_time(ctx) or 0)
    existing = existing_claims(ctx, strategy, now)
    read = time.perf_counter()
    ops = _rule_ops(ctx, episodes, existing, cfg, strategy)
    learned = time.perf_counter()

    from curator.learn.llm_paths import paths_of  # the LLM is optional; import only its holder

    paths = paths_of(ctx)
    llm_counts: dict[str, int] = {}
    relationships: dict[str, str] = {}
    if paths is not None:
        ops, llm_counts, relationships = paths.refine(ops, episodes, existing, cfg, strategy)
    ops, dropped = without_leaks(ops, cfg, timestamps=[ep.timestamp for ep in episodes])
    ops, echoes = without_echoes(ops, episodes, cfg)
    dropped.extend(echoes)
    points = change_points.load(ctx)
    ops, straddling = without_straddling(ops, points,
                                         episodes[0].timestamp if episodes else None)
    dropped.extend(straddling)
    since_ops, since_dropped = _since_changes(episodes, existing, cfg, strategy, points)
    ops.extend(since_ops)
    dropped.extend(since_dropped)
    for op, reason in dropped:
        log.debug("learn.op.dropped", op=op.op.value, claim=op.claim.key, reason=reason)
    refined = time.perf_counter()
    applied = apply_operations(ctx, ops, episodes, now,
                               utility=paths.utility_scores if paths is not None else None,
                               relationships=relationships)
    summary: dict[str, Any] = {
        "episodes": len(episodes),
        "ops": {kind.value: sum(op.op is kind for op in ops) for kind in OpKind},
        **applied,
        "dropped": len(dropped),
        **llm_counts,
        "read_ms": round((read - started) * 1000, 2),
        "learn_ms": round((learned - read) * 1000, 2),
        "llm_ms": round((refined - learned) * 1000, 2),
        "apply_ms": round((time.perf_counter() - refined) * 1000, 2),
        "ms": round((time.perf_counter() - started) * 1000, 2),
    }
    _record_stats(ctx, strategy, summary)
    log.info("learn.distill.complete", strategy=strategy,
             **{k: v for k, v in summary.items() if k != "ops"}, **summary["ops"])
    return summary
