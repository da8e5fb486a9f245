"""The causal graph in ``causal_edges``: upsert, look-ups, and breadth-first walks.

Nodes are episode or entry ids (seed 004 "SQLite Causal Graph", seed 000
TCMF, seed 001 causal chains, seed 003 outcome edges). Plain functions over
an apsw connection; the store picks the connection and wraps errors. Must
not validate records other than edges, and must not touch other tables.

A walk expands one depth level per query: the frontier goes in as one JSON
array (``json_each``), so the statement text is the same for every level and
stays in apsw's statement cache.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal

import apsw

from grimoire.errors import StoreError, ValidationError
from grimoire.records import parse_enum
from grimoire.stores.semantic.types import CAUSAL_KINDS, CausalEdge, CausalHop, EdgeKind

__all__ = [
    "INFERRED_KINDS",
    "MAX_DEPTH",
    "Direction",
    "bfs",
    "bound_fan_in",
    "count_edges",
    "delete_edges",
    "edges_from",
    "edges_to",
    "get_edge",
    "list_edges",
    "mark_used",
    "prune_unused",
    "upsert_edge",
]

Direction = Literal["backward", "forward"]
MAX_DEPTH = 32
# Edges a program inferred (auto-linking, discovery, the knowledge graph): bounded per
# effect and left to decay when they never help. Explicit edges are the agent's word and
# outcome edges its record of decisions: never pruned here.
INFERRED_KINDS = (EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)

_COLS = ("cause_id, effect_id, kind, weight, relationship, lag_ms, evidence_count, "
         "created_at, updated_at")


_KIND = {k.value: k for k in EdgeKind}  # a dict hit is ~10x faster than EdgeKind(value)


def _edge(row: Sequence[Any]) -> CausalEdge:
    cause, effect, kind, weight, relationship, lag_ms, evidence, created, updated = row
    return CausalEdge(cause, effect, _KIND[kind], weight, relationship, lag_ms, evidence,
                      created, updated)


def _kinds_json(kinds: Collection[EdgeKind | str] | None) -> str:
    chosen = CAUSAL_KINDS if kinds is None else kinds
    return json.dumps(sorted(parse_enum(EdgeKind, k, "kinds").value for k in chosen))


def upsert_edge(conn: apsw.Connection, edge: CausalEdge, now: int) -> CausalEdge:
    """Insert ``edge`` or replace the values of the edge with the same (cause, effect, kind).

    ``created_at`` is kept from the first insert; ``updated_at`` becomes ``now``
    (``edge.created_at``/``updated_at`` are used when non-zero, e.g. on import). A
    relationship or lag left out (None) keeps the stored one: re-linking a pair to change
    its weight never erases what was said about it.
    """
    e = edge.validate()
    created = e.created_at or now
    updated = e.updated_at or now
    conn.execute(
        f"INSERT INTO causal_edges ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (cause_id, effect_id, kind) DO UPDATE SET weight = excluded.weight, "
        "relationship = COALESCE(excluded.relationship, causal_edges.relationship), "
        "lag_ms = COALESCE(excluded.lag_ms, causal_edges.lag_ms), "
        "evidence_count = excluded.evidence_count, updated_at = excluded.updated_at",
        (e.cause_id, e.effect_id, e.kind.value, e.weight, e.relationship, e.lag_ms,
         e.evidence_count, created, updated),
    )
    stored = get_edge(conn, e.cause_id, e.effect_id, e.kind)
    if stored is None:  # cannot happen inside the writing transaction
        raise StoreError(f"causal edge {e.cause_id} -> {e.effect_id} vanished after upsert")
    return stored


def delete_edges(conn: apsw.Connection, pairs: Iterable[tuple[str, str]],
                 kind: EdgeKind | str) -> int:
    """Delete the ``kind`` edges between each (cause, effect) pair; how many were deleted."""
    rows = [list(p) for p in dict.fromkeys(pairs)]
    if not all(len(p) == 2 and all(isinstance(i, str) for i in p) for p in rows):
        raise ValidationError("must be (cause_id, effect_id) pairs of strings", field="pairs")
    if not rows:
        return 0
    before = conn.total_changes()
    conn.execute(
        "DELETE FROM causal_edges WHERE kind = ? AND (cause_id, effect_id) IN "
        "(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))",
        (parse_enum(EdgeKind, kind, "kind").value, json.dumps(rows)))
    return int(conn.total_changes() - before)


def bound_fan_in(conn: apsw.Connection, effect_ids: Iterable[str], max_fan_in: int) -> int:
    """Keep at most ``max_fan_in`` inferred edges into each of ``effect_ids``: the
    strongest (weight, then the most recently confirmed, then the newest); delete the
    rest. Returns how many were deleted."""
    if isinstance(max_fan_in, bool) or not isinstance(max_fan_in, int) or max_fan_in < 1:
        raise ValidationError(f"must be an integer >= 1, got {max_fan_in!r}",
                              field="retrieval.causal_max_fan_in")
    ids = sorted(set(effect_ids))
    if not ids:
        return 0
    kinds = json.dumps([k.value for k in INFERRED_KINDS])
    before = conn.total_changes()
    conn.execute(
        "DELETE FROM causal_edges WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
        "(PARTITION BY effect_id ORDER BY weight DESC, updated_at DESC, id DESC) AS place "
        "FROM causal_edges WHERE effect_id IN (SELECT value FROM json_each(?)) "
        "AND kind IN (SELECT value FROM json_each(?))) WHERE place > ?)",
        (json.dumps(ids), kinds, max_fan_in))
    return int(conn.total_changes() - before)


def mark_used(conn: apsw.Connection, pairs: Iterable[tuple[str, str]], at: int) -> int:
    """Count one use of every edge (any kind) from cause to effect for each pair, at ``at``
    (``used_at`` never moves back); returns how many edges were touched."""
    rows = sorted(set(pairs))
    if not rows:
        return 0
    before = conn.total_changes()
    conn.execute(
        "UPDATE causal_edges SET uses = uses + 1, used_at = max(coalesce(used_at, ?1), ?1) "
        "WHERE (cause_id, effect_id) IN (SELECT json_extract(value, '$[0]'), "
        "json_extract(value, '$[1]') FROM json_each(?2))",
        (int(at), json.dumps(rows)))
    return int(conn.total_changes() - before)


def prune_unused(conn: apsw.Connection, before: int) -> int:
    """Delete the inferred edges last used or confirmed (``used_at``, ``updated_at``)
    before ``before``; returns how many."""
    before_changes = conn.total_changes()
    conn.execute(
        "DELETE FROM causal_edges WHERE kind IN (SELECT value FROM json_each(?)) "
        "AND max(updated_at, coalesce(used_at, updated_at)) < ?",
        (json.dumps([k.value for k in INFERRED_KINDS]), int(before)))
    return int(conn.total_changes() - before_changes)


def get_edge(
    conn: apsw.Connection, cause_id: str, effect_id: str, kind: EdgeKind | str
) -> CausalEdge | None:
    row = conn.execute(
        f"SELECT {_COLS} FROM causal_edges WHERE cause_id = ? AND effect_id = ? AND kind = ?",
        (cause_id, effect_id, parse_enum(EdgeKind, kind, "kind").value),
    ).fetchone()
    return None if row is None else _edge(row)


def edges_from(
    conn: apsw.Connection, node_id: str, kinds: Collection[EdgeKind | str] | None
) -> list[CausalEdge]:
    """Edges whose cause is ``node_id`` (its effects), strongest first."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM causal_edges WHERE cause_id = ? "
        "AND kind IN (SELECT value FROM json_each(?)) ORDER BY weight DESC, effect_id, kind",
        (node_id, _kinds_json(kinds)),
    )
    return [_edge(r) for r in rows]


