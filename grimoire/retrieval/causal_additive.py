"""The causal stream fused additively (``retrieval.causal_fusion = "additive"``).

Seed 000's TCMF multiplies: ``score × (1 + λ · boost)``. A memory that witnessed a
cause but reads nothing like the query has almost no score to multiply, and was
usually never pooled at all (no backend found it), so it cannot surface. Here the
causal stream is a stream of its own:

1. *Witnesses are pooled* (``witness_ids``): for each causal ancestor, the episodes
   recorded around its time (``retrieval.causal_witness_window_ms``, seed 000's
   temporal proximity) that are closest to it, up to ``WITNESSES_PER_ANCESTOR`` each,
   join the candidates whatever the query says.
2. *The boost is added*, not multiplied:
   ``score + retrieval.causal_additive_lambda · boost``, with
   ``boost = max over ancestors of cos(item, a) × edge weight × reach(depth)``, counted
   only where the item is closer to the ancestor than to the event itself (a loud
   memory that restates the event is near its direct cause too, but explains nothing)
   and at cosine ≥ ``retrieval.causal_witness_similarity``.

``reach``: for an ordinary query every ancestor counts, nearer ones a little more,
``1 − (depth − 1) / (2 · max_depth)`` (seed 000's ``1 − (depth − 1) / max_depth``
all but silenced a depth-4 cause). For a query that asks *why* (``asks_why``:
"why", "what caused", "what led to", "reason", "root cause"), the order turns
round: ``depth / deepest``, so the root cause (the deepest ancestor found) comes first
and its own witnesses after it. A question *anchored* on an event (``event_id`` given,
no why wording) is about that event's causes too: root first on the gentle slope mirrored,
``1 − (deepest − depth) / (2 · deepest)``, so the root leads while the witnesses of nearer
causes keep most of their lift.

Owns: the witness search over a given matrix and the additive term. Must not read a
store (the caller passes the episode matrix and the ancestors).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from grimoire.config import RetrievalConfig
from grimoire.retrieval.candidates import Breakdown, Candidate, Vector
from grimoire.retrieval.causal_boost import AncestorVector

__all__ = ["WITNESSES_PER_ANCESTOR", "apply_additive", "asks_why", "witness_ids"]

WITNESSES_PER_ANCESTOR = 3
_MAX_ANCESTORS = 16  # ancestors searched for witnesses (nearest first)
_SCAN = 64  # nearest episodes per ancestor checked for the witness conditions
_WHY = re.compile(r"\b(why|what caused|what led to|what made|reasons?|root cause|cause of|"
                  r"because of what)\b", re.I)


class Matrix(Protocol):
    """An n × dim matrix of episode vectors: what ``matrix @ x`` and ``matrix[rows]`` are
    asked of (the store's int8 ``QuantizedRows`` or a float32 array)."""

    def __matmul__(self, other: Vector, /) -> Vector: ...

    def __getitem__(self, rows: npt.NDArray[np.intp], /) -> Vector: ...


def asks_why(query: str) -> bool:
    """Whether the query asks for a cause (rule-based, English; no LLM)."""
    return _WHY.search(query) is not None


def witness_ids(ids: Sequence[str], matrix: Matrix | Vector, ancestors: Sequence[AncestorVector],
                start: Vector | None, time_of: Callable[[str], int | None],
                cfg: RetrievalConfig, exclude: set[str]) -> list[str]:
    """Per ancestor (nearest first), the episodes that witnessed it.

    A witness is recorded within ``retrieval.causal_witness_window_ms`` of the ancestor
    (either side), is at cosine ≥ ``retrieval.causal_witness_similarity`` to it, and is
    closer to the ancestor than to the event itself (``start``): a memory that restates
    the event is the query's business, not the causal stream's. At most
    ``WITNESSES_PER_ANCESTOR`` each, closest first.
    """
    usable = sorted(ancestors, key=lambda a: (a[1], -a[2], a[0]))[:_MAX_ANCESTORS]
    if not usable or not ids:
        return []
    sims = matrix @ _unit(usable).T  # n × ancestors
    window = cfg.causal_witness_window_ms
    out: list[str] = []
    seen = set(exclude)
    for column, ancestor in enumerate(usable):
        when = time_of(ancestor[0])
        col = sims[:, column]
        k = min(len(ids), _SCAN)
        top = np.argpartition(-col, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        # Cosines to the event only for the rows looked at (not a second pass over all).
        to_start = matrix[top] @ start if start is not None else None
        row_of = {p: r for r, p in enumerate(top.tolist())}
        taken = 0
        for position in sorted(row_of, key=lambda p: (-col[p], p)):
            if col[position] < cfg.causal_witness_similarity or taken >= WITNESSES_PER_ANCESTOR:
                break
            item = ids[position]
            restates = to_start is not None and to_start[row_of[position]] >= col[position]
            if item == ancestor[0] or restates:
                continue
            at = time_of(item)
            if when is None or at is None or abs(at - when) > window:
                continue
            taken += 1
            if item not in seen:
                seen.add(item)
                out.append(item)
    return out


def _unit(ancestors: Sequence[AncestorVector]) -> Vector:
    rows = np.array([a[3] for a in ancestors], dtype=np.float32)
    out: Vector = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def _reach(depth: int, deepest: int, max_depth: int, why: bool, anchored: bool) -> float:
    """How much an ancestor at ``depth`` lends (see the module docstring)."""
    if why:
        return depth / deepest
    if anchored:
        return 1.0 - (deepest - depth) / (2 * deepest)
    return 1.0 - (depth - 1) / (2 * max_depth)


def apply_additive(scores: Mapping[str, float], candidates: Sequence[Candidate],
                   ancestors: Sequence[AncestorVector], cfg: RetrievalConfig,
                   factors: Mapping[str, Breakdown], why: bool, start: Vector | None = None,
                   *, anchored: bool = False,
                   ) -> tuple[dict[str, float], dict[str, Breakdown]]:
    """``score + λ · boost`` for every candidate near an ancestor (new dicts).

    With the event's vector ``start``, a candidate closer to the event than to the
    ancestor gets nothing from it (it restates the event; its relevance already counts).
    """
    out_scores = dict(scores)
    out_factors: dict[str, Breakdown] = dict(factors)
    max_depth = max(1, cfg.causal_max_depth)
    usable = [a for a in ancestors if 1 <= a[1] <= max_depth and a[2] > 0.0]
    present = [c for c in candidates if c.id in scores]
    if not usable or not present or cfg.causal_additive_lambda == 0.0:
        return out_scores, out_factors
    deepest = max(a[1] for a in usable)
    reach = np.array([_reach(a[1], deepest, max_depth, why, anchored)
                      for a in usable]) * np.array([a[2] for a in usable])
    items = np.array([c.vector for c in present], dtype=np.float32)
    sims = items @ _unit(usable).T
    column_of = {a[0]: column for column, a in enumerate(usable)}
    for row, candidate in enumerate(present):
        if (column := column_of.get(candidate.id)) is not None:
            sims[row, column] = 1.0
    floor = np.full((len(present), 1), cfg.causal_witness_similarity, dtype=np.float32)
    if start is not None:
        floor = np.maximum(floor, (items @ start)[:, None] + 1e-6)
    gains = np.where(sims >= floor, sims * reach, 0.0)
    best_columns = np.argmax(gains, axis=1)
    for row, candidate in enumerate(present):
        best = int(best_columns[row])
        boost = float(gains[row, best])
        if boost <= 0.0:
            continue
        added = cfg.causal_additive_lambda * boost
        out_scores[candidate.id] += added
        out_factors[candidate.id] = {**out_factors.get(candidate.id, {}), "causal": {
            "value": boost, "added": added, "similarity": float(sims[row, best]),
            "depth": float(usable[best][1]), "edge_weight": float(usable[best][2]),
            "why": float(why)}}
    return out_scores, out_factors
