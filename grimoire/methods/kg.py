"""The knowledge-graph methods of the API (``kg.*``): validate params, call the graph store.

Objects may be given in the store's tagged form (``{"kind": "number",
"value": 3}``, a bare entity ``{"kind": "pool", "id": "0x…"}``) or, for
convenience, as a plain JSON string, number or boolean. Writes run on the
single writer thread; queries run on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.guard.redact import redact_fact, redactor
from grimoire.records.graph import (
    Fact,
    ObjectValue,
    parse_block,
    parse_direction,
    parse_entity_ref,
    parse_hops,
    parse_time,
    parse_triple_id,
)

__all__ = ["kg_assert", "kg_assert_many", "kg_at", "kg_invalidate", "kg_known_at",
           "kg_neighbors"]


def _plain_object(value: object) -> object:
    if isinstance(value, bool):
        return ObjectValue.boolean(value)
    if isinstance(value, int | float):
        return ObjectValue.number(float(value))
    if isinstance(value, str):
        return ObjectValue.string(value)
    return value


def kg_assert(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise ValidationError("params must be an object", field="params")
    data = dict(params)
    if "object" in data:
        data["object"] = _plain_object(data["object"])
    fact = Fact.from_dict(data)
    secrets = redactor(ctx.config.privacy.redact, ctx.config.privacy.phone_region)
    if secrets is not None:  # privacy.redact: before the store sees it
        fact = redact_fact(fact, secrets).validated()
    result = ctx.writer.call(lambda: ctx.graph.assert_many([fact])[0])
    ctx.events.emit("GrimoireWrite", ctx.now(), kind="triple", count=1,
                    closed=len(result.closed), reinforced=result.reinforced)
    return result.to_dict()


def kg_assert_many(ctx: Context, params_list: Sequence[Mapping[str, Any]]
                   ) -> list[dict[str, Any]]:
    """``kg_assert`` for many facts (an import): all validated first, then asserted in one
    writer job (the graph store's one write transaction), in order."""
    facts = []
    for n, params in enumerate(params_list):
        if not isinstance(params, Mapping):
            raise ValidationError("must be an object", field=f"facts[{n}]")
        data = dict(params)
        if "object" in data:
            data["object"] = _plain_object(data["object"])
        facts.append(Fact.from_dict(data))
    if not facts:
        return []
    results = ctx.writer.call(lambda: ctx.graph.assert_many(facts))
    ctx.events.emit("GrimoireWrite", ctx.now(), kind="triple", count=len(facts),
                    closed=sum(len(r.closed) for r in results),
                    reinforced=sum(bool(r.reinforced) for r in results))
    return [r.to_dict() for r in results]


def kg_invalidate(ctx: Context, id: Any, at: Any) -> dict[str, Any]:
    triple_id = parse_triple_id(id, "id")
    block = parse_block(at, "at")
    triple = ctx.writer.call(lambda: ctx.graph.invalidate(triple_id, block))
    return {"triple": triple.to_dict()}


def kg_at(ctx: Context, subject: Any, block: Any) -> dict[str, Any]:
    ref = parse_entity_ref(subject, "subject")
    triples = ctx.graph.query_at(ref, parse_block(block, "block"))
    return {"triples": [t.to_dict() for t in triples]}


def kg_known_at(ctx: Context, subject: Any, time: Any) -> dict[str, Any]:
    ref = parse_entity_ref(subject, "subject")
    triples = ctx.graph.query_as_known_at(ref, parse_time(time, "time"))
    return {"triples": [t.to_dict() for t in triples]}


def kg_neighbors(ctx: Context, subject: Any, block: Any, max_hops: Any = 3,
                 direction: Any = "out") -> dict[str, Any]:
    ref = parse_entity_ref(subject, "subject")
    neighbors = ctx.graph.k_hop_neighbors(
        ref, parse_hops(max_hops, "max_hops"), parse_block(block, "block"),
        direction=parse_direction(direction, "direction"),
    )
    return {"neighbors": [n.to_dict() for n in neighbors]}
