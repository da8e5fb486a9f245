"""Causality in the API: ``causal.link``, ``causal.chain`` and auto-linking of new episodes.

- ``causal_link``: an explicit, weighted edge cause → effect between two
  stored episodes or entries (weight in (0, 1], default 1). An episode cause
  must not be later than its effect (a link backwards in time is a mistake
  in the caller, not a discovery).
- ``causal_chain`` (seed 001): from an event (``id``) or from the event most
  similar to ``query`` (episode or entry, best cosine), follow the strongest
  direct cause back to the root; the chain comes back oldest first with each
  link's relationship text, as structured data and as a one-line narrative.
- ``causal_consequences`` (seed 004 "traversing forward to identify predicted
  consequences", beside the backward chain): from an event (``id``) or the item most
  similar to ``query``, every effect reachable forward within ``depth`` edges (3 by
  default, the seed's), nearest first, each with its depth, the product of the edge
  weights on its strongest path and the last link's relationship text.
- ``link_new_episodes`` (post-write hook, writer thread): an episode written
  with a ``causal_hint`` gets an explicit edge from the hinted item; an episode of
  a type in ``retrieval.auto_link_types`` (every type by default, observations too:
  seed 000 links every new event, seed 001's ``add_event`` searches every effect's
  causes) is auto-linked (seed 000 ``auto_link_predecessors``,
  ``retrieval.auto_link_*``) to the recent episodes close to it in time and
  meaning. An effect keeps at most ``retrieval.causal_max_fan_in`` inferred causes, the
  strongest (``SemanticStore.bound_fan_in``).

Chains and the TCMF boost follow explicit, auto, discovered and KG edges;
outcome edges (caused_success / caused_failure / irrelevant) link entries to
decisions, not events to events, and are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import NotFoundError, ValidationError
from grimoire.logs import get_logger
from grimoire.models.embedders import embed_one
from grimoire.retrieval.auto_link import predecessors_of
from grimoire.retrieval.chain import ChainLink, walk_to_root
from grimoire.retrieval.render import narrative
from grimoire.retrieval.stages.records import BOOST_KINDS, Node, node
from grimoire.stores.semantic.types import CausalEdge, EdgeKind

__all__ = ["CHAIN_KINDS", "CONSEQUENCE_DEPTH", "causal_chain", "causal_consequences",
           "causal_link", "chain_for", "chain_items", "link_new_episodes"]

log = get_logger(__name__)

CHAIN_KINDS = BOOST_KINDS
MAX_CHAIN = 16
_MAX_RELATIONSHIP = 2_000
_AUTO_LINK_SCAN = 500  # recent episodes considered for a regime shift's predecessors
NO_CONTEXT = "No relevant context found in memory."
CONSEQUENCE_DEPTH = 3  # seed 004: "the traversal depth is limited to 3 hops (default)"
_MAX_CONSEQUENCE_DEPTH = 8
_MAX_CONSEQUENCES = 100


def _id(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ValidationError("is required and must be a non-empty id", field=name)
    return value


def _edge_dict(edge: CausalEdge) -> dict[str, Any]:
    return {"cause_id": edge.cause_id, "effect_id": edge.effect_id, "kind": edge.kind.value,
            "weight": edge.weight, "relationship": edge.relationship, "lag_ms": edge.lag_ms,
            "evidence_count": edge.evidence_count, "created_at": edge.created_at,
            "updated_at": edge.updated_at}


def causal_link(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and store an explicit edge; re-linking the same pair replaces its values."""
    unknown = set(params) - {"cause_id", "effect_id", "relationship", "weight"}
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    cause_id, effect_id = _id(params, "cause_id"), _id(params, "effect_id")
    if cause_id == effect_id:
        raise ValidationError("an event cannot cause itself", field="effect_id")
    relationship = params.get("relationship")
    if relationship is not None and (not isinstance(relationship, str)
                                     or len(relationship) > _MAX_RELATIONSHIP):
        raise ValidationError(f"must be a string of <= {_MAX_RELATIONSHIP} chars",
                              field="relationship")
    weight = params.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not (
            math.isfinite(weight) and 0.0 < weight <= 1.0):
        raise ValidationError("must be a number in (0, 1]", field="weight")
    cause, effect = node(ctx, cause_id), node(ctx, effect_id)
    if cause is None:
        raise NotFoundError(f"cause_id: no episode or entry {cause_id!r}")
    if effect is None:
        raise NotFoundError(f"effect_id: no episode or entry {effect_id!r}")
    lag: int | None = None
    if cause.kind == "episode" and effect.kind == "episode":
        if cause.time > effect.time:
            raise ValidationError("happened after its effect (episode timestamps)",
                                  field="cause_id")
        lag = effect.time - cause.time
    edge = CausalEdge(cause_id, effect_id, EdgeKind.EXPLICIT, float(weight),
                      relationship.strip() or None if relationship else None, lag)
    stored: CausalEdge = ctx.writer.call(lambda: ctx.semantic.upsert_edge(edge, now=ctx.now()))
    log.info("causal.link", cause_id=cause_id, effect_id=effect_id, weight=stored.weight)
    return {"edge": _edge_dict(stored)}


