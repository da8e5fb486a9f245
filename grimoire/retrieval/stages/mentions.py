"""Entity mentions: which episodes and entries name which entities (retrieval's graph backend).

Recognition turns an item into entity keys, ``<kind>:<id>``:

- an episode's ``token_pair`` "WETH/USDC" → ``pool:USDC/WETH`` (the pair sorted, so
  both spellings are one pool), ``token:USDC``, ``token:WETH``;
- its ``chain`` "Base" → ``chain:base``;
- in any text (episode text, entry content, the query): 0x addresses →
  ``address:0x…`` (lower-cased: checksum case is presentation) and upper-case
  pairs such as "WETH/USDC" (upper case only: "and/or" or "24/7" in prose is
  not a pool).

A query may also name bare symbols ("is WETH safe?"): every upper-case word
of 2–11 characters is tried as ``token:<word>``; an unknown one simply finds
nothing. Bare symbols are not recorded at write time (a heuristic's "IF"
would become a token).

Writes: ``record_episode_mentions`` is a post-write hook (writer thread); it
also indexes entries added since the last run (a rowid watermark in meta).
``index_new_entries`` does that alone: ``entry.add`` runs it in the same writer
job as the insert (the agent's entry is in the index when the call returns);
the curator's and learners' batches catch up with the next episode write, and
retrieval schedules it when it sees the watermark behind.

Reads: ``graph_items`` expands the query's entities through the knowledge
graph (``k_hop_neighbors`` within ``retrieval.graph_hops``, both directions,
facts valid now) and returns the items that mention any entity reached,
nearest entity first. Must not rank beyond that order nor fuse scores.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.ids import id_time_ms
from grimoire.logs import get_logger
from grimoire.records import Episode
from grimoire.records.graph import MAX_BLOCK, EntityKind, EntityRef

__all__ = [
    "ENTRY_WATERMARK",
    "GraphItem",
    "episode_keys",
    "graph_items",
    "index_new_entries",
    "key_of_ref",
    "mentions_cached",
    "parse_entities",
    "query_keys",
    "record_episode_mentions",
    "text_keys",
]

log = get_logger(__name__)

ENTRY_WATERMARK = "mentions.entry_rid"
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{40}\b")
_PAIR = re.compile(r"(?<![A-Za-z0-9])([A-Z][A-Z0-9.]{1,11})/([A-Z][A-Z0-9.]{1,11})(?![A-Za-z0-9])")
_SYMBOL = re.compile(r"(?<![A-Za-z0-9/])([A-Z][A-Z0-9]{1,10})(?![A-Za-z0-9/])")
_MAX_QUERY_SYMBOLS = 8
_MAX_KEYS = 12  # mentionable entities looked up per query, nearest first
_FANOUT = 8  # entities expanded per hop of the KG walk
_MAX_NEIGHBOURS = 256  # one-hop neighbours kept per entity (hubs are cut here)
_MAX_CACHED_KEYS = 4096
_KG_CACHE = "mentions.kg_neighbours"
_MENTION_CACHE = "mentions.newest"
_MENTION_VERSIONS = "mentions.versions"
_MENTIONABLE = ("token:", "pool:", "chain:", "address:")  # what write-time recognition records
_ENTRY_BATCH = 500
_EXTRA_KINDS = ("chain", "address")


def _pool(a: str, b: str) -> str:
    first, second = sorted((a.upper(), b.upper()))
    return f"pool:{first}/{second}"


def _pair_keys(a: str, b: str) -> list[str]:
    return [_pool(a, b), f"token:{a.upper()}", f"token:{b.upper()}"]


def text_keys(text: str) -> list[str]:
    """Entity keys named in free text: 0x addresses and upper-case pairs, in order."""
    keys = [f"address:{m.group(0).lower()}" for m in _ADDRESS.finditer(text)]
    for match in _PAIR.finditer(text):
        keys.extend(_pair_keys(match.group(1), match.group(2)))
    return list(dict.fromkeys(keys))


def episode_keys(episode: Episode) -> list[str]:
    """Entity keys of an episode: its token pair, its chain and what its text names."""
    keys: list[str] = []
    if episode.token_pair:
        parts = [p.strip() for p in re.split(r"[/\-:]", episode.token_pair) if p.strip()]
        if len(parts) == 2:
            keys.extend(_pair_keys(parts[0], parts[1]))
        elif len(parts) == 1:
            keys.append(f"token:{parts[0].upper()}")
    if episode.chain and episode.chain.strip():
        keys.append(f"chain:{episode.chain.strip().lower()}")
    keys.extend(text_keys(episode.text))
    return [k for k in dict.fromkeys(keys) if len(k) <= 300]


def key_of_ref(ref: EntityRef) -> str:
    """The mention key of a knowledge-graph entity."""
    if _ADDRESS.fullmatch(ref.id):
        return f"address:{ref.id.lower()}"
    if ref.kind is EntityKind.TOKEN:
        return f"token:{ref.id.upper()}"
    if ref.kind is EntityKind.POOL:
        parts = ref.id.split("/")
        if len(parts) == 2 and all(parts):
            return _pool(parts[0], parts[1])
        return f"pool:{ref.id.upper()}"
    return f"{ref.kind.value}:{ref.id}"


def refs_of_key(key: str) -> list[EntityRef]:
    """The knowledge-graph entities a mention key may be stored as (none for a chain)."""
    kind, _, ident = key.partition(":")
    if kind == "address":
        return [EntityRef(k, ident) for k in EntityKind]
    if kind == "token":
        return [EntityRef(EntityKind.TOKEN, ident)]
    if kind == "pool":
        parts = ident.split("/")
        ids = [ident, f"{parts[1]}/{parts[0]}"] if len(parts) == 2 else [ident]
        return [EntityRef(EntityKind.POOL, i) for i in dict.fromkeys(ids)]
    if kind in {k.value for k in EntityKind}:
        return [EntityRef(EntityKind(kind), ident)]
    return []


def parse_entities(value: object) -> list[str]:
    """The ``entities`` retrieve parameter (``[{kind, id}]``) as mention keys.

    Kinds are the knowledge graph's (token, pool, contract, …) plus ``chain``
    and ``address``; ValidationError names ``entities[i]`` otherwise.
    """
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValidationError("must be a list of {kind, id}", field="entities")
    if len(value) > 32:
        raise ValidationError("at most 32 entities", field="entities")
    keys: list[str] = []
    allowed = [k.value for k in EntityKind] + list(_EXTRA_KINDS)
    for i, item in enumerate(value):
        where = f"entities[{i}]"
        if not isinstance(item, Mapping) or set(item) != {"kind", "id"}:
            raise ValidationError("must be {kind, id}", field=where)
        kind, ident = item["kind"], item["id"]
        if kind not in allowed:
            raise ValidationError(f"{kind!r} is not one of: {', '.join(allowed)}",
                                  field=f"{where}.kind")
        if not isinstance(ident, str) or not ident.strip() or len(ident) > 255:
            raise ValidationError("must be a non-empty string of <= 255 chars",
                                  field=f"{where}.id")
        ident = ident.strip()
        if kind == "chain":
            keys.append(f"chain:{ident.lower()}")
        elif kind == "address":
            keys.append(f"address:{ident.lower()}")
        else:
            keys.append(key_of_ref(EntityRef(EntityKind(kind), ident)))
    return list(dict.fromkeys(keys))


def query_keys(query: str, entities: Sequence[str]) -> list[str]:
    """The query's entities: the given keys, then what its text names, then bare symbols."""
    keys = list(entities) + text_keys(query)
    symbols = [f"token:{m.group(1)}" for m in _SYMBOL.finditer(query)]
    keys.extend(symbols[:_MAX_QUERY_SYMBOLS])
    return list(dict.fromkeys(keys))


