"""Batched votes: the learners' UPVOTE / DOWNVOTE, held until the curator nets them.

The contract with the curator cycle: the semantic meta key ``pending_votes``
holds ``{entry_id: {"up": n, "down": n}}``; ``record_votes`` adds to it (on
the writer thread, read and write in one transaction, so two learners never
lose each other's votes); the curator reads it once per cycle, logs each
entry's votes as re-findings (not evidence: they move neither ✓ / ✗ nor
confidence) and clears the key.
Nothing here changes a confidence. Must not: apply votes or touch entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grimoire.context import Context
from grimoire.errors import ValidationError

__all__ = ["VOTES_KEY", "parse_votes", "record_votes"]

VOTES_KEY = "pending_votes"
_DIRECTIONS = ("up", "down")


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"must be an integer >= 0, got {value!r}", field=field)
    return value


def parse_votes(value: object, field: str = "votes") -> dict[str, dict[str, int]]:
    """Validate ``{entry_id: {"up"?: n, "down"?: n}}``; returns it with both counts filled in."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be an object of entry id -> {up, down}", field=field)
    out: dict[str, dict[str, int]] = {}
    for entry_id, counts in value.items():
        if not isinstance(entry_id, str) or not entry_id:
            raise ValidationError("entry ids must be non-empty strings", field=field)
        where = f"{field}.{entry_id}"
        if not isinstance(counts, Mapping) or set(counts) - set(_DIRECTIONS):
            raise ValidationError('must be {"up": n, "down": n}', field=where)
        out[entry_id] = {d: _count(counts.get(d, 0), f"{where}.{d}") for d in _DIRECTIONS}
    return out


def _merge(current: dict[str, dict[str, int]], votes: Mapping[str, Mapping[str, int]]
           ) -> dict[str, dict[str, int]]:
    for entry_id, counts in votes.items():
        held = current.setdefault(entry_id, {"up": 0, "down": 0})
        for direction in _DIRECTIONS:
            held[direction] += counts[direction]
    return current


def record_votes(ctx: Context, votes: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Add ``votes`` to ``pending_votes`` (writer thread, one transaction); returns the new total.

    Bad input raises ValidationError before anything is written.
    """
    parsed = parse_votes(votes)
    parsed = {k: v for k, v in parsed.items() if v["up"] or v["down"]}
    if not parsed:
        held: dict[str, Any] = ctx.semantic.get_meta(VOTES_KEY, None) or {}
        return held

    def write() -> dict[str, Any]:
        with ctx.semantic.transaction():
            current = parse_votes(ctx.semantic.get_meta(VOTES_KEY, None), f"meta.{VOTES_KEY}")
            merged = _merge(current, parsed)
            ctx.semantic.set_meta(VOTES_KEY, merged)
        return dict(merged)

    result: dict[str, Any] = ctx.writer.call(write)
    return result
