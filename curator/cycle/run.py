"""The curator cycle (SPEC §8): every step a named phase that reports its counts.

``run_cycle(ctx, now)`` runs one cycle; the heartbeat calls it every
``curator.every_ticks`` ticks (``curator_hook``) and ``curator.run`` forces
one. Phases, in SPEC order:

1. ``validate``      predictions of stored claims vs new episodes; netted votes
2. ``distil``        ExpeL distiller + causal discovery (``curator.learn.hook``, if installed)
   ``compress``      coherent episode clusters in one regime → insights
   ``incidents``     critical safety incidents → ordinary critical warnings (SPEC §13)
3. ``promote``       candidates that reached their threshold → active
   ``parameterize``  active cost/gain insights → derived heuristics / warnings (promoted
                     at once when they qualify)
4. ``decay``         measure this cycle's decay; GrimoireDecay event
5. ``demote_prune``  active < 0.4 → demoted; < 0.1 for 3 cycles or junk → archived
6. ``causal``        causal links vs the cause occurrences that closed; edges, evidence
   ``graph``         the knowledge graph from the episodes: facts, co-occurrence (``graph``)
7. ``quarantine``    release / hold / reject held entries
   ``compact``       compact the episodic store
8. ``summaries``     L1 / L2 hierarchical summaries, MUS pruning
   ``regions``       region MDP update, persisted in meta
   ``sentences``     each entry's sentence re-stated from its current numbers (so every
                     view shows the figures PLAYBOOK.md does)
9. ``playbook``      compile PLAYBOOK.md and replace it atomically

Then the steps wired from above in ``ctx.cycle_hooks`` run, each under its own name (the
Clade exchange, ``clade``, when ``clade.uri`` is set); one that fails is reported in the
summary and does not abort the cycle.

Each phase reads a snapshot on the calling thread and applies its changes on
the writer thread in short transactions, so the agent is never stalled for
the length of a cycle. One cycle runs at a time per context. The cycle's
summary is stored in meta ``last_curator_cycle`` and CuratorCycleComplete
{entries_pruned, entries_promoted, heuristics_proposed} is emitted. A phase
that fails aborts the cycle with its error (logged): the cycle state is not
advanced, so the next cycle sees the same episodes again.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from curator.cycle.bloodstain import incident_warnings
from curator.cycle.evidence import cross_reference_causal, validate_predictions
from curator.cycle.graph import fill_graph
from curator.cycle.learn import compress, distil
from curator.cycle.lifecycle import (
    compact_episodes,
    decay,
    demote_and_prune,
    prune_edges,
    review_quarantine,
)
from curator.cycle.promote import parameterize, promote
from curator.cycle.sentences import refresh_sentences
from curator.cycle.state import STATE_KEY, Cycle, CycleState, data_time, entries, load_window
from curator.cycle.summaries import hierarchical_summaries, update_regions
from grimoire.context import Context, CycleHook
from grimoire.logs import get_logger

__all__ = ["LAST_CYCLE_KEY", "PHASES", "curator_hook", "cycle_lock", "publish_playbook",
           "run_cycle"]

log = get_logger(__name__)

LAST_CYCLE_KEY = "last_curator_cycle"
_LOCK_KEY = "curator.cycle_lock"
_LOCK_GUARD = threading.Lock()

Phase = Callable[[Cycle], dict[str, Any]]


def publish_playbook(cy: Cycle) -> dict[str, Any]:
    """Step 9: compile PLAYBOOK.md from the store and replace the file atomically."""
    from curator.views.playbook import playbook_counts, write_playbook

    counts = playbook_counts(cy.ctx)
    counts["curator_cycles"] = cy.number
    return write_playbook(cy.ctx, now=cy.now, tick=cy.ctx.tick, counts=counts,
                          snapshot=entries(cy), cycle=cy.number)


PHASES: tuple[tuple[str, Phase], ...] = (
    ("validate", validate_predictions),
    ("distil", distil),
    ("compress", compress),
    ("incidents", incident_warnings),
    ("promote", promote),
    ("parameterize", parameterize),
    ("decay", decay),
    ("demote_prune", demote_and_prune),
    ("causal", cross_reference_causal),
    ("edges", prune_edges),
    ("graph", fill_graph),
    ("quarantine", review_quarantine),
    ("compact", compact_episodes),
    ("summaries", hierarchical_summaries),
    ("regions", update_regions),
    ("sentences", refresh_sentences),
    ("playbook", publish_playbook),
)


def cycle_lock(ctx: Context) -> threading.Lock:
    """The lock a curator cycle holds (one per context); a forget takes it too
    (``curator.api.forget_apply``), so it never runs in the middle of a cycle, and a dream
    slot skips while it is held."""
    with _LOCK_GUARD:
        lock = ctx.extras.get(_LOCK_KEY)
        if lock is None:
            lock = ctx.extras[_LOCK_KEY] = threading.Lock()
    assert isinstance(lock, type(_LOCK_GUARD))
    return lock


def _save(ctx: Context, state: CycleState, summary: Mapping[str, Any]) -> None:
    with ctx.semantic.transaction():
        ctx.semantic.set_meta(STATE_KEY, state.to_dict())
        ctx.semantic.set_meta(LAST_CYCLE_KEY, dict(summary))


def _int(phases: Mapping[str, Mapping[str, Any]], phase: str, key: str) -> int:
    value = phases.get(phase, {}).get(key, 0)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def run_cycle(ctx: Context, now: int | None = None) -> dict[str, Any]:
    """Run one curator cycle; returns its summary. ``now`` is the clock's reading (default:
    the context's clock); the cycle runs at the data's own time (``data_time``: the newest
    episode seen), which is the clock's only before any episode was written."""
    clock_now = ctx.now() if now is None else int(now)
    with cycle_lock(ctx):
        started = time.perf_counter()
        previous = CycleState.load(ctx)
        window = load_window(ctx, previous.watermark, ctx.config.curator.window_episodes)
        now = data_time(previous, window, clock_now)
        cy = Cycle(ctx=ctx, now=now, number=previous.cycle + 1, previous=previous,
                   window=window)
        phases: dict[str, dict[str, Any]] = {}
        for name, phase in PHASES:
            t0 = time.perf_counter()
            try:
                counts = phase(cy)
            except Exception:
                log.exception("curator.cycle.failed", cycle=cy.number, phase=name)
                raise
            phases[name] = {**counts, "ms": round((time.perf_counter() - t0) * 1000, 2)}
        for name, hook in ctx.cycle_hooks:
            t0 = time.perf_counter()
            phases[name] = {**_hooked(name, hook, ctx, now, cy.number),
                            "ms": round((time.perf_counter() - t0) * 1000, 2)}
        summary: dict[str, Any] = {
            "cycle": cy.number, "tick": ctx.tick, "now": now, "episodes": len(window),
            "entries_promoted": (_int(phases, "promote", "promoted")
                                 + _int(phases, "parameterize", "promoted")),
            "entries_demoted": _int(phases, "demote_prune", "demoted"),
            "entries_pruned": (_int(phases, "demote_prune", "pruned")
                               + _int(phases, "quarantine", "rejected")
                               + _int(phases, "summaries", "mus_pruned")),
            "entries_decayed": _int(phases, "decay", "entries_decayed"),
            "heuristics_proposed": _int(phases, "parameterize", "proposed"),
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            "phases": phases,
        }
        state = CycleState(cycle=cy.number, last_now=now, watermark=cy.watermark,
                           last_l2_at=cy.notes.get("last_l2_at", previous.last_l2_at))
        ctx.writer.call(functools.partial(_save, ctx, state, summary))
        ctx.events.emit("CuratorCycleComplete", now,
                        entries_pruned=summary["entries_pruned"],
                        entries_promoted=summary["entries_promoted"],
                        heuristics_proposed=summary["heuristics_proposed"])
        log.info("curator.cycle", cycle=cy.number, tick=ctx.tick, episodes=len(window),
                 proposed=summary["heuristics_proposed"],
                 promoted=summary["entries_promoted"], demoted=summary["entries_demoted"],
                 retired=summary["entries_pruned"], ms=round(summary["duration_ms"]),
                 playbook=_playbook_line(phases.get("playbook", {})))
        return summary


