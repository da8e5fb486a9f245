"""Reflexion as a post-write hook: every action episode is checked as soon as it is durable.

``reflexion_hook(ctx, episodes, vectors)`` runs on the writer thread after
the append (``ingest``). For each action episode it runs the deterministic
Reflexion steps (``curator.learn.reflexion.reflect``: deviations from the
prediction, invariant checks), logs the result as ``reflexion.result`` (the
deviations in bps and the verdict), counts verdicts for ``status``, and writes
each broken invariant as a ``safety_incident`` episode through the normal
write path (inline: we are on the writer thread). Incidents are not actions,
so the hook never runs on its own output.

With an LLM configured, episodes whose verdict calls for interpretation are
handed to the LLM worker (``llm_paths``), off the writer thread: a slow or
failing LLM never delays a write. Must not: call the network itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from curator.learn.reflexion import Invariants, Verdict, reflect
from grimoire.context import Context
from grimoire.errors import NotAvailableError
from grimoire.logs import get_logger
from grimoire.records import Episode, EpisodeType

__all__ = ["REFLEXION_STATS_KEY", "reflexion_hook"]

log = get_logger(__name__)

REFLEXION_STATS_KEY = "reflexion_stats"
_QUIET = frozenset({Verdict.AS_PREDICTED.value, Verdict.UNVERIFIED.value})


def _count(ctx: Context, verdicts: Sequence[str], incidents: int) -> None:
    with ctx.state_lock:
        stats: dict[str, Any] = ctx.extras.setdefault(
            REFLEXION_STATS_KEY, {"episodes": 0, "incidents": 0, "verdicts": {}})
        stats["episodes"] += len(verdicts)
        stats["incidents"] += incidents
        for verdict in verdicts:
            stats["verdicts"][verdict] = stats["verdicts"].get(verdict, 0) + 1


def reflexion_hook(ctx: Context, episodes: Sequence[Episode], _vectors: Any) -> None:
    """Post-write hook: Reflexion's deterministic steps on each new action episode."""
    actions = [ep for ep in episodes if ep.type is EpisodeType.ACTION]
    if not actions:
        return
    invariants = Invariants.from_mapping(ctx.config.distiller.reflexion_invariants)
    from curator.learn.llm_paths import paths_of  # optional LLM; its holder has no side effects

    paths = paths_of(ctx)
    wanted = set(ctx.config.llm.reflexion_verdicts)
    incidents: list[dict[str, Any]] = []
    verdicts: list[str] = []
    for ep in actions:
        result = reflect(ep, invariants)
        verdicts.append(result.verdict.value)
        # A deviation worth reading is logged at info; "as predicted" / "unverified" at debug.
        emit = log.debug if result.verdict.value in _QUIET else log.info
        emit("reflexion.result", episode_id=ep.id, verdict=result.verdict.value,
             deviations=dict(result.deviations), incidents=len(result.incidents))
        incidents.extend(dict(incident.params) for incident in result.incidents)
        if paths is not None and result.verdict.value in wanted:
            paths.submit_reflexion(ctx, ep, invariants)
    _count(ctx, verdicts, len(incidents))
    if incidents:
        if ctx.write_episodes is None:
            raise NotAvailableError("Reflexion's incidents need the episode write path: "
                                    "open the stores through Grimoire.open")
        ids = ctx.write_episodes(ctx, incidents)
        log.warning("reflexion.incidents.written", count=len(ids), ids=ids[:20])
