"""The episodes ``forget`` selects: by actor, by thread, or quoting a name.

Filters the in-memory rows of a snapshot in Arrow (the flushed chunks) and in Python (the
rows still buffered). Must not write.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from grimoire.stores.episodes.index import Snapshot

__all__ = ["QUOTED", "find_ids"]

QUOTED = ("text", "ref", "token_pair", "actor", "thread")


def find_ids(snap: Snapshot, *, actor: str | None = None, thread: str | None = None,
             quoting: Sequence[str] = ()) -> list[str]:
    """Ids (append order) of the episodes by ``actor``, in ``thread``, or whose text, ref,
    token pair, actor or thread quotes one of ``quoting`` (case-insensitive substring)."""
    out: list[str] = []
    for chunk in snap.chunks:
        conds = []
        for name, value in (("actor", actor), ("thread", thread)):
            if value is not None and name in chunk.column_names:
                conds.append(pc.equal(chunk.column(name), value))
        for name in QUOTED if quoting else ():
            if name not in chunk.column_names:
                continue
            column = pc.cast(chunk.column(name), pa.string())
            conds.extend(pc.match_substring(column, needle, ignore_case=True)
                         for needle in quoting)
        if conds:
            mask = pc.fill_null(functools.reduce(pc.or_kleene, conds), False)
            out.extend(chunk.column("id").filter(mask).to_pylist())
    low = [q.lower() for q in quoting]
    for ep in snap.pending[: snap.n - snap.flushed]:
        fields = [getattr(ep, name) or "" for name in QUOTED]
        if ((actor is not None and ep.actor == actor)
                or (thread is not None and ep.thread == thread)
                or any(q in f.lower() for q in low for f in fields)):
            out.append(ep.id)
    return out
