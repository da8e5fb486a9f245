"""Check claims an LLM proposed against the episodes, and give them the data's numbers.

The ExpeL prompt path (``llm_paths``) lets a language model propose
regularities in the distiller's vocabulary (condition, target, direction).
Its numbers are never trusted: for each well-formed proposal this module
evaluates the condition on the same episode table the distiller uses, and
keeps it only if the data show the proposed direction with enough support,
an effect above the distiller's floor, and a significant test after Holm's
correction over everything the LLM proposed in that run:

- a metric level: Welch's t and the Mann–Whitney rank test of the cell
  against the rest (two-sided, the larger p of the two), statistics scaled
  by the autocorrelation's variance inflation, as the distiller does;
- an outcome rate: the one-sided exact (hypergeometric) test of the cell
  within the action's own rated episodes, counts divided by the inflation.

A kept proposal becomes a ``Claim`` with the observed effect, baseline,
support and p-value, the evidence to render it, and its supporting episodes.
Pure. Must not: read or write a store, or call the LLM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from curator.distiller import stats
from curator.distiller.autocorr import variance_inflation
from curator.distiller.features import Mask, Table, build_table, condition_mask, rate_population
from curator.distiller.operations import NEGATIVE_RATE, POSITIVE_RATE
from curator.distiller.scan import ranks_with_ties
from grimoire.config import DistillerConfig
from grimoire.records import Claim, Episode

__all__ = ["Checked", "verify_proposals"]

_KEYS = frozenset({"regime", "token_pair", "chain", "tool", "action", "hour_window",
                   "metric_band"})
_LOG_TWO = math.log(2.0)


@dataclass(frozen=True, slots=True)
class Checked:
    claim: Claim
    evidence: dict[str, Any]
    rows: Mask  # the supporting episodes


def _condition(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping) or not raw or set(raw) - _KEYS:
        return None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, list | tuple):
            if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
                return None
            out[str(key)] = list(value)
        elif isinstance(value, str) and value:
            out[str(key)] = value
        else:
            return None
    return out


def _parse(raw: object) -> tuple[dict[str, Any], str, str] | None:
    """(condition, target, direction) of a well-formed proposal; a lower rate becomes the
    other rate higher (the distiller's claims state rates upwards)."""
    if not isinstance(raw, Mapping):
        return None
    condition, target, direction = _condition(raw.get("condition")), raw.get("target"), \
        raw.get("direction")
    if condition is None or not isinstance(target, str) or direction not in ("higher", "lower"):
        return None
    if target in (NEGATIVE_RATE, POSITIVE_RATE):
        if direction == "lower":
            target = POSITIVE_RATE if target == NEGATIVE_RATE else NEGATIVE_RATE
        return condition, target, "higher"
    if not target.startswith("metric:"):
        return None
    return condition, target, str(direction)


def _order(table: Table) -> np.ndarray:
    return np.argsort(table.timestamps, kind="stable")


def _metric(table: Table, cond: dict[str, Any], mask: Mask, target: str, direction: str,
            cfg: DistillerConfig) -> Checked | None:
    values = table.metrics.get(target.removeprefix("metric:"))
    if values is None:
        return None
    present = ~np.isnan(values)
    cell, rest = mask & present, present & ~mask
    n1, n2 = int(cell.sum()), int(rest.sum())
    if n1 < cfg.min_support or n2 < 2:
        return None
    overall = float(values[present].mean())
    effect = float(values[cell].mean())
    gap = effect - overall
    if gap == 0.0 or ("higher" if gap > 0 else "lower") != direction:
        return None
    relative = abs(gap) / abs(overall) if overall else math.inf
    if relative < cfg.min_effect:
        return None
    a, b = values[cell], values[rest]
    t, df = stats.welch_t(float(a.mean()), float(a.var(ddof=1)), n1, float(b.mean()),
                          float(b.var(ddof=1)), n2)
    if math.isnan(t):
        return None
    ranks = np.zeros(values.size)
    ranks[present], ties = ranks_with_ties(values[present])
    z = stats.mann_whitney_z(float(ranks[cell].sum()), n1, n2, ties)
    rows = _order(table)
    rows = rows[present[rows]]
    vif = float(variance_inflation(ranks[rows], cell[rows][None, :])[0])
    scale = math.sqrt(vif)
    log_p = 0.0
    if t * z > 0:
        log_p = min(0.0, max(_LOG_TWO + stats.t_logsf(abs(t) / scale, max(1.0, df / vif)),
                             _LOG_TWO + stats.normal_logsf(abs(z) / scale)))
    claim = Claim(cond, target, direction, effect, overall, n1, math.exp(log_p))
    evidence = {"support": n1, "p_value": math.exp(log_p), "log_p": log_p, "effect": effect,
                "baseline": overall, "n_base": n1 + n2, "test": "welch_t+mann_whitney",
                "variance_inflation": vif, "relative_effect": relative}
    return Checked(claim, evidence, cell)


def _rate(table: Table, cond: dict[str, Any], mask: Mask, target: str,
          cfg: DistillerConfig) -> Checked | None:
    population = rate_population(table, cond)
    cell = mask & population
    n, total = int(cell.sum()), int(population.sum())
    hits = table.negative if target == NEGATIVE_RATE else table.positive
    in_pop = hits & population
    k, good = int((hits & cell).sum()), int(in_pop.sum())
    if n < cfg.min_support or total - n < 2 or not 0 < good < total:
        return None
    rate, base = k / n, good / total
    if rate - (good - k) / (total - n) < cfg.min_rate_gap:  # against the rest, as the scan
        return None
    rows = _order(table)
    rows = rows[population[rows]]
    vif = float(variance_inflation(in_pop[rows].astype(np.float64), cell[rows][None, :])[0])
    cells = [k, n - k, good - k, total - n - good + k]
    a, b, c, d = (math.floor(x / max(1.0, vif) + 0.5) for x in cells)
    log_p = stats.hypergeom_logsf(a, a + b + c + d, a + c, a + b) if a + b and c + d else 0.0
    claim = Claim(cond, target, "higher", rate, base, n, math.exp(log_p))
    evidence = {"support": n, "p_value": math.exp(log_p), "log_p": log_p, "effect": rate,
                "baseline": base, "n_base": total, "hits": k, "test": "fisher_exact",
                "variance_inflation": vif}
    return Checked(claim, evidence, hits & cell)


def verify_proposals(
    proposals: Sequence[object], episodes: Sequence[Episode], cfg: DistillerConfig, *,
    strategy: str | None,
) -> tuple[list[Checked], int]:
    """(claims the data support, number of proposals dropped)."""
    table = build_table(episodes, min_band_values=3 * cfg.min_support)
    tested: list[Checked] = []
    seen: set[str] = set()
    for raw in proposals:
        parsed = _parse(raw)
        if parsed is None:
            continue
        cond, target, direction = parsed
        mask = condition_mask(table, cond)
        if mask is None:
            continue
        checked = (_rate(table, cond, mask, target, cfg) if target.startswith("outcome:")
                   else _metric(table, cond, mask, target, direction, cfg))
        if checked is None:
            continue
        band = cond.get("metric_band")
        cut = None
        if isinstance(band, list) and str(band[0]) in table.bands:
            cuts = table.bands[str(band[0])]
            cut = cuts[1] if band[1] == "upper" else cuts[0]
            checked.evidence["band_cut"] = cut
        claim = Claim(checked.claim.condition, checked.claim.target, checked.claim.direction,
                      checked.claim.effect, checked.claim.baseline, checked.claim.support,
                      checked.claim.p_value, strategy, band_cut=cut)
        if claim.key in seen:
            continue
        seen.add(claim.key)
        checked.evidence["source"] = "llm_expel"
        tested.append(Checked(claim, checked.evidence, checked.rows))
    # Holm over every proposal the LLM made: each one was a question asked of the data.
    rejected = stats.holm([c.evidence["log_p"] for c in tested], cfg.alpha,
                          m=max(len(tested), len(proposals)))
    kept = [c for c, r in zip(tested, rejected, strict=True) if r]
    return kept, len(proposals) - len(kept)
