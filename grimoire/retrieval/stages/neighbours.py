"""Thread neighbours for the reranker's pool: the turns just before and after the pool's best.

In a conversation or a task log the evidence for a question often sits beside the turn
that matches it: the question was asked in one turn and answered in the next ("When did
you go?" / "Last Saturday!"), or a second piece of a multi-part answer follows the first.
Neither backend finds that turn when its own words and vector do not resemble the query.
With the learned reranker on, the pool's best ``retrieval.rerank_seeds`` episodes by a
preliminary convex fusion of the backends' lists (``hop.first_hop``) bring the
``retrieval.rerank_neighbours`` turns on each side of them in their own ``thread`` into
the pool, as the list ``neighbour.episode``: score = the seed's fused score divided by
the distance in turns (the nearest neighbour of the best seed first). The list carries no
fusion weight (``retrieval.fusion_weights`` has none for it): it widens what the reranker
reads (its rank and score are features), and leaves the order without the reranker as it
was.

A thread's turns are its episodes in append order (``EpisodeStore.find_ids``), looked up
once per thread and kept in ``ctx.extras`` (``Threads``): later writes are appended to the
threads already held (the store's append order read past the last position seen); a store
that shrank or changed under it (forget, an erase) is read again. Episodes without a thread
have no neighbours. No model call, no full-text query.

Owns: the list and the per-thread turn order. Must not fuse or rank.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from grimoire.context import Context
from grimoire.records import Episode
from grimoire.retrieval.fusion import convex
from grimoire.retrieval.stages.params import RetrieveRequest
from grimoire.retrieval.stages.records import episode_by_id
from grimoire.retrieval.stages.sources import Pool, episode_ok

__all__ = ["LIST", "Threads", "add_neighbours", "threads_of"]

LIST = "neighbour.episode"
_KEY = "retrieval.threads"
_MAX_HELD = 200_000  # turn ids held over every thread; past it the index starts again
_MAX_NEW = 256  # episodes written since the last look read one by one; more: start again


@dataclass
class Threads:
    """Per thread asked about, its episode ids in append order; ``seen`` positions of the
    store read (``last``: the id at ``seen - 1``, to notice a store that changed under it)."""

    seen: int = 0
    last: str | None = None
    turns: dict[str, list[str]] = field(default_factory=dict)
    where: dict[str, int] = field(default_factory=dict)  # id → its index in its thread
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _reset(self) -> None:
        self.seen, self.last = 0, None
        self.turns.clear()
        self.where.clear()

    def refresh(self, ctx: Context) -> None:
        """Catch up with the store: append new episodes to the threads held (under lock)."""
        ids, _ = ctx.episodes.all_vectors()
        n = len(ids)
        changed = self.seen > 0 and (n < self.seen or ids[self.seen - 1] != self.last)
        if changed or n - self.seen > _MAX_NEW or len(self.where) > _MAX_HELD:
            self._reset()
        elif n > self.seen and self.turns:
            for episode_id in ids[self.seen:n]:
                episode = episode_by_id(ctx, episode_id)
                if episode is None or episode_id in self.where:
                    continue
                held = self.turns.get(episode.thread) if episode.thread else None
                if held is not None:
                    self.where[episode_id] = len(held)
                    held.append(episode_id)
        self.seen, self.last = n, ids[n - 1] if n else None

    def around(self, ctx: Context, thread: str, episode_id: str, width: int
               ) -> list[tuple[str, int]]:
        """The ``width`` turns each side of ``episode_id`` in ``thread``: (id, distance)."""
        held = self.turns.get(thread)
        if held is None:
            held = self.turns[thread] = []
            for found in ctx.episodes.find_ids(thread=thread):
                if found not in self.where:
                    self.where[found] = len(held)
                    held.append(found)
        at = self.where.get(episode_id)
        if at is None or at >= len(held) or held[at] != episode_id:
            return []
        return [(held[i], abs(i - at)) for i in range(max(0, at - width),
                                                      min(len(held), at + width + 1))
                if i != at]


def threads_of(ctx: Context) -> Threads:
    """The context's thread index (created on first use)."""
    with ctx.state_lock:
        found: Threads | None = ctx.extras.get(_KEY)
        if found is None:
            found = ctx.extras[_KEY] = Threads()
        return found


def add_neighbours(ctx: Context, req: RetrieveRequest, pool: Pool) -> None:
    """Add ``neighbour.episode`` to ``pool`` (see the module doc); nothing when the seeds
    or the width are 0."""
    cfg = ctx.config.retrieval
    seeds_n, width = cfg.rerank_seeds, cfg.rerank_neighbours
    if seeds_n <= 0 or width <= 0 or not pool.episodes:
        return
    weights = cfg.fusion_weights_entities if req.entities else cfg.fusion_weights
    lists = {name: ids for name, ids in pool.lists.items() if name.endswith(".episode")}
    fused = convex(lists, pool.scores, weights, cfg.candidates)
    seeds = sorted((i for i in fused if i in pool.episodes), key=lambda i: (-fused[i], i))
    scores: dict[str, float] = {}
    index = threads_of(ctx)
    with index.lock:
        index.refresh(ctx)
        for seed in seeds[:seeds_n]:
            thread = pool.episodes[seed].thread
            if not thread:
                continue
            for other, distance in index.around(ctx, thread, seed, width):
                value = fused[seed] / distance
                if value > scores.get(other, -1.0):
                    scores[other] = value
    ranked: list[Episode] = []
    for episode_id in sorted(scores, key=lambda i: (-scores[i], i)):
        record = pool.episodes.get(episode_id) or episode_by_id(ctx, episode_id)
        if record is not None and episode_ok(record, req):
            ranked.append(record)
    if ranked:
        pool.add(LIST, ranked, [scores[e.id] for e in ranked])
