"""An in-memory copy of the graph's entity edges, so walks at a block need no LMDB reads.

LMDB stays the source of truth: ``build`` reads ``by_object`` (every edge
whose object is an entity) when the store opens, and ``apply`` mirrors each
committed write's edge changes (``EdgeChange``; never a rolled-back one:
the environment hands them over only after commit). Per entity and way it
holds a ``graph_traverse.Node``: the edges as tuples in index order plus the
open ones flattened, shared between the subject's and the object's node.

Memory is bounded by ``max_edges``: open edges are always held, closed ones
only while they end after ``floor``, which rises (dropping the edges that
ended first) when there are more. A walk at a block before ``floor``, or of
a graph whose open edges alone pass ``max_edges`` (the index then switches
itself off), returns None and the store walks LMDB instead.

Concurrency: one writer (the environment serialises writes and their
``apply``) and any number of readers. ``apply`` prepares new nodes aside,
then publishes them under a sequence counter (a seqlock): a walk that saw
the counter move while it ran is done again holding the lock, so no walk
mixes two commits. This relies on the GIL making each dict read and write
atomic. It must not open transactions except in ``build``, nor write.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

from grimoire.errors import StoreError
from grimoire.logs import get_logger
from grimoire.records.graph import Direction, EntityRef, Neighbor
from grimoire.stores.graph import codec
from grimoire.stores.graph.traverse import (
    OBJECT,
    OPEN_END,
    SUBJECT,
    Edge,
    Node,
    Reached,
    Side,
    bfs_memory,
)
from grimoire.stores.graph.versions import EdgeChange

__all__ = ["DEFAULT_MAX_EDGES", "Adjacency"]

log = get_logger(__name__)

# 265-295 B per edge held (scripts/bench_stores.py --part graph): ~55 MiB
DEFAULT_MAX_EDGES = 200_000
_KEEP = 0.75  # a prune keeps this share of the closed-edge budget, so it runs rarely
_Work = dict[bytes, list[Edge]]


class Adjacency:
    """Entity edges by subject (``out``) and by object (``in``), for ``bfs_memory``."""

    def __init__(self, max_edges: int) -> None:
        """Empty; use ``Adjacency.build``."""
        self.max_edges = max_edges
        self.floor = 0  # closed edges ending at or before it are not held
        self.open_edges = 0
        self.closed_edges = 0
        self.disabled = False
        self._out: dict[bytes, Node] = {}
        self._in: dict[bytes, Node] = {}
        self._refs: dict[bytes, tuple[bytes, EntityRef]] = {}  # key -> (shared key, ref)
        self._predicates: dict[bytes, str] = {}
        self._seq = 0  # odd while apply publishes
        self._lock = threading.Lock()

    @classmethod
    def build(cls, txn: Any, dbs: dict[str, Any], max_edges: int, *,
              floor: int | None = None) -> Adjacency:
        """Read the entity edges from ``by_object`` in ``txn``: all open ones, closed ones
        ending after ``floor`` (None: the floor that fits ``max_edges``, as a prune picks it).
        """
        index = cls(max_edges)
        by_object = dbs["by_object"]
        if floor is None:
            floor = index._pick_floor(txn.cursor(by_object), txn.stat(by_object)["entries"])
            if floor is None:
                return index
        index.floor = floor
        after = codec.block_bytes(floor)
        out: _Work = {}
        into: _Work = {}
        for key, value in txn.cursor(by_object).iternext(keys=True, values=True):
            if value[8:16] > after:
                edge = index._edge(key, value)
                out.setdefault(edge[SUBJECT], []).append(edge)
                into.setdefault(edge[OBJECT], []).append(edge)
                index._count(edge, 1)
        # by_object is sorted by object, then edge: each subject's list needs sorting.
        index._out = {key: _node(sorted(edges), OBJECT) for key, edges in out.items()}
        index._in = {key: _node(edges, SUBJECT) for key, edges in into.items()}
        return index

    def _pick_floor(self, cursor: Any, edges: int) -> int | None:
        """A first pass over the edges' ends, so the build decodes only the edges it keeps."""
        if edges <= self.max_edges:
            return 0
        ends = [value[8:16] for value in cursor.iternext(keys=False, values=True)]
        closed = sorted((end for end in ends if end != codec.OPEN), reverse=True)
        budget = self.max_edges - (len(ends) - len(closed))
        if budget < 0:
            self.disable("open edges exceed max_edges", open_edges=len(ends) - len(closed))
            return None
        keep = int(budget * _KEEP)
        return int.from_bytes(closed[keep], "big") if keep < len(closed) else 0

    def __len__(self) -> int:
        return self.open_edges + self.closed_edges

    # -- reads ------------------------------------------------------------------------------

    def walk(self, starts: list[bytes], max_hops: int, block: int, direction: Direction,
             goal: bytes | None = None) -> list[Reached] | None:
        """``bfs_memory`` to the end or to ``goal``; None if this index cannot answer."""
        seq = self._seq
        if not seq & 1:
            if self.disabled or block < self.floor:
                return None
            found = self._walk(starts, max_hops, block, direction, goal)
            if self._seq == seq:
                return found
        with self._lock:  # a write was publishing: walk again while it cannot
            if self.disabled or block < self.floor:
                return None
            return self._walk(starts, max_hops, block, direction, goal)

    def entity(self, key: bytes) -> EntityRef:
        """The entity of ``key``, decoded once per entity rather than once per walk."""
        held = self._refs.get(key)
        return codec.decode_entity_key(key) if held is None else held[1]

    def neighbors(self, found: list[Reached]) -> list[Neighbor]:
        """``found`` as records, built without ``Neighbor.__init__`` (see ``_SLOTS``)."""
        if _SLOTS is None:
            return [Neighbor(self.entity(k), h, p, w) for k, h, p, w in found]
        refs, new, (entity, hops, predicate, direction) = self._refs, object.__new__, _SLOTS
        out = []
        for key, hop, name, way in found:
            held = refs.get(key)  # a write may drop it after the walk: decode then
            record = new(Neighbor)
            entity(record, codec.decode_entity_key(key) if held is None else held[1])
            hops(record, hop)
            predicate(record, name)
            direction(record, way)
            out.append(record)
        return out

    def nodes(self) -> tuple[dict[bytes, Node], dict[bytes, Node]]:
        """Copies of the ``out`` and ``in`` node maps (tests compare them with a rebuild)."""
        with self._lock:
            return dict(self._out), dict(self._in)

    def _walk(self, starts: list[bytes], max_hops: int, block: int, direction: Direction,
              goal: bytes | None) -> list[Reached]:
        return bfs_memory(None if direction == "in" else self._out,
                          None if direction == "out" else self._in, starts, max_hops, block, goal)

    # -- writes (the writer only) -------------------------------------------------------------

    def apply(self, changes: Iterable[EdgeChange]) -> None:
        """Mirror one committed transaction's edge changes, in the order they were made."""
        if self.disabled:
            return
        try:
            self._apply(changes)
        except Exception:  # derived data: switch off, walks read LMDB, which holds every edge
            log.exception("graph.adjacency.failed")
            self.disable("apply failed")

    def _apply(self, changes: Iterable[EdgeChange]) -> None:
        out: _Work = {}
        into: _Work = {}
        floor = codec.block_bytes(self.floor)
        for added, object_key, value in changes:
            if value[8:16] <= floor:  # ended before the window: never held (open ends are max)
                continue
            edge = self._edge(object_key, value)
            for work, nodes, key in ((out, self._out, edge[SUBJECT]),
                                     (into, self._in, edge[OBJECT])):
                edges = work.get(key)
                if edges is None:
                    node = nodes.get(key)
                    edges = work[key] = [] if node is None else list(node[3])
                at = bisect_left(edges, edge)
                if added:
                    edges.insert(at, edge)
                elif at < len(edges) and edges[at] == edge:
                    del edges[at]
                else:
                    raise StoreError("graph adjacency lacks an edge LMDB deleted")
            self._count(edge, 1 if added else -1)
        self._publish(out, into)
        if self.open_edges > self.max_edges:
            self.disable("open edges exceed max_edges", open_edges=self.open_edges)
        elif len(self) > self.max_edges:
            self._prune()

    def _publish(self, out: _Work, into: _Work, floor: int | None = None) -> None:
        fresh = [(self._out, {k: _node(e, OBJECT) if e else None for k, e in out.items()}),
                 (self._in, {k: _node(e, SUBJECT) if e else None for k, e in into.items()})]
        with self._lock:
            self._seq += 1
            try:
                if floor is not None:
                    self.floor = floor  # first: walks below it go to LMDB from now on
                for nodes, changed in fresh:
                    for key, node in changed.items():
                        if node is None:
                            nodes.pop(key, None)
                        else:
                            nodes[key] = node
                for key in out.keys() | into.keys():
                    if key not in self._out and key not in self._in:
                        self._refs.pop(key, None)
            finally:
                self._seq += 1

    def _prune(self) -> None:
        """Raise ``floor`` so the closed edges held fit ``_KEEP`` of the budget left."""
        keep = int((self.max_edges - self.open_edges) * _KEEP)
        ends = sorted((e[1] for node in self._out.values() for e in node[3] if e[1] != OPEN_END),
                      reverse=True)
        if keep >= len(ends):
            return
        floor = ends[keep]
        out: _Work = {}
        into: _Work = {}
        for work, nodes in ((out, self._out), (into, self._in)):
            for key, node in nodes.items():
                if any(e[1] <= floor for e in node[3]):
                    work[key] = [e for e in node[3] if e[1] > floor]
        dropped = sum(len(node[3]) - len(out[key]) for key, node in self._out.items()
                      if key in out)
        self.closed_edges -= dropped
        self._publish(out, into, floor)
        log.info("graph.adjacency.prune", floor=floor, dropped=dropped, held=len(self))

    def disable(self, reason: str, **fields: int) -> None:
        """Stop answering (every walk returns None from now on) and free the memory."""
        with self._lock:
            self._seq += 1
            self.disabled = True
            self._out, self._in, self._refs = {}, {}, {}
            self._seq += 1
        log.warning("graph.adjacency.disabled", reason=reason, max_edges=self.max_edges,
                    **fields)

    def _count(self, edge: Edge, sign: int) -> None:
        if edge[1] == OPEN_END:
            self.open_edges += sign
        else:
            self.closed_edges += sign

    def _edge(self, object_key: bytes, value: bytes) -> Edge:
        """An index value of ``by_object`` as an ``Edge``, its keys and predicate shared."""
        end = 33 + value[32]
        raw_end = value[8:16]
        predicate = self._predicates.get(value[33:end])
        if predicate is None:
            predicate = self._predicates[value[33:end]] = value[33:end].decode()
        return (int.from_bytes(value[:8], "big"),
                OPEN_END if raw_end == codec.OPEN else int.from_bytes(raw_end, "big"),
                value[16:32], predicate, self._key(value[end:]), self._key(object_key))

    def _key(self, key: bytes) -> bytes:
        held = self._refs.get(key)
        if held is None:
            held = self._refs[key] = (key, codec.decode_entity_key(key))
        return held[0]