def edges_to(
    conn: apsw.Connection, node_id: str, kinds: Collection[EdgeKind | str] | None
) -> list[CausalEdge]:
    """Edges whose effect is ``node_id`` (its causes), strongest first."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM causal_edges WHERE effect_id = ? "
        "AND kind IN (SELECT value FROM json_each(?)) ORDER BY weight DESC, cause_id, kind",
        (node_id, _kinds_json(kinds)),
    )
    return [_edge(r) for r in rows]


def edges_into(
    conn: apsw.Connection, node_ids: Iterable[str], kinds: Collection[EdgeKind | str] | None
) -> list[CausalEdge]:
    """Edges whose effect is any of ``node_ids``, in one indexed query (by effect, then
    strongest first)."""
    ids = list(dict.fromkeys(node_ids))
    if not all(isinstance(i, str) for i in ids):
        raise ValidationError("must be strings", field="node_ids")
    if not ids:
        return []
    rows = conn.execute(
        f"SELECT {_COLS} FROM causal_edges WHERE effect_id IN (SELECT value FROM json_each(?)) "
        "AND kind IN (SELECT value FROM json_each(?)) "
        "ORDER BY effect_id, weight DESC, cause_id, kind",
        (json.dumps(ids), _kinds_json(kinds)),
    )
    return [_edge(r) for r in rows]


def list_edges(
    conn: apsw.Connection, kinds: Collection[EdgeKind | str] | None, limit: int | None
) -> list[CausalEdge]:
    rows = conn.execute(
        f"SELECT {_COLS} FROM causal_edges WHERE kind IN (SELECT value FROM json_each(?)) "
        "ORDER BY id LIMIT ?",
        (_kinds_json(kinds), -1 if limit is None else limit),
    )
    return [_edge(r) for r in rows]


def count_edges(conn: apsw.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM causal_edges").fetchone()
    return 0 if row is None else int(row[0])


def bfs(
    conn: apsw.Connection,
    start: str,
    direction: Direction,
    max_depth: int,
    kinds: Collection[EdgeKind | str] | None,
) -> list[CausalHop]:
    """Every node within ``max_depth`` edges of ``start``, nearest first.

    ``backward`` follows edges from effect to cause (what led to ``start``),
    ``forward`` from cause to effect. A node is reported once, at its smallest
    depth; among the paths of that length the one with the largest product of
    weights wins (ties: the lexicographically smaller neighbour, so results
    are deterministic). Cycles are harmless: a reached node is never expanded
    twice.
    """
    if direction not in ("backward", "forward"):
        raise ValidationError("must be 'backward' or 'forward'", field="direction")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int):
        raise ValidationError("must be an integer", field="max_depth")
    if not 1 <= max_depth <= MAX_DEPTH:
        raise ValidationError(f"must be in [1, {MAX_DEPTH}]", field="max_depth")
    backward = direction == "backward"
    # Each level reads (id, cause, effect, kind, weight) from a covering index, probed by
    # the near-side id only (kinds are filtered here); only the winning edges are read
    # in full, in one query at the end.
    near, far = (2, 1) if backward else (1, 2)
    sql = (
        "SELECT id, cause_id, effect_id, kind, weight FROM causal_edges "
        f"WHERE {'effect_id' if backward else 'cause_id'} IN (SELECT value FROM json_each(?))"
    )
    wanted = set(json.loads(_kinds_json(kinds)))
    weight_of: dict[str, float] = {start: 1.0}
    found: list[tuple[str, int, float, int]] = []  # node, depth, path weight, edge id
    frontier = [start]
    for depth in range(1, max_depth + 1):
        best: dict[str, tuple[tuple[float, str, str], float, int]] = {}
        for edge_id, *ends, kind, weight in conn.execute(sql, (json.dumps(frontier),)):
            if kind not in wanted:
                continue
            here, there = ends[near - 1], ends[far - 1]
            if there in weight_of:
                continue
            path = weight_of[here] * weight
            # Strongest path first; on equal weight the smaller predecessor id, then kind.
            key = (-path, here, kind)
            current = best.get(there)
            if current is None or key < current[0]:
                best[there] = (key, path, edge_id)
        if not best:
            break
        for node in sorted(best, key=lambda n: (best[n][0][0], n)):
            _, path, edge_id = best[node]
            weight_of[node] = path
            found.append((node, depth, path, edge_id))
        frontier = sorted(best)
    if not found:  # no edge reaches ``start`` (most events): no second statement
        return []
    edges = {
        row[0]: _edge(row[1:]) for row in conn.execute(
            f"SELECT id, {_COLS} FROM causal_edges WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([f[3] for f in found]),),
        )
    }
    hops = [CausalHop(node, depth, path, edges[edge_id]) for node, depth, path, edge_id in found]
    return hops

