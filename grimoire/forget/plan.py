"""What a ``forget`` removes, decided once from the stores as they are.

A selector names one thing: ``episode`` (an id), ``actor`` (every episode it wrote),
``thread`` (every episode in it), ``entity`` (``kind:id`` such as ``token:WETH``, or a
bare name: every episode whose text, ref, token pair, actor or thread quotes its id, and
the KG triples about it) or ``matching`` (every episode whose text quotes the phrase).
Quoting is a case-insensitive substring match, so a name shorter than 3 characters is
refused (it would match nearly everything). Beyond the episodes, the plan takes:

- the entries that quote the name (content, tags, source, claim), the entries left with no
  support once the episodes go, and the L1 / L2 summaries that quoted a forgotten episode
  (removed; rebuilt from the episodes they still cover);
- the KG triples about the entity or quoting the name, and those a forgotten episode
  sourced;
- the retrieval-log rows that returned a forgotten item or whose query quotes the name,
  the admission-log and curator-audit rows of a removed entry or that quote the name;
- the entries that only lose some evidence: their ✓ / ✗ and cited support recounted.

``--episode`` has no name: only what refers to that id goes. Must not erase anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from curator import api as curator_api
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.records.graph import EntityKind, EntityRef

__all__ = ["KINDS", "Plan", "Selector", "make_plan", "parse_selector"]

KINDS = ("episode", "actor", "thread", "entity", "matching")
MIN_NAME = 3
PREVIEW = 80
_ENTITY_KINDS = {k.value for k in EntityKind}


@dataclass(frozen=True, slots=True)
class Selector:
    kind: str
    value: str

    @property
    def needles(self) -> list[str]:
        """The name whose every quotation goes (none for an episode id)."""
        if self.kind == "episode":
            return []
        if self.kind == "entity":
            return [self.value.split(":", 1)[1] if self.entity is not None else self.value]
        return [self.value]

    @property
    def entity(self) -> EntityRef | None:
        kind, sep, ident = self.value.partition(":")
        if self.kind != "entity" or not sep or kind not in _ENTITY_KINDS or not ident:
            return None
        return EntityRef(EntityKind(kind), ident)


def parse_selector(params: Mapping[str, Any]) -> Selector:
    """Exactly one of ``KINDS`` with a non-empty string; a name of >= 3 characters."""
    given = [(k, params[k]) for k in KINDS if params.get(k) is not None]
    if len(given) != 1:
        raise ValidationError(f"give exactly one of {', '.join(KINDS)} (got "
                              f"{', '.join(k for k, _ in given) or 'none'})", field="params")
    kind, value = given[0]
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be a non-empty string", field=kind)
    selector = Selector(kind, value.strip())
    for needle in selector.needles:
        if len(needle) < MIN_NAME:
            raise ValidationError(f"{needle!r} is shorter than {MIN_NAME} characters: as a "
                                  "quoted name it would match nearly everything", field=kind)
    return selector


@dataclass
class Plan:
    selector: Selector
    episodes: list[str]
    entries: list[str]
    triples: list[str]
    retrieval: list[str]
    admission: list[int]
    delta: list[int]
    curator: dict[str, Any] = field(default_factory=dict)

    def ids(self) -> dict[str, Any]:
        """What the tombstone keeps: ids only."""
        return {"episodes": self.episodes, "entries": self.entries, "triples": self.triples,
                "retrieval": self.retrieval, "admission": self.admission,
                "delta": self.delta}

    def counts(self) -> dict[str, int]:
        return {"episodes": len(self.episodes), "entries": len(self.entries),
                "triples": len(self.triples), "retrieval_log": len(self.retrieval),
                "admission_log": len(self.admission), "curator_deltas": len(self.delta),
                "entries_recounted": len(self.curator.get("recount", {})),
                "summaries_rebuilt": len(self.curator.get("summaries", []))}

    def listing(self, ctx: Context, limit: int = 50) -> dict[str, Any]:
        """What ``--dry-run`` shows: each episode and entry that would go, a preview each."""
        episodes = []
        for id_ in self.episodes[:limit]:
            ep = ctx.episodes.get(id_)
            if ep is not None:
                episodes.append({"id": ep.id, "timestamp": ep.timestamp, "actor": ep.actor,
                                 "thread": ep.thread, "text": ep.text[:PREVIEW]})
        found = ctx.semantic.get_entries(self.entries[:limit])
        entries = [{"id": e.id, "category": e.category.value, "status": e.status.value,
                    "content": e.content[:PREVIEW]} for e in found.values()]
        return {"episodes": episodes, "entries": entries, "triples": self.triples[:limit],
                "recounted": sorted(self.curator.get("recount", {}))[:limit],
                "listed_at_most": limit}


def make_plan(ctx: Context, selector: Selector) -> Plan:
    """Read the stores and decide everything that goes (see the module doc)."""
    needles = selector.needles
    if selector.kind == "episode":
        episodes = [selector.value] if ctx.episodes.get(selector.value) is not None else []
    elif selector.kind == "actor":
        episodes = ctx.episodes.find_ids(actor=selector.value, quoting=needles)
    elif selector.kind == "thread":
        episodes = ctx.episodes.find_ids(thread=selector.value, quoting=needles)
    else:
        episodes = ctx.episodes.find_ids(quoting=needles)
    episodes = list(dict.fromkeys(episodes))
    quoting = ctx.semantic.entries_quoting(needles)
    citing = [e for e in ctx.semantic.entries_citing(episodes) if e not in set(quoting)]
    cur = curator_api.forget_plan(ctx, citing, episodes)
    removed = sorted({*quoting, *cur["unsupported"], *(s["id"] for s in cur["summaries"])})
    entity = selector.entity
    triples = ctx.graph.triples_about(entities=[entity] if entity is not None else [],
                                      needles=needles, source_episodes=episodes)
    rows = ctx.semantic.rows_referencing([*episodes, *removed], removed, needles)
    return Plan(selector, episodes, removed, triples, rows["retrieval"], rows["admission"],
                rows["delta"], {"recount": cur["recount"], "summaries": cur["summaries"]})