def chain_for(ctx: Context, start_id: str, at: int | None = None
              ) -> tuple[list[ChainLink], dict[str, Node]]:
    """Seed 001's walk from ``start_id`` to its root (oldest first) and the nodes on it.

    Under ``at``, edges created and causes recorded after it are not followed.
    """
    nodes: dict[str, Node] = {}

    def get_cause(item_id: str) -> list[tuple[str, str | None, float]]:
        out = []
        for edge in ctx.semantic.edges_to(item_id, CHAIN_KINDS):
            if at is not None and edge.created_at > at:
                continue
            found = nodes.get(edge.cause_id) or node(ctx, edge.cause_id)
            if found is None or (at is not None and found.recorded > at):
                continue
            nodes[found.id] = found
            out.append((edge.cause_id, edge.relationship, edge.weight))
        return out

    links = walk_to_root(start_id, get_cause, MAX_CHAIN)
    for link in links:
        if link.id not in nodes and (found := node(ctx, link.id)) is not None:
            nodes[link.id] = found
    return links, nodes


def chain_items(links: Sequence[ChainLink], nodes: Mapping[str, Node]) -> list[dict[str, Any]]:
    """The chain as structured data, oldest first."""
    out = []
    for link in links:
        found = nodes.get(link.id)
        item: dict[str, Any] = {"id": link.id, "kind": found.kind if found else None,
                                "text": found.text if found else "", "timestamp":
                                found.time if found else None,
                                "relationship": link.relationship, "weight": link.weight}
        if found is not None and found.episode is not None and found.episode.ref:
            item["ref"] = found.episode.ref
        out.append(item)
    return out


def _most_relevant(ctx: Context, query: str) -> tuple[str, float] | None:
    q = embed_one(ctx.embedder, query)
    best: tuple[str, float] | None = None
    for episode, sim in ctx.episodes.search(q, 1):
        best = (episode.id, sim)
    for entry, sim in ctx.semantic.knn(q, 1):
        if best is None or sim > best[1]:
            best = (entry.id, sim)
    return best


