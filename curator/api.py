"""The curator's one entry point: what the grimoire facade calls, and nothing else.

The facade (``grimoire.grimoire``) reaches the curator only through this module:

- ``install(ctx)``: wire the curator's learners on an opened context: Reflexion after each
  durable action episode (after the facade's own post-write hooks), the distiller on the
  heartbeat, the optional LLM paths when an LLM is configured, the 50-tick curator cycle;
  and publish the curator's read-outs in ``ctx.stats`` for ``status``'s health metrics
  (``learning``, ``reflexion``, ``prediction_deviations``), so that the metrics read them
  without importing the curator;
- ``run_cycle(ctx)``: one curator cycle now (``curator.run``);
- ``forget_plan`` / ``forget_apply``: what ``forget`` does to the entries that cited the
  forgotten episodes (recount, remove the unsupported, rebuild summaries), under the
  cycle's lock so no cycle runs on a half-forgotten store, then PLAYBOOK.md rebuilt.
- ``dream(ctx)``: one bounded dream slot (``ctx.dream_hook`` when ``dreams.enabled``: the
  daemon runs one while the heartbeat is idle);
- ``resolve_entry`` / ``explain_entry``: ``entry.explain``.

Everything else in the curator is its own business and may move without the facade
noticing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from curator.cycle.dream import dream
from curator.cycle.forgotten import apply_recount, recount_plan
from curator.cycle.run import curator_hook, cycle_lock, run_cycle
from curator.cycle.state import CycleState, store_time
from curator.learn import hook as learn
from curator.learn.reflexion import deviations
from curator.learn.reflexion_hook import REFLEXION_STATS_KEY, reflexion_hook
from curator.views.explain import explain_entry, resolve_entry
from curator.views.playbook import write_playbook
from grimoire.context import Context

__all__ = ["dream", "explain_entry", "forget_apply", "forget_plan", "install",
           "resolve_entry", "run_cycle", "store_time"]


def _learning(ctx: Context) -> dict[str, Any]:
    """Distillation runs since open (a copy, taken under the state lock)."""
    with ctx.state_lock:
        return dict(ctx.extras.get(learn.LEARN_STATS_KEY) or {})


def _reflexion(ctx: Context) -> dict[str, Any]:
    """Reflexion verdicts and safety incidents since open (a copy, under the state lock)."""
    with ctx.state_lock:
        stats = ctx.extras.get(REFLEXION_STATS_KEY) or {}
        return {"episodes": stats.get("episodes", 0), "incidents": stats.get("incidents", 0),
                "verdicts": dict(stats.get("verdicts", {}))}


def install(ctx: Context) -> None:
    """Wire the curator's learners and cycle on ``ctx`` and publish its read-outs."""
    ctx.post_write_hooks.append(reflexion_hook)
    ctx.distill_hook = learn.distill
    ctx.stats["learning"] = lambda: _learning(ctx)
    ctx.stats["reflexion"] = lambda: _reflexion(ctx)
    ctx.stats["prediction_deviations"] = deviations
    if ctx.extras.get("llm") is not None:  # optional: without it nothing touches the network
        from curator.learn.cause_judge import judge_causes_hook
        from curator.learn.llm_paths import install_llm_paths

        install_llm_paths(ctx, ctx.extras["llm"])
        ctx.post_write_hooks.append(judge_causes_hook)
    ctx.curator_hook = curator_hook
    if ctx.config.dreams.enabled and not ctx.read_only:
        ctx.dream_hook = dream


def forget_plan(ctx: Context, citing: Sequence[str], forgotten: Collection[str]
                ) -> dict[str, Any]:
    """The entries' side of a forget plan (``curator.cycle.forgotten.recount_plan``)."""
    return recount_plan(ctx, citing, forgotten)


def forget_apply(ctx: Context, plan: Mapping[str, Any], forgotten: Collection[str],
                 erase: Any, scrub: Any) -> dict[str, Any]:
    """Under the cycle lock: ``erase()`` (the stores' part, on the writer thread), the
    planned recount and summary rebuild, ``scrub()`` (the files rewritten), then
    PLAYBOOK.md compiled again."""
    with cycle_lock(ctx):
        erased = ctx.writer.call(erase)
        now = store_time(ctx)
        cycle = CycleState.load(ctx).cycle
        done = ctx.writer.call(lambda: apply_recount(ctx, plan, forgotten, now=now,
                                                     cycle=cycle))
        ctx.writer.call(scrub)
        book = write_playbook(ctx, now=now, tick=ctx.tick)
    return {**erased, **done, "playbook": book["path"]}