# --- writes (writer thread) ---------------------------------------------------------------


def _changed(ctx: Context, keys: Iterable[str]) -> None:
    """After a commit: the cached newest mentions of these keys are stale."""
    versions: dict[str, int] = ctx.extras.setdefault(_MENTION_VERSIONS, {})
    for key in set(keys):
        versions[key] = versions.get(key, 0) + 1


def _index_entries(ctx: Context) -> int:
    start = int(ctx.semantic.get_meta(ENTRY_WATERMARK, 0))
    rows = ctx.semantic.entries_after(start, _ENTRY_BATCH)
    if not rows:
        return 0
    mentions = [(key, entry_id, "entry", created)
                for _, entry_id, content, created in rows for key in text_keys(content)]
    with ctx.semantic.transaction():
        ctx.semantic.add_mentions(mentions)
        ctx.semantic.set_meta(ENTRY_WATERMARK, rows[-1][0])
    _changed(ctx, (key for key, _, _, _ in mentions))
    ctx.extras[ENTRY_WATERMARK] = rows[-1][0]
    return len(rows)


def index_new_entries(ctx: Context) -> int:
    """Index the mentions of entries added since the watermark (writer thread); how many."""
    total = 0
    while (done := _index_entries(ctx)) == _ENTRY_BATCH:
        total += done
    return total + done