def causal_chain(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """``{query}`` or ``{id}`` → ``{chain: [...oldest first...], narrative, start_id}``."""
    unknown = set(params) - {"query", "id"}
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    start, similarity = _start(ctx, params)
    if start is None:
        return {"chain": [], "narrative": NO_CONTEXT, "start_id": None}
    links, nodes = chain_for(ctx, start)
    text = narrative(links, lambda i: nodes[i].text if i in nodes else i)
    out: dict[str, Any] = {"chain": chain_items(links, nodes), "narrative": text,
                           "start_id": start}
    if similarity is not None:
        out["similarity"] = round(similarity, 6)
    return out


def _start(ctx: Context, params: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """The event a walk starts from: ``id`` as given, or the item most similar to ``query``."""
    if ("query" in params) == ("id" in params):
        raise ValidationError("give exactly one of query or id", field="query")
    if "id" in params:
        start = _id(params, "id")
        if node(ctx, start) is None:
            raise NotFoundError(f"id: no episode or entry {start!r}")
        return start, None
    query = params["query"]
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("must be a non-empty string", field="query")
    found = _most_relevant(ctx, query)
    return (None, None) if found is None else found


def _bounded_int(params: Mapping[str, Any], name: str, default: int, top: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise ValidationError(f"must be an integer in [1, {top}]", field=name)
    return value


def causal_consequences(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """``{query} or {id}, depth?=3, limit?=20`` → ``{start, consequences: [...nearest
    first...], narrative}``: what followed from an event along the causal edges (explicit,
    auto-linked, discovered, from the graph), forward, the strongest path to each."""
    unknown = set(params) - {"query", "id", "depth", "limit"}
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    depth = _bounded_int(params, "depth", CONSEQUENCE_DEPTH, _MAX_CONSEQUENCE_DEPTH)
    limit = _bounded_int(params, "limit", 20, _MAX_CONSEQUENCES)
    start, similarity = _start(ctx, params)
    if start is None:
        return {"start": None, "consequences": [], "narrative": NO_CONTEXT}
    origin = node(ctx, start)
    hops = ctx.semantic.causal_bfs(start, direction="forward", max_depth=depth,
                                   kinds=CHAIN_KINDS)[:limit]
    items: list[dict[str, Any]] = []
    for hop in hops:
        found = node(ctx, hop.node_id)
        item: dict[str, Any] = {
            "id": hop.node_id, "kind": found.kind if found else None,
            "text": found.text if found else "", "timestamp": found.time if found else None,
            "depth": hop.depth, "weight": round(hop.path_weight, 6),
            "cause_id": hop.edge.cause_id, "edge_kind": hop.edge.kind.value,
            "relationship": hop.edge.relationship}
        items.append(item)
    first = [i for i in items if i["depth"] == 1]
    text = (f"{_clip(origin.text if origin else start)} led to: "
            + "; ".join(_clip(i["text"]) for i in first[:5])
            + (f" (and {len(items) - min(len(first), 5)} further)"
               if len(items) > min(len(first), 5) else "")
            if items else f"{_clip(origin.text if origin else start)}: no recorded consequence")
    out: dict[str, Any] = {"start": {"id": start, "text": origin.text if origin else "",
                                     "timestamp": origin.time if origin else None},
                           "consequences": items, "narrative": text}
    if similarity is not None:
        out["similarity"] = round(similarity, 6)
    return out


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --- the post-write hook ------------------------------------------------------------------


def _auto_edges(ctx: Context, episode_id: str, timestamp: int, vector: np.ndarray,
                what: str, skip: str | None = None) -> list[CausalEdge]:
    """Seed 000's inferred predecessors of one new episode (``skip``: a cause it names)."""
    cfg = ctx.config.retrieval
    window = cfg.auto_link_window_ms
    ids, times, vectors = ctx.episodes.recent_rows(_AUTO_LINK_SCAN, since=timestamp - window)
    found = predecessors_of(timestamp, vector, ids, times, vectors, window,
                            cfg.auto_link_threshold, cfg.auto_link_min_similarity,
                            skip=frozenset(i for i in (episode_id, skip) if i))
    # Only the strongest causal_max_fan_in can survive the bound: the rest are not written.
    found = found[:cfg.causal_max_fan_in]
    at = {ident: int(t) for ident, t in zip(ids, times, strict=True)}
    return [CausalEdge(cause, episode_id, EdgeKind.AUTO, weight,
                       f"auto-linked: preceded this {what}, close in time and meaning "
                       f"(weight {weight:.3f})", timestamp - at[cause])
            for cause, weight in found]


def link_new_episodes(ctx: Context, episodes: Sequence[Any], vectors: np.ndarray) -> None:
    """Post-write hook: causal_hint → explicit edge; a hinted episode or an event type →
    auto-linked predecessors too (seed 000: a writer who names one cause marks an event
    with causes, and the others close in time and meaning are inferred)."""
    edges: list[CausalEdge] = []
    for row, episode in enumerate(episodes):
        hint = episode.causal_hint
        if episode.type.value in ctx.config.retrieval.auto_link_types:
            edges.extend(_auto_edges(ctx, episode.id, episode.timestamp, vectors[row],
                                     episode.type.value.replace("_", " "), skip=hint))
        elif hint:
            edges.extend(_auto_edges(ctx, episode.id, episode.timestamp, vectors[row],
                                     "event", skip=hint))
        if hint and hint != episode.id:
            cause = node(ctx, hint)
            if cause is None:
                log.warning("causal.hint.unknown", episode_id=episode.id, causal_hint=hint)
            else:
                lag = episode.timestamp - cause.time if cause.kind == "episode" else None
                edges.append(CausalEdge(hint, episode.id, EdgeKind.EXPLICIT, 1.0,
                                        None,
                                        lag if lag is not None and lag >= 0 else None))
    if not edges:
        return
    now = ctx.now()
    with ctx.semantic.transaction():
        for edge in edges:
            ctx.semantic.upsert_edge(edge, now=now)
        dropped = ctx.semantic.bound_fan_in({e.effect_id for e in edges},
                                            ctx.config.retrieval.causal_max_fan_in)
    log.info("causal.auto_link", edges=len(edges),
             auto=sum(1 for e in edges if e.kind is EdgeKind.AUTO), dropped=dropped)
