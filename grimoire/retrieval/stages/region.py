"""The query's region in the curator's region MDP, for ``retrieve`` (SPEC §11).

- ``region_model``: the persisted model (semantic meta ``regions``, written by
  the curator's regions phase) as a ``grimoire.retrieval.regions.RegionView``, parsed
  once and kept in ``ctx.extras`` under the curator's cycle number (meta
  ``curator_state``): the curator rewrites the model only inside a cycle and
  moves the number on right after it, so a retrieval pays one small meta read,
  not a parse. A missing model is not cached (a model written before the
  first cycle is seen); ``forget_region_model`` drops the cache for anything
  that replaces the model outside a cycle.
- ``region_block``: the region of the query vector (the one the pipeline
  already embedded) and its best actions, top 3 by mean reward, with
  P(success | region, action).
- ``annotate``: ``region_p_success`` in the factor breakdown of entries whose
  structured claim names an action (``claim.condition["action"]``):
  information by default, it carries no weight and never changes a score or the order.
- ``region_agreement``: with ``retrieval.region_rank`` on, in deciding mode, how far the
  region's outcomes agree with each such entry's advice: ``1 − P(success)`` for a warning
  against the action, ``P(success)`` for a rule that recommends it. The pipeline scales
  the entry's boosted score by ``0.5 + agreement`` (within its relevance tier: it never
  lifts an entry over a more relevant item). Off by default: ``bench_decision.py`` measured
  no gain (the config help records the numbers).

No model, an unfitted one, an unreadable one or a query of another
dimension: no block and no factor. Must not write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.context import Context
from grimoire.errors import NotAvailableError, ValidationError
from grimoire.logs import get_logger
from grimoire.records import GrimoireEntry
from grimoire.retrieval.candidates import Breakdown
from grimoire.retrieval.regions import REGIONS_META, RegionView

__all__ = ["BEST_ACTIONS", "FACTOR", "annotate", "forget_region_model", "query_region",
           "region_agreement", "region_block", "region_for", "region_model"]

log = get_logger(__name__)

BEST_ACTIONS = 3
FACTOR = "region_p_success"
_CYCLE_META = "curator_state"  # the curator's cycle state: {"cycle": n, ...}
_CACHE = "retrieval.region_model"


def _cycle(ctx: Context) -> int:
    state = ctx.semantic.get_meta(_CYCLE_META, None)
    cycle = state.get("cycle") if isinstance(state, Mapping) else None
    return cycle if isinstance(cycle, int) and not isinstance(cycle, bool) else 0


def region_model(ctx: Context) -> RegionView | None:
    """The curator's region model if one is stored and fitted (cached per curator cycle)."""
    version = _cycle(ctx)
    cached: tuple[int, RegionView | None] | None = ctx.extras.get(_CACHE)
    if cached is not None and cached[0] == version:
        return cached[1]
    stored = ctx.semantic.get_meta(REGIONS_META, None)
    if stored is None:
        return None
    view: RegionView | None
    try:
        view = RegionView.from_dict(stored) if isinstance(stored, Mapping) else None
    except ValidationError as exc:
        log.warning("retrieval.regions.unreadable", error=str(exc))
        view = None
    if view is not None and not view.fitted:
        view = None
    ctx.extras[_CACHE] = (version, view)
    return view


def forget_region_model(ctx: Context) -> None:
    """Drop the cached model (after replacing meta ``regions`` outside a curator cycle)."""
    ctx.extras.pop(_CACHE, None)


def query_region(model: RegionView, vector: npt.ArrayLike) -> int | None:
    """The region of the query vector; None when it does not fit the model (dimension)."""
    try:
        return model.assign(np.asarray(vector, dtype=np.float64))
    except (ValidationError, NotAvailableError) as exc:
        log.debug("retrieval.regions.assign_failed", error=str(exc))
        return None


def region_block(model: RegionView, region: int) -> dict[str, Any]:
    """``{"id", "best_actions": [{"action", "p_success", "mean_reward", "n"}, …]}``."""
    return {"id": region, "best_actions": [
        {"action": action, "p_success": model.p_success(region, action),
         "mean_reward": mean, "n": n}
        for action, mean, n in model.best_action(region)[:BEST_ACTIONS]]}


def _claim_action(entry: GrimoireEntry) -> str | None:
    if entry.claim is None:
        return None
    action = entry.claim.condition.get("action")
    return action if isinstance(action, str) and action.strip() else None


def annotate(model: RegionView, region: int, entries: Iterable[GrimoireEntry],
             factors: dict[str, Breakdown]) -> None:
    """Add ``region_p_success`` to these entries' breakdowns (in place) where a claim names
    an action; scores are not touched."""
    for entry in entries:
        action = _claim_action(entry)
        if action is None or entry.id not in factors:
            continue
        factors[entry.id] = {**factors[entry.id],
                             FACTOR: {"value": model.p_success(region, action)}}


def region_for(ctx: Context, vector: npt.ArrayLike | None, entry_ids: Sequence[str],
               known: Mapping[str, GrimoireEntry], factors: dict[str, Breakdown]
               ) -> dict[str, Any] | None:
    """The query's region block, with ``region_p_success`` added to these entries' factors;
    None (and nothing added) without a usable model. ``known``: entries already loaded
    (the pool's); the rest (a causal ancestor) are read in one statement."""
    model = None if vector is None else region_model(ctx)
    if model is None or vector is None:
        return None
    region = query_region(model, vector)
    if region is None:
        return None
    missing = [i for i in entry_ids if i not in known]
    loaded = ctx.semantic.get_entries(missing) if missing else {}
    annotate(model, region, [e for e in (known.get(i) or loaded.get(i) for i in entry_ids)
                             if e is not None], factors)
    return region_block(model, region)


def region_agreement(ctx: Context, vector: npt.ArrayLike | None,
                     entries: Mapping[str, GrimoireEntry]) -> dict[str, float]:
    """Per entry whose claim names an action: how far the query region's outcomes agree
    with its advice (``1 − P(success)`` for a warning, ``P(success)`` otherwise); empty
    without a usable model."""
    model = None if vector is None else region_model(ctx)
    if model is None or vector is None:
        return {}
    region = query_region(model, vector)
    if region is None:
        return {}
    out: dict[str, float] = {}
    for entry in entries.values():
        action = _claim_action(entry)
        if action is None:
            continue
        p = model.p_success(region, action)
        out[entry.id] = 1.0 - p if entry.category.value == "warning" else p
    return out
