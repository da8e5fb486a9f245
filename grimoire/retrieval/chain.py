"""The causal chain of seed 001: from an event, walk causes back to the root.

``walk_to_root`` follows, at each step, the strongest direct cause (largest
weight, then smallest id) until an event has no cause, the next cause was
already visited (a cycle in an inferred graph) or ``max_depth`` hops were
taken. The chain comes back oldest first, each link carrying the
relationship text and weight of the edge that led *into* it (the root has
none), which is the order a story is told in.

Owns: the traversal over a callable. Must not read a store or render text
(see ``render``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from grimoire.errors import ValidationError

__all__ = ["ChainLink", "walk_to_root"]


class ChainLink(NamedTuple):
    """One event of a chain; ``relationship``/``weight``: how the previous link caused it."""

    id: str
    relationship: str | None = None
    weight: float | None = None


def walk_to_root(
    start_id: str,
    get_cause: Callable[[str], Sequence[tuple[str, str | None, float]]],
    max_depth: int = 10,
) -> list[ChainLink]:
    """Oldest-first chain ending at ``start_id``.

    ``get_cause(id)`` returns the event's direct causes as ``(cause_id,
    relationship, weight)``.
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise ValidationError(f"must be an integer >= 0, got {max_depth!r}", field="max_depth")
    path = [start_id]
    edges: list[tuple[str | None, float]] = []  # edges[i]: path[i + 1] caused path[i]
    visited = {start_id}
    current = start_id
    for _ in range(max_depth):
        causes = sorted(
            (c for c in get_cause(current) if c[0] not in visited),
            key=lambda c: (-c[2], c[0]),
        )
        if not causes:
            break
        cause_id, relationship, weight = causes[0]
        edges.append((relationship, float(weight)))
        path.append(cause_id)
        visited.add(cause_id)
        current = cause_id
    links = [ChainLink(path[-1])]
    for index in range(len(path) - 2, -1, -1):
        relationship, weight = edges[index]
        links.append(ChainLink(path[index], relationship, weight))
    return links