def record_episode_mentions(ctx: Context, episodes: Sequence[Episode], _: np.ndarray) -> None:
    """Post-write hook: record the new episodes' entity mentions, then catch up on entries."""
    rows = [(key, ep.id, "episode", id_time_ms(ep.id)) for ep in episodes
            for key in episode_keys(ep)]
    if rows:
        ctx.semantic.add_mentions(rows)
        _changed(ctx, (key for key, _, _, _ in rows))
    index_new_entries(ctx)


# --- reads (any thread) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GraphItem:
    """An item reached through the graph: its nearest entity's hop count and what it names."""

    id: str
    kind: str
    hops: int
    matched: int
    recorded_at: int


def _neighbours(ctx: Context, key: str) -> tuple[str, ...]:
    """Mention keys of the entities one KG hop from ``key`` (facts valid now), cached.

    The cache lives until the graph's triple count changes (every assertion
    of a new or contradicting fact adds a triple); an ``invalidate`` alone
    shows up when the next fact is asserted. A hub keeps its first
    ``_MAX_NEIGHBOURS`` (mentionable ones first): past that, "near WETH" no
    longer narrows anything down.
    """
    cache = _kg_cache(ctx)
    found: tuple[str, ...] | None = cache.get(key)
    if found is None:
        reached: set[str] = set()
        for ref in refs_of_key(key):
            for neighbour in ctx.graph.k_hop_neighbors(ref, 1, MAX_BLOCK, direction="both"):
                reached.add(key_of_ref(neighbour.entity))
        reached.discard(key)
        found = cache[key] = tuple(sorted(reached, key=lambda k: (not _mentionable(k), k))
                                   )[:_MAX_NEIGHBOURS]
    return found


def _kg_cache(ctx: Context) -> dict[Any, Any]:
    """The walks' cache (``_neighbours``, ``_nearest``), emptied when the triple count moves."""
    version = ctx.graph.count()
    cache: dict[Any, Any] | None = ctx.extras.get(_KG_CACHE)
    if cache is None or cache.get("") != version or len(cache) > _MAX_CACHED_KEYS:
        cache = ctx.extras[_KG_CACHE] = {"": version}
    return cache


def _mentionable(key: str) -> bool:
    return key.startswith(_MENTIONABLE)


