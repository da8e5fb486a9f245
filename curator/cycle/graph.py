"""The ``graph`` phase: the knowledge graph fills itself from this cycle's episodes.

Each cycle (``curator.graph_fill``):

1. the facts the window's episodes state (``curator.graph.facts``) are asserted once each,
   at the first episode that showed them (``valid_from`` = its time, ``source_episode`` =
   its id), confidence ``FACT_CONFIDENCE`` per cycle that shows them (the store combines
   cycles as independent evidence and counts them in ``evidence_count``);
2. the entities whose episodes keep occurring together (``curator.graph.cooccur``, window
   ``curator.graph_cooccur_window_ms``) are related by ``custom:co_occurs.<other>``, valid
   from their first co-occurrence, confidence ``1 - 1/lift``, one more piece of evidence per
   cycle that finds them again;
3. a co-occurrence relation whose entities were both seen enough this cycle but no more
   often together than chance is closed at the cycle's data time (``kg.invalidate``'s
   bi-temporal close: what was known before stays readable with ``kg.known_at``).

With an LLM configured, the triples its Reflexion analysis proposes are asserted by that
path (``curator.learn.llm_paths``), not here. Writes run on the writer thread, one
transaction per cycle (a fact the store refuses, e.g. one older than a later assertion
of its subject and predicate, is skipped and logged, the others kept).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from curator.cycle.state import Cycle
from curator.graph.cooccur import anchors, co_occurrences, pair_stats
from curator.graph.facts import entity_of_key, episode_facts
from grimoire.errors import ValidationError
from grimoire.logs import get_logger
from grimoire.records.graph import MAX_BLOCK, Fact, ObjectValue
from grimoire.retrieval.stages.mentions import episode_keys, key_of_ref

__all__ = ["CO_OCCURS", "FACT_CONFIDENCE", "co_occurs_predicate", "fill_graph"]

log = get_logger(__name__)

CO_OCCURS = "custom:co_occurs."
FACT_CONFIDENCE = 0.5  # per cycle: a structured field says it, nothing has checked it
_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
_NAME_ROOM = 64 - len("co_occurs.")


def co_occurs_predicate(other_key: str) -> str:
    """``custom:co_occurs.<other>`` with the other entity's key made a predicate name."""
    name = _NAME.sub("-", other_key)
    if len(name) > _NAME_ROOM:
        digest = hashlib.sha1(other_key.encode()).hexdigest()[:8]
        name = f"{name[:_NAME_ROOM - 9]}-{digest}"
    return CO_OCCURS + name


def _assert(cy: Cycle, facts: Sequence[Fact]) -> tuple[int, int, int]:
    """(new, reinforced, skipped) after asserting ``facts`` on the writer thread."""
    graph = cy.ctx.graph

    def write() -> tuple[int, int, int]:
        try:
            results = graph.assert_many(facts)
            skipped = 0
        except ValidationError:  # one refused fact: keep the others, one by one
            results, skipped = [], 0
            for fact in facts:
                try:
                    results.extend(graph.assert_many([fact]))
                except ValidationError as exc:
                    skipped += 1
                    log.info("graph.fact.skipped", subject=fact.subject.id,
                             predicate=fact.predicate, error=str(exc))
        new = sum(1 for r in results if not r.reinforced)
        return new, len(results) - new, skipped

    return cy.ctx.writer.call(write) if facts else (0, 0, 0)


def fill_graph(cy: Cycle) -> dict[str, Any]:
    """The phase: structured facts, co-occurrence relations, relations that stopped holding."""
    cfg = cy.ctx.config.curator
    if not cfg.graph_fill or not cy.window:
        return {"facts": 0, "reinforced": 0, "related": 0, "closed": 0}
    seen: dict[tuple[Any, ...], Fact] = {}
    for episode in cy.window:
        for found in episode_facts(episode):
            key = (found.subject, found.predicate, found.object)
            if key not in seen:
                seen[key] = Fact(found.subject, found.predicate, found.object, found.at,
                                 found.source, FACT_CONFIDENCE)
    rows = [(e.timestamp, e.id, anchors(episode_keys(e))) for e in cy.window]
    related, events, span = co_occurrences(rows, cfg.graph_cooccur_window_ms,
                                           cfg.graph_cooccur_min_support,
                                           cfg.graph_cooccur_min_lift)
    first_source = {(t, key): ident for key, items in events.items() for t, ident in items}
    relations = []
    for pair in related:
        subject, other = entity_of_key(pair.a), entity_of_key(pair.b)
        if subject is None or other is None:
            continue
        confidence = min(0.95, max(0.05, 1.0 - 1.0 / pair.lift))
        relations.append(Fact(subject, co_occurs_predicate(pair.b), ObjectValue.entity(other),
                              pair.first_at, first_source.get((pair.first_at, pair.a))
                              or first_source.get((pair.first_at, pair.b)), confidence))
    new, reinforced, skipped = _assert(cy, list(seen.values()) + relations)
    closed = _close_stopped(cy, events, span, {(p.a, p.b) for p in related})
    return {"facts": new, "reinforced": reinforced, "skipped": skipped,
            "related": len(relations), "closed": closed}


def _close_stopped(cy: Cycle, events: dict[str, list[tuple[int, str]]], span: tuple[int, int],
                   holding: set[tuple[str, str]]) -> int:
    """Close the open co-occurrence relations this window contradicts, at its data time."""
    cfg = cy.ctx.config.curator
    support = cfg.graph_cooccur_min_support
    stale: list[str] = []
    for key in sorted(k for k, v in events.items() if len(v) >= support):
        subject = entity_of_key(key)
        if subject is None:
            continue
        for triple in cy.ctx.graph.query_at(subject, MAX_BLOCK):
            other = triple.object.as_entity
            if not triple.predicate.startswith(CO_OCCURS) or other is None:
                continue
            other_key = key_of_ref(other)
            if (key, other_key) in holding or len(events.get(other_key, ())) < support:
                continue
            pair = pair_stats(events, key, other_key, cfg.graph_cooccur_window_ms, span)
            if pair.lift < 1.0 and triple.valid_from <= cy.now:
                stale.append(triple.id)
    if not stale:
        return 0

    def close() -> int:
        for triple_id in stale:
            cy.ctx.graph.invalidate(triple_id, cy.now)
        return len(stale)

    count: int = cy.ctx.writer.call(close)
    log.info("graph.cooccur.closed", relations=count, at=cy.now)
    return count
