"""Factories for the facade-level retrieval, feedback and causal tests (real stores in tmp)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.ids import new_id
from grimoire.models.embedders import Embedder, HashEmbedder
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance
from grimoire.retrieval.stages.writes import drain

HOUR = 3_600_000
DAY = 24 * HOUR


def open_grimoire(path: Path, clock: FrozenClock | None = None,
                  embedder: Embedder | None = None, **overrides: Any) -> Grimoire:
    """A Grimoire on real stores in ``path``; ``overrides`` are dotted config keys."""
    config = Config().replace(**overrides) if overrides else Config()
    return Grimoire.open(path, config=config, clock=clock or FrozenClock(),
                         embedder=embedder or HashEmbedder())


def put_entry(g: Grimoire, content: str, **fields: Any) -> GrimoireEntry:
    """Store an entry with exactly these fields (bypassing the admission gate)."""
    ctx = g.context
    now = ctx.now()
    values: dict[str, Any] = {
        "id": new_id(now), "category": Category.INSIGHT, "content": content,
        "confidence": 0.5, "quality_score": 0.5, "decay_class": DecayClass.TACTICAL,
        "provenance": Provenance.SELF_LEARNED, "created_at": now, "last_accessed_at": now,
        "status": EntryStatus.ACTIVE, "updated_at": now,
    }
    values.update(fields)
    entry = GrimoireEntry(**values)
    vector = ctx.embedder.embed([content])[0]
    ctx.writer.call(lambda: ctx.semantic.insert_entry(entry, vector))
    return entry


def settle(g: Grimoire) -> None:
    """Wait until every retrieval's log row and bookkeeping is written."""
    drain(g.context)


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["items"]]


def entry(g: Grimoire, entry_id: str) -> GrimoireEntry:
    found = g.context.semantic.get_entry(entry_id)
    assert found is not None
    return found


def replace_entry(g: Grimoire, entry_id: str, **changes: Any) -> GrimoireEntry:
    ctx = g.context
    updated = dataclasses.replace(entry(g, entry_id), **changes)
    ctx.writer.call(lambda: ctx.semantic.update_entry(updated))
    return updated