def _nearest(ctx: Context, keys: Sequence[str], max_hops: int, limit: int
             ) -> list[tuple[str, int]]:
    """The ``limit`` mentionable entities nearest to ``keys`` in the KG, with their hops.

    Breadth first, one hop at a time, stopping once ``limit`` are found;
    within a hop by key. Bounded for hubs: at most ``_FANOUT`` entities are
    expanded per hop, bridges (oracles, contracts, …: never mentioned
    themselves) before tokens and pools. Cached with the neighbours (an agent asks
    about the same few entities again and again; a hub's walk sorts ~2,000 keys).
    """
    cache = _kg_cache(ctx)
    memo_key = ("nearest", max_hops, limit, tuple(keys))  # never equal to a key (a str)
    memo: tuple[tuple[str, int], ...] | None = cache.get(memo_key)
    if memo is None:
        memo = cache[memo_key] = tuple(_walk_nearest(ctx, keys, max_hops, limit))
    return list(memo)


def _walk_nearest(ctx: Context, keys: Sequence[str], max_hops: int, limit: int
                  ) -> list[tuple[str, int]]:
    seen = set(keys)
    out = [(k, 0) for k in keys if _mentionable(k)][:limit]
    frontier = list(keys)
    for hop in range(1, max_hops + 1):
        if len(out) >= limit or not frontier:
            break
        layer: list[str] = []
        for key in frontier[:_FANOUT]:
            for other in _neighbours(ctx, key):
                if other not in seen:
                    seen.add(other)
                    layer.append(other)
        layer.sort()
        out.extend((k, hop) for k in layer if _mentionable(k))
        frontier = [k for k in layer if not _mentionable(k)] + [k for k in layer
                                                                 if _mentionable(k)]
    return out[:limit]


def _mentions(ctx: Context, key: str, until: int | None, limit: int
              ) -> list[tuple[str, str, int]]:
    """An entity's newest mentions, cached until a write mentions it again (not under ``at``).

    A per-key version, bumped by the writer after each commit, is read
    before the query and checked after it, so rows read before a commit
    that lands meanwhile are never cached.
    """
    if until is not None:
        return ctx.semantic.mentions_of(key, until=until, limit=limit)
    versions: dict[str, int] = ctx.extras.setdefault(_MENTION_VERSIONS, {})
    cache: dict[str, tuple[int, int, list[tuple[str, str, int]]]] | None = ctx.extras.get(
        _MENTION_CACHE)
    if cache is None or len(cache) > _MAX_CACHED_KEYS:
        cache = ctx.extras[_MENTION_CACHE] = {}
    version = versions.get(key, 0)
    hit = cache.get(key)
    if hit is not None and hit[0] == version and hit[1] >= limit:
        return hit[2][:limit]
    rows = ctx.semantic.mentions_of(key, limit=limit)
    if versions.get(key, 0) == version:
        cache[key] = (version, limit, rows)
    return rows


def mentions_cached(ctx: Context, key: str, until: int | None, limit: int
                    ) -> list[tuple[str, str, int]]:
    """``(item_id, kind, recorded_at)`` of an entity's newest ``limit`` mentions (cached)."""
    return _mentions(ctx, key, until, limit)


def graph_items(ctx: Context, keys: Sequence[str], *, until: int | None,
                limit: int) -> tuple[list[GraphItem], dict[str, Any]]:
    """Items mentioning the query's entities or their KG neighbourhood, best first.

    Order: nearest entity (hops), then how many of the reached entities the
    item names, then newest, then id. Returns the items and a small trace
    (entities reached) for the retrieval's explanation.
    """
    if not keys or limit <= 0:
        return [], {"entities": []}
    nearest = _nearest(ctx, keys, ctx.config.retrieval.graph_hops, _MAX_KEYS)
    best: dict[str, list[Any]] = {}
    for key, hop in nearest:
        for item_id, kind, at in _mentions(ctx, key, until, limit):
            found = best.get(item_id)
            if found is None:
                best[item_id] = [kind, hop, 1, at]
            else:
                found[1] = min(found[1], hop)
                found[2] += 1
    ranked = sorted(best.items(), key=lambda kv: (kv[1][1], -kv[1][2], -kv[1][3], kv[0]))
    items = [GraphItem(item_id, v[0], v[1], v[2], v[3]) for item_id, v in ranked[:limit]]
    trace = {"entities": [{"key": k, "hops": h} for k, h in nearest[:24]]}
    return items, trace