def _slot_setters() -> tuple[Callable[[Neighbor, Any], None], ...] | None:
    """Setters of ``Neighbor``'s slots, to build records without the frozen ``__init__``.

    Its four ``object.__setattr__`` calls made building 650 records 1.1 ms of a
    1.5 ms depth-3 call; setting the slots directly halves that. Only while
    ``Neighbor`` has no ``__post_init__``: should it gain checks, it is built
    through its constructor again.
    """
    if hasattr(Neighbor, "__post_init__") or not hasattr(Neighbor, "__slots__"):
        return None
    return tuple(Neighbor.__dict__[name].__set__
                 for name in ("entity", "hops", "predicate", "direction"))


_SLOTS = _slot_setters()


def _node(edges: list[Edge], side: Side) -> Node:
    """The ``Node`` of edges in index order; ``side`` picks the entity at the other end.

    Comprehensions rather than one loop: this runs for every entity a commit
    touches, and was a quarter of a 1,000-fact batch's time as a loop.
    """
    live = [edge for edge in edges if edge[1] == OPEN_END]
    settled = edges[-1][0] if edges else 0  # the latest start: edges sort by valid_from
    if len(live) < len(edges):
        settled = max(settled, max(edge[1] for edge in edges if edge[1] != OPEN_END))
    return (settled, tuple([edge[side] for edge in live]), tuple([edge[3] for edge in live]),
            tuple(edges))
