"""PLAYBOOK.md from the stores: choose what is listed, compile it, write it.

Owns which entries PLAYBOOK.md shows (SPEC §8 step 9): the active heuristics
and warnings, the insights and causal links they were derived from, and the
active causal links, each at its effective confidence at ``now``; the
front-matter counts; and the atomic write to ``config.playbook_path``
(``playbook.get``, which reads it back, is ``grimoire.methods.playbook``). The
layout is ``playbook.compile_playbook``'s (pure). Same store state, tick and time →
byte-identical file.

Must not change any entry: it only reads the semantic store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from grimoire.context import Context
from grimoire.gate.decay import effective_confidence, initial_confidence
from grimoire.guard.instructions import MARK
from grimoire.records import Category, EntryStatus, GrimoireEntry, Provenance
from grimoire.stores.semantic.types import EntryFilter
from playbook import ConfidenceRule, PlaybookItem, compile_listing, write_atomic

__all__ = ["playbook_counts", "render_playbook", "select_entries", "write_playbook"]

_RULES = (Category.HEURISTIC, Category.WARNING)
_SUPPORT = (Category.INSIGHT, Category.CAUSAL_LINK)


def select_entries(ctx: Context, snapshot: Mapping[str, GrimoireEntry] | None = None,
                   ) -> list[GrimoireEntry]:
    """Active rules, their parent insights / causal links (unless archived), active links,
    and active insights with a structured claim (a regularity earned from outcomes that no
    rule was derived from, e.g. a level that is neither a cost nor a gain, stands alone).

    ``snapshot`` (every entry by id, e.g. a curator cycle's) is used instead of reading
    the store when given."""
    semantic = ctx.semantic
    if snapshot is None:
        rules = semantic.list_entries(EntryFilter(categories=_RULES,
                                                  statuses=(EntryStatus.ACTIVE,)), limit=None)
        links = [e for e in semantic.list_entries(
            EntryFilter(categories=_SUPPORT, statuses=(EntryStatus.ACTIVE,)), limit=None)
            if _stands_alone(e)]
    else:
        active = [e for e in snapshot.values() if e.status is EntryStatus.ACTIVE]
        rules = [e for e in active if e.category in _RULES]
        links = [e for e in active if e.category in _SUPPORT and _stands_alone(e)]
    # Text that instructs a model (marked on write: grimoire.guard.instructions) is never
    # listed as a rule, whatever its numbers: PLAYBOOK.md is read back into prompts.
    rules = [e for e in rules if MARK not in e.tags]
    chosen = {e.id: e for e in (*rules, *links)}
    for rule in rules:
        for parent_id in rule.parent_entry_ids:
            if parent_id in chosen:
                continue
            parent = (semantic.get_entry(parent_id) if snapshot is None
                      else snapshot.get(parent_id))
            if (parent is not None and parent.category in _SUPPORT
                    and parent.status not in (EntryStatus.ARCHIVED, EntryStatus.QUARANTINED)):
                chosen[parent.id] = parent
    return sorted(chosen.values(), key=lambda e: e.id)


def _stands_alone(entry: GrimoireEntry) -> bool:
    """An active causal link, or an active insight that states a structured claim."""
    return entry.category is Category.CAUSAL_LINK or entry.claim is not None


def playbook_counts(ctx: Context) -> dict[str, int]:
    """Store-level numbers for the front matter (lower_snake_case keys)."""
    counts = ctx.semantic.counts()
    out = {"entries_total": counts.total, "episodes": ctx.episodes.count(),
           "causal_edges": counts.causal_edges, "quarantine_pending": counts.quarantine_pending}
    for status in EntryStatus:
        out[f"entries_{status.value}"] = int(counts.by_status.get(status.value, 0))
    cycle = ctx.semantic.get_meta("curator_state", None)
    if isinstance(cycle, dict) and isinstance(cycle.get("cycle"), int):
        out["curator_cycles"] = int(cycle["cycle"])
    return out


def _compile(ctx: Context, now: int, tick: int, counts: dict[str, int] | None,
             snapshot: Mapping[str, GrimoireEntry] | None = None,
             ) -> tuple[str, list[GrimoireEntry], list[PlaybookItem]]:
    """The text, the entries selected, and the items the text shows (within the line cap)."""
    entries = select_entries(ctx, snapshot)
    items = [PlaybookItem(e, min(1.0, max(0.0, effective_confidence(
        e, now, ctx.config.decay)))) for e in entries]
    cfg = ctx.config.decay
    rule = ConfidenceRule(cfg.prior_strength, initial_confidence(Provenance.SELF_LEARNED, cfg),
                          cfg.max_confidence)
    text, shown = compile_listing(items, tick=tick, generated_at=now,
                                  counts=playbook_counts(ctx) if counts is None else counts,
                                  max_lines=ctx.config.playbook.max_lines, rule=rule,
                                  simulated=ctx.simulated)
    return text, entries, shown


def render_playbook(ctx: Context, *, now: int, tick: int,
                    counts: dict[str, int] | None = None) -> str:
    """The PLAYBOOK.md text for the current store state at ``now`` (nothing is written)."""
    return _compile(ctx, now, tick, counts)[0]


def write_playbook(ctx: Context, *, now: int, tick: int, counts: dict[str, int] | None = None,
                   snapshot: Mapping[str, GrimoireEntry] | None = None,
                   cycle: int | None = None) -> dict[str, Any]:
    """Compile and atomically replace ``config.playbook_path``; returns what was written.

    With ``cycle``, what the file shows (each entry's confidence, ✓ and ✗ as printed) is
    recorded as that cycle's listing (``grimoire report`` charts it), on the writer thread
    once the file is in place."""
    text, entries, shown = _compile(ctx, now, tick, counts, snapshot)
    path = ctx.config.playbook_path
    write_atomic(path, text)
    if cycle is not None:
        rows = [(i.entry.id, i.effective_confidence, i.entry.validated_count,
                 i.entry.contradicted_count) for i in shown]
        ctx.writer.call(lambda: ctx.semantic.record_playbook_listing(cycle, rows, now=now))
    data = text.encode("utf-8")
    selected = {c.value: sum(e.category is c for e in entries)
                for c in (*_RULES, *_SUPPORT)}
    return {"path": str(path), "bytes": len(data), "lines": text.count("\n"),
            "sha256": hashlib.sha256(data).hexdigest(), "selected": selected}