def _hooked(name: str, hook: CycleHook, ctx: Context, now: int, number: int
            ) -> dict[str, Any]:
    """A step wired from above (``ctx.cycle_hooks``: the Clade exchange). It talks to the
    outside world, which may be down: its failure is logged and reported in the cycle's
    summary, and the cycle (what it learned) stands; the step retries next cycle."""
    try:
        return dict(hook(ctx, now, number))
    except Exception as exc:
        log.warning("curator.cycle.hook.failed", hook=name, cycle=number, error=repr(exc))
        return {"error": f"{type(exc).__name__}: {exc}"}


def _playbook_line(result: Mapping[str, Any]) -> str:
    """``PLAYBOOK.md updated: 2 warnings, 1 heuristic`` (what the file now shows)."""
    from playbook import updated_line

    return updated_line(result.get("selected") or {})


BACKGROUND_KEY = "curator.background"
_RUNNING_KEY = "curator.running"


def curator_hook(ctx: Context, now: int) -> Mapping[str, Any]:
    """The heartbeat's curator hook (``Context.curator_hook``).

    In-process (tests, a program's ``tick``) the cycle runs on the caller's thread.
    The daemon puts an executor in ``ctx.extras[BACKGROUND_KEY]``: the cycle then runs
    on it, beside the heartbeat (its phases read snapshots and write through the single
    writer in short transactions), so a long cycle never makes the heartbeat skip ticks.
    A cycle still running when the next is due is not doubled: that one is skipped.
    """
    background = ctx.extras.get(BACKGROUND_KEY)
    if background is None:
        return run_cycle(ctx, now)
    running = ctx.extras.get(_RUNNING_KEY)
    if running is not None and not running.done():
        return {"skipped": "the previous cycle is still running"}
    ctx.extras[_RUNNING_KEY] = background.submit(_background_cycle, ctx, now)
    return {"started": "in the background"}


def _background_cycle(ctx: Context, now: int) -> None:
    try:
        run_cycle(ctx, now)
    except Exception as exc:  # logged with its traceback (run_cycle logs the phase)
        log.error("curator.cycle.failed", error=repr(exc))
