"""Where the gate put a distilled claim that did not become an entry of its own.

The admission gate may merge a new claim into a near-identical entry (cosine
> 0.90), skip it as a duplicate, or reject it. The distiller only knows the
claims stored on entries, so the next run (ten episodes later) would propose
the same claim again, and the gate would merge it again (an immediate upvote,
bypassing the batched votes) or log another rejection (skewing the admission
rate). An alias remembers the outcome per claim key, in the semantic meta
table (``learn.claim.<sha1 of the key>``):

- merged / skipped into entry E → later proposals are a batched UPVOTE of E;
- rejected with support n → not proposed again until the support has doubled.

Must not: decide anything about the claim itself (the gate does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from grimoire.context import Context
from grimoire.records import Claim

__all__ = ["Alias", "get_alias", "set_alias"]

PREFIX = "learn.claim."


@dataclass(frozen=True, slots=True)
class Alias:
    decision: str
    entry_id: str | None
    support: int


def _key(claim: Claim) -> str:
    return PREFIX + hashlib.sha1(claim.key.encode(), usedforsecurity=False).hexdigest()


def get_alias(ctx: Context, claim: Claim) -> Alias | None:
    value = ctx.semantic.get_meta(_key(claim), None)
    if not isinstance(value, Mapping):
        return None
    decision, entry_id, support = value.get("decision"), value.get("entry_id"), value.get("support")
    if not isinstance(decision, str) or not isinstance(support, int):
        return None
    return Alias(decision, entry_id if isinstance(entry_id, str) else None, support)


def set_alias(ctx: Context, claim: Claim, decision: str, entry_id: str | None,
              now: int) -> None:
    """Writer thread. ``decision`` admitted / quarantined clears the alias (the entry holds it)."""
    if decision in ("admitted", "quarantined"):
        if ctx.semantic.get_meta(_key(claim), None) is not None:
            ctx.semantic.set_meta(_key(claim), None)
        return
    ctx.semantic.set_meta(_key(claim), {"decision": decision, "entry_id": entry_id,
                                        "support": int(claim.support), "at": now,
                                        "claim": claim.key})
