"""Facts an episode states by its structured fields and the entities its text names.

Entities are those of retrieval's mentions (``grimoire.retrieval.stages.mentions``), so
that the graph and the mention index speak of the same nodes: a pair "WETH/USDC" is the
pool ``USDC/WETH`` (sorted), its tokens ``USDC`` and ``WETH``.

Predicates Grimoire writes by itself (all ``custom:``; the store keeps one open triple per
subject and predicate, so each is single-valued for its subject):

=====================  =================  ===================  ============================
predicate              subject            object               read from
=====================  =================  ===================  ============================
custom:token0          pool A/B           token A (sorted)     any episode's ``token_pair``
custom:token1          pool A/B           token B              any episode's ``token_pair``
custom:venue_pool      contract venue     pool A/B             an action's ``tool`` + pair
custom:venue_protocol  contract venue     contract <tool>      an action's ``tool``
custom:venue_chain     contract venue     string <chain>       an action's ``chain``
custom:feed_for        oracle <name pair> pool of the pair     text "<Name> <PAIR> oracle|feed"
custom:venue_pool      contract venue     pool A/B             text "<Name> [vN] <PAIR> pool"
custom:venue_protocol  contract venue     contract <name>      text "<Name> [vN] <PAIR> pool"
custom:co_occurs.<k>   entity             entity <k>           ``cooccur`` (consolidation)
=====================  =================  ===================  ============================

A venue is where an action ran: ``<tool>@<chain>:<pool>`` (``uniswap_v3@ethereum:USDC/WETH``;
without a chain ``<tool>:<pool>``), a contract entity: one protocol's pool on one chain.
Every fact keeps the first episode that showed it (``source_episode``) and starts at that
episode's time (``valid_from``: unix ms, the data's time, not a block).

The oracle reading is a grammatical one, not a vocabulary: a capitalised name, a pair and
the entity kind's own word ("oracle" or "feed") in that order ("Chainlink WETH/USD oracle").
A protocol named in text is read the same way: a capitalised name, an optional version and
a pair before the word "pool" ("Uniswap v3 WETH/USDC pool", "Curve stETH/ETH pool") is that
protocol's venue for the pool, on the episode's chain when it has one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from grimoire.records import Episode
from grimoire.records.graph import EntityKind, EntityRef, ObjectValue
from grimoire.retrieval.stages.mentions import episode_keys

__all__ = ["PREDICATES", "EpisodeFact", "entity_of_key", "episode_facts", "venue_id"]

TOKEN0 = "custom:token0"
TOKEN1 = "custom:token1"
VENUE_POOL = "custom:venue_pool"
VENUE_PROTOCOL = "custom:venue_protocol"
VENUE_CHAIN = "custom:venue_chain"
FEED_FOR = "custom:feed_for"
PREDICATES = (TOKEN0, TOKEN1, VENUE_POOL, VENUE_PROTOCOL, VENUE_CHAIN, FEED_FOR)

_PAIR = r"[A-Z][A-Z0-9.]{1,11}/[A-Z][A-Z0-9.]{1,11}"
_FEED = re.compile(rf"(?<![A-Za-z0-9])([A-Z][A-Za-z0-9]{{1,31}}) ({_PAIR}) (?:oracle|feed)\b",
                   re.IGNORECASE)
_POOL_MENTION = re.compile(
    rf"(?<![A-Za-z0-9])([A-Z][A-Za-z0-9]{{1,31}})(?: (v\d{{1,2}}))? ({_PAIR}) pool\b")
_MAX_ID = 200


@dataclass(frozen=True, slots=True)
class EpisodeFact:
    """One fact an episode states: (subject, predicate, object) at the episode's time."""

    subject: EntityRef
    predicate: str
    object: ObjectValue
    at: int  # unix ms: the episode's timestamp
    source: str  # the episode's id


def entity_of_key(key: str) -> EntityRef | None:
    """The graph entity of a mention key (``pool:USDC/WETH`` → pool ``USDC/WETH``), or None
    for a key that names no graph entity kind (a chain, an address of unknown kind)."""
    kind, _, ident = key.partition(":")
    if not ident or len(ident.encode()) > _MAX_ID:
        return None
    if kind == "pool":
        return EntityRef(EntityKind.POOL, ident)
    if kind == "token":
        return EntityRef(EntityKind.TOKEN, ident)
    if kind in {k.value for k in EntityKind}:
        return EntityRef(EntityKind(kind), ident)
    return None


def venue_id(tool: str, chain: str | None, pool: str) -> str:
    """``<tool>@<chain>:<pool>`` (chain lower-cased), ``<tool>:<pool>`` without a chain."""
    where = f"{tool.strip()}@{chain.strip().lower()}" if chain and chain.strip() else tool.strip()
    return f"{where}:{pool}"


def _pool_of(keys: Iterable[str]) -> str | None:
    return next((k.partition(":")[2] for k in keys if k.startswith("pool:")), None)


def episode_facts(episode: Episode) -> list[EpisodeFact]:
    """The facts one episode states (possibly none), in a fixed order."""
    out: list[EpisodeFact] = []
    at, source = episode.timestamp, episode.id

    def add(subject: EntityRef, predicate: str, obj: ObjectValue) -> None:
        if len(subject.id.encode()) <= _MAX_ID:
            out.append(EpisodeFact(subject, predicate, obj, at, source))

    keys = episode_keys(episode)
    for key in keys:
        if key.startswith("pool:"):
            pool = key.partition(":")[2]
            first, _, second = pool.partition("/")
            if first and second:
                ref = EntityRef(EntityKind.POOL, pool)
                add(ref, TOKEN0, ObjectValue.entity(EntityRef(EntityKind.TOKEN, first)))
                add(ref, TOKEN1, ObjectValue.entity(EntityRef(EntityKind.TOKEN, second)))
    traded = _pool_of(episode_keys(_structured_only(episode)))
    tool = (episode.tool or "").strip()
    if tool and traded and len(tool) <= 64:
        venue = EntityRef(EntityKind.CONTRACT, venue_id(tool, episode.chain, traded))
        add(venue, VENUE_POOL, ObjectValue.entity(EntityRef(EntityKind.POOL, traded)))
        add(venue, VENUE_PROTOCOL, ObjectValue.entity(EntityRef(EntityKind.CONTRACT, tool)))
        if episode.chain and episode.chain.strip():
            add(venue, VENUE_CHAIN, ObjectValue.string(episode.chain.strip().lower()))
    for match in _POOL_MENTION.finditer(episode.text):
        name, version, pair = match.group(1), match.group(2), match.group(3).upper()
        a, _, b = pair.partition("/")
        protocol = name.lower() + (f"_{version.lower()}" if version else "")
        pool = "/".join(sorted((a, b)))
        venue = EntityRef(EntityKind.CONTRACT, venue_id(protocol, episode.chain, pool))
        add(venue, VENUE_POOL, ObjectValue.entity(EntityRef(EntityKind.POOL, pool)))
        add(venue, VENUE_PROTOCOL, ObjectValue.entity(EntityRef(EntityKind.CONTRACT, protocol)))
    for match in _FEED.finditer(episode.text):
        name, pair = match.group(1), match.group(2).upper()
        a, _, b = pair.partition("/")
        feed_pool = "/".join(sorted((a, b)))
        add(EntityRef(EntityKind.ORACLE, f"{name} {pair}"), FEED_FOR,
            ObjectValue.entity(EntityRef(EntityKind.POOL, feed_pool)))
    return out


def _structured_only(episode: Episode) -> Episode:
    """The episode without its text: the pool its ``token_pair`` field names, not its prose."""
    return replace(episode, text="")
