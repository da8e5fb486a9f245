"""Episode and entry records for the retrieval pipeline, cached per context.

- ``episode_by_id``: episodes never change once written, so a record built
  once (from the store's Arrow rows, ~0.1–0.4 ms each) is kept, bounded.
- ``current_entries``: entries at the versions a search reported
  (``SemanticStore.knn_versions``): a cached record while its version —
  updated_at and the ranking inputs — is unchanged, the rest in one query.
- ``node`` / ``require_event``: an id looked up as episode or entry (the
  event of a query, a causal ancestor, a link of a chain).

Caches live in ``ctx.extras`` and are dropped whole when full. Must not rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grimoire.context import Context
from grimoire.errors import NotFoundError
from grimoire.records import Episode, GrimoireEntry
from grimoire.retrieval.stages.support import record_time
from grimoire.stores.semantic.mentions import Version, version_of
from grimoire.stores.semantic.types import EdgeKind

__all__ = ["BOOST_KINDS", "Node", "current_entries", "episode_by_id", "node", "require_event"]

# The edges a causal walk follows: outcome edges link entries to decisions, not causes.
BOOST_KINDS = (EdgeKind.EXPLICIT, EdgeKind.AUTO, EdgeKind.DISCOVERED, EdgeKind.KG)
_EPISODES = "retrieval.episodes"
_ENTRIES = "retrieval.entries"
MAX_CACHED = 20_000  # records of ~1 kB each (candidates add a 1.5 kB vector)


def current_entries(ctx: Context, wanted: Sequence[tuple[str, Version]]
                    ) -> dict[str, GrimoireEntry]:
    """Entries at these versions: cached records when current, the rest in one statement.

    The cache keeps each record beside its version (``version_of`` once per record read,
    not once per search hit)."""
    cache: dict[str, tuple[GrimoireEntry, Version]] | None = ctx.extras.get(_ENTRIES)
    if cache is None or len(cache) > MAX_CACHED:
        cache = ctx.extras[_ENTRIES] = {}
    out: dict[str, GrimoireEntry] = {}
    missing = []
    for entry_id, version in wanted:
        found = cache.get(entry_id)
        if found is not None and found[1] == version:
            out[entry_id] = found[0]
        else:
            missing.append(entry_id)
    if missing:
        for entry_id, entry in ctx.semantic.get_entries(missing).items():
            cache[entry_id] = (entry, version_of(entry))
            out[entry_id] = entry
    return out


def episode_by_id(ctx: Context, episode_id: str) -> Episode | None:
    """An episode by id through a per-context cache (episodes never change once written)."""
    cache: dict[str, Episode] | None = ctx.extras.get(_EPISODES)
    if cache is None or len(cache) > MAX_CACHED:
        cache = ctx.extras[_EPISODES] = {}
    found = cache.get(episode_id)
    if found is None:
        found = ctx.episodes.get(episode_id)
        if found is not None:
            cache[episode_id] = found
    return found


@dataclass(frozen=True, slots=True)
class Node:
    """An episode or entry looked up by id (the event, an ancestor, a chain link)."""

    id: str
    kind: str
    text: str
    time: int  # episode timestamp / entry created_at
    recorded: int
    episode: Episode | None = None
    entry: GrimoireEntry | None = None


def node(ctx: Context, item_id: str) -> Node | None:
    episode = episode_by_id(ctx, item_id)
    if episode is not None:
        return Node(item_id, "episode", episode.text, episode.timestamp,
                    record_time(item_id, episode.timestamp), episode=episode)
    entry = ctx.semantic.get_entry(item_id)
    if entry is not None:
        return Node(item_id, "entry", entry.content, entry.created_at, entry.created_at,
                    entry=entry)
    return None


def require_event(ctx: Context, event_id: str, at: int | None) -> Node:
    found = node(ctx, event_id)
    if found is None or (at is not None and found.recorded > at):
        raise NotFoundError(f"event_id: no episode or entry {event_id!r}"
                            + ("" if found is None else " recorded by 'at'"))
    return found
