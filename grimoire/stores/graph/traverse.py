"""Walks over the graph's entity edges: breadth-first search and seed 004's curiosity table.

Owns the traversal order (nearest first; within a hop, the frontier in the
order it was reached, each entity's outgoing edges before its incoming ones,
and each entity's edges in index order: valid_from, valid_to, triple id) and
the topology curiosity modifier. The same walk is written twice:

- ``bfs_lmdb`` reads the ``by_subject`` / ``by_object`` indexes inside a
  transaction the caller opened: the reference, and the path for blocks the
  in-memory adjacency does not hold;
- ``bfs_memory`` reads the node maps of ``graph_adjacency`` (see ``Node``):
  dict and tuple work only, no decoding.

Both yield exactly the same sequence (a property test checks it). It must
not open transactions, write, or decode whole triples.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal, TypeAlias

from grimoire.records.graph import Direction
from grimoire.stores.graph import codec

__all__ = ["OBJECT", "OPEN_END", "SUBJECT", "Edge", "Node", "Reached", "Side", "Way",
           "bfs_lmdb", "bfs_memory", "collect", "topology_curiosity_modifier"]

Way: TypeAlias = Literal["out", "in"]
Reached: TypeAlias = tuple[bytes, int, str, Way]  # entity key, hop, predicate, way

OPEN_END = (1 << 64) - 1  # valid_to of an open edge: the index's all-ones, so order matches
# (valid_from, valid_to, triple id, predicate, subject key, object key): tuples sort in the
# by_subject / by_object value order, since (valid_from, valid_to, id) is unique.
Edge: TypeAlias = tuple[int, int, bytes, str, bytes, bytes]
Side: TypeAlias = Literal[4, 5]  # the Edge field of an end: the other end going out is OBJECT
SUBJECT: Final = 4
OBJECT: Final = 5
# One entity's edges one way: (settled, open others, their predicates, every edge in order).
# From block ``settled`` on (no edge starts or ends later) exactly the open edges are
# valid, so a walk at such a block reads the two flat tuples instead of every edge.
Node: TypeAlias = tuple[int, tuple[bytes, ...], tuple[str, ...], tuple[Edge, ...]]

_CURIOSITY = {0: 1.0, 1: 1.0, 2: 0.5, 3: 0.25}  # seed 004, "Feeding the Curiosity Scorer"


def topology_curiosity_modifier(distance: int | None) -> float:
    """Curiosity weight of an event at ``distance`` hops from a position (None: unconnected)."""
    return 0.0 if distance is None else _CURIOSITY.get(distance, 0.0)


def collect(walk: Iterable[Reached], goal: bytes | None = None) -> list[Reached]:
    """The walk as a list, ending at ``goal`` if it reaches it (a closed walk may not wait)."""
    found = []
    for reached in walk:
        found.append(reached)
        if reached[0] == goal:
            break
    return found


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
                        yield other, hop, v[33:end].decode(), way
        if not reached:
            return
        frontier = reached


def bfs_memory(outgoing: dict[bytes, Node] | None, incoming: dict[bytes, Node] | None,
               starts: list[bytes], max_hops: int, block: int,
               goal: bytes | None = None) -> list[Reached]:
    """``collect(bfs_lmdb(...), goal)`` over node maps (None: that way is not walked).

    A list, not a generator: resuming a generator per entity reached cost a
    third of the walk.
    """
    ways: list[tuple[dict[bytes, Node], Side, Way]] = []
    if outgoing is not None:
        ways.append((outgoing, OBJECT, "out"))
    if incoming is not None:
        ways.append((incoming, SUBJECT, "in"))
    visited = set(starts)
    covered, seen = visited.issuperset, visited.add
    found: list[Reached] = []
    frontier = list(dict.fromkeys(starts))
    for hop in range(1, max_hops + 1):
        reached: list[bytes] = []
        for key in frontier:
            for nodes, side, way in ways:
                node = nodes.get(key)
                if node is None:
                    continue
                if block >= node[0]:
                    others = node[1]
                    if covered(others):  # one C-level check: deep hops mostly find old ground
                        continue
                    for i, other in enumerate(others):
                        if other not in visited:
                            seen(other)
                            reached.append(other)
                            found.append((other, hop, node[2][i], way))
                    continue
                for edge in node[3]:
                    if edge[0] > block:
                        break
                    other = edge[side]
                    if block < edge[1] and other not in visited:
                        seen(other)
                        reached.append(other)
                        found.append((other, hop, edge[3], way))
        if goal is not None and goal in reached:  # end the list there, as ``collect`` does
            return found[:len(found) - len(reached) + reached.index(goal) + 1]
        if not reached:
            break
        frontier = reached
    return found
