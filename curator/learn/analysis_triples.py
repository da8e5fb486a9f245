"""Seed 004's graph source 1 with an LLM: the analysis path's triples.

"When the LLM analyzes a triage event, its structured output includes tkg_triples – facts
to assert." Here the analysis is Reflexion's LLM steps (``LLMPaths._reflect``, on the LLM
worker): after them the model is asked for the relational facts the episode states, as
JSON triples in the graph's own vocabulary (its entity kinds, its predicates or
``custom:<name>``). Each one is checked by the graph records' own parser (a kind, a
predicate or an id the graph would refuse is dropped and counted) and asserted with the
episode as its ``source_episode``, valid from the episode's time (unix ms, the data's
time), at confidence ``LLM_CONFIDENCE``: the model read it, nothing has checked it.

A bad answer (no JSON, not a list) is an ``LLMError``: logged and counted by the caller;
nothing is written. Must not call the network itself (``ask`` is injected).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grimoire.context import Context
from grimoire.errors import LLMError, ValidationError
from grimoire.logs import get_logger
from grimoire.models.llm import parse_json_answer
from grimoire.records import Episode
from grimoire.records.graph import EntityKind, Fact, Predicate, parse_fact

__all__ = ["LLM_CONFIDENCE", "MAX_TRIPLES", "assert_llm_triples", "graph_messages",
           "parse_triples"]

log = get_logger(__name__)

LLM_CONFIDENCE = 0.5
MAX_TRIPLES = 8  # facts one episode may add through the model


def graph_messages(text: str) -> list[dict[str, str]]:
    kinds = ", ".join(k.value for k in EntityKind)
    predicates = ", ".join(p.value for p in Predicate)
    return [{"role": "system", "content": "You extract facts for an on-chain trading agent's "
             "knowledge graph. Be literal; only what the text states."},
            {"role": "user", "content": (
                f"Event: '{' '.join(text.split())[:600]}'\nList the relationships between "
                f"entities this event states, at most {MAX_TRIPLES}. Entity kinds: {kinds}. "
                f"Predicates: {predicates}, or custom:<name>. Answer with JSON only: "
                "{\"triples\": [{\"subject\": {\"kind\": ..., \"id\": ...}, \"predicate\": "
                "..., \"object\": {\"kind\": ..., \"id\": ...}}]} (an empty list if none).")}]


def parse_triples(answer: str) -> list[Mapping[str, Any]]:
    """The proposed triples (unchecked) from the model's answer."""
    data = parse_json_answer(answer)
    triples = data.get("triples") if isinstance(data, Mapping) else None
    if not isinstance(triples, list):
        raise LLMError("the LLM answer has no 'triples' list")
    return [t for t in triples if isinstance(t, Mapping)][:MAX_TRIPLES]


def facts_of(episode: Episode, proposed: Sequence[Mapping[str, Any]]) -> tuple[list[Fact], int]:
    """The proposals the graph accepts, as facts of ``episode``; and how many were refused."""
    facts, refused = [], 0
    for item in proposed:
        try:
            facts.append(parse_fact({"subject": item.get("subject"),
                                     "predicate": item.get("predicate"),
                                     "object": item.get("object"),
                                     "valid_from": episode.timestamp,
                                     "source_episode": episode.id,
                                     "confidence": LLM_CONFIDENCE}))
        except ValidationError:
            refused += 1
    return facts, refused


def assert_llm_triples(ctx: Context, ask: Callable[[list[dict[str, str]]], str],
                       episode: Episode) -> dict[str, int]:
    """Ask for the episode's triples and assert those the graph accepts (LLMError: none)."""
    facts, refused = facts_of(episode, parse_triples(ask(graph_messages(episode.text))))

    def write() -> int:
        written = 0
        for fact in facts:  # one by one: a fact older than its subject's history is refused
            try:
                ctx.graph.assert_many([fact])
                written += 1
            except ValidationError:
                pass
        return written

    written = ctx.writer.call(write) if facts else 0
    log.info("graph.llm.triples", episode_id=episode.id, asserted=written,
             refused=refused + len(facts) - written)
    return {"asserted": written, "refused": refused + len(facts) - written}
