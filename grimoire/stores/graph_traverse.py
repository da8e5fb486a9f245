"""Walks over the graph's entity edges: breadth-first search and seed 004's curiosity table.

Owns the traversal order (nearest first; within a hop, the frontier in the
order it was reached, and each entity's edges in index order: valid_from,
valid_to, triple id) and the topology curiosity modifier. It reads the
``by_subject`` / ``by_object`` indexes inside a transaction the caller
opened; it must not open transactions, write, or decode whole triples.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, TypeAlias

from grimoire.records.graph import Direction
from grimoire.stores import graph_codec as codec

__all__ = ["Reached", "Way", "bfs_lmdb", "topology_curiosity_modifier"]

Way: TypeAlias = Literal["out", "in"]
Reached: TypeAlias = tuple[bytes, int, bytes, Way]  # entity key, hop, predicate, way

_CURIOSITY = {0: 1.0, 1: 1.0, 2: 0.5, 3: 0.25}  # seed 004, "Feeding the Curiosity Scorer"


def topology_curiosity_modifier(distance: int | None) -> float:
    """Curiosity weight of an event at ``distance`` hops from a position (None: unconnected)."""
    return 0.0 if distance is None else _CURIOSITY.get(distance, 0.0)


def bfs_lmdb(txn: Any, dbs: dict[str, Any], starts: list[bytes], max_hops: int, block: int,
             direction: Direction) -> Iterator[Reached]:
    """Yield ``(entity key, hop, predicate, way)`` for each entity first reached by BFS."""
    at = codec.block_bytes(block)
    ways: list[tuple[Any, Way]] = []
    if direction != "in":
        ways.append((txn.cursor(dbs["by_subject"]), "out"))
    if direction != "out":
        ways.append((txn.cursor(dbs["by_object"]), "in"))
    visited = set(starts)
    frontier = list(dict.fromkeys(starts))
    for hop in range(1, max_hops + 1):
        reached: list[bytes] = []
        for key in frontier:
            for cursor, way in ways:
                if not cursor.set_key(key):
                    continue
                # Values sort by valid_from: stop at the first edge that starts after block.
                for v in cursor.iternext_dup(keys=False, values=True):
                    if v[:8] > at:
                        break
                    end = 33 + v[32]
                    other = v[end:]
                    if at < v[8:16] and other and other not in visited:
                        visited.add(other)
                        reached.append(other)
                        yield other, hop, v[33:end], way
        if not reached:
            return
        frontier = reached
