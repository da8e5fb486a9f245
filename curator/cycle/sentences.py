"""Each entry's sentence states its current numbers (issue 24: one source of numbers).

An entry's numbers live in one place: its claim (effect, baseline and ``support``, the
episodes the sentence cites), which the curator's judgements update (``curator.cycle.
evidence``), and ✓ / ✗ beside it. Its words are a function of them: an entry with a
claim reads ``playbook.entry_sentence`` (the sentence PLAYBOOK.md prints), a rule derived
from an insight reads ``curator.cycle.derive``'s sentence with that insight's numbers.

Phase ``sentences`` (after every phase that moves numbers, before ``playbook``): every
entry whose stored content is not the sentence of its current numbers gets it, with a new
vector, as one change (op ``sentence``, in the audit trail). So PLAYBOOK.md,
``entry.explain``, ``entry.list`` / ``entry.get``, the report, retrieval and MCP, which
read the claim or the content, all state the same figures, never the ones of the day the
entry was written. Then the entries' full-text index is merged into one segment (the
cycle's writes, these rewrites the most, each added one; BM25 reads a third of the pages
after). Must not: change a claim, a count or a confidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from curator.cycle.derive import derive_rule
from curator.cycle.state import Change, Cycle, apply_changes, entries
from curator.cycle.transitions import derived_from
from grimoire.config import DistillerConfig
from grimoire.records import GrimoireEntry
from playbook.render_text import entry_sentence

__all__ = ["refresh_sentences", "sentence_for"]


def sentence_for(entry: GrimoireEntry, by_id: Mapping[str, GrimoireEntry],
                 cfg: DistillerConfig) -> str:
    """The words ``entry``'s current numbers make: its claim's sentence; for a rule derived
    from an insight (and with no claim of its own), the rule that insight derives now, if it
    is still this rule's kind; else its content as stored."""
    if entry.claim is not None:
        return entry_sentence(entry)
    source = derived_from(entry)
    insight = by_id.get(source) if source is not None else None
    if insight is not None and insight.claim is not None:
        rule = derive_rule(insight, cfg)
        if rule is not None and rule.category is entry.category:
            return rule.content
    return entry.content


def refresh_sentences(cy: Cycle) -> dict[str, Any]:
    """Phase: store the sentence of its current numbers as each entry's content."""
    known = entries(cy)
    cfg = cy.ctx.config.distiller
    stale = [(e, text) for e in known.values()
             if (text := sentence_for(e, known, cfg)) != e.content]
    refreshed = 0
    if stale:
        vectors = cy.ctx.embedder.embed([text for _, text in stale])
        changes = [_rewrite(e.id, text, vector) for (e, text), vector in
                   zip(stale, vectors, strict=True)]
        refreshed = len(apply_changes(cy, changes))
    cy.ctx.writer.call(cy.ctx.semantic.merge_text_index)
    return {"refreshed": refreshed}


def _rewrite(entry_id: str, text: str, vector: Any) -> Change:
    def mutate(cur: GrimoireEntry) -> GrimoireEntry | None:
        # ``text`` was made from the cycle's snapshot: written only while the stored claim
        # still makes it (numbers another writer moved since are re-rendered next cycle)
        if cur.content == text or (cur.claim is not None and entry_sentence(cur) != text):
            return None
        return dataclasses.replace(cur, content=text)

    return Change(entry_id, "sentence", mutate, embedding=vector,
                  why="its numbers changed: the sentence now states them")
