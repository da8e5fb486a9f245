"""Change points: where the curator saw the world change under a claim, and what follows.

When the curator's validation finds a stored claim decisively *reversed* by the
new episodes (``claims.reversal``), the data before that moment and the
data after it describe two different worlds. A learner whose window straddles
the change pools them: three mornings of gas at 6 gwei and one at 42 still
average well below the day's 24, so it would keep upvoting the stale claim and
voting down the reversed one the curator has just proposed, for as long as
its window holds the old world (with the default 2,000 episodes, days).

So the curator records a change point per claim *family* (strategy, target and
the condition's fields: the claims that the same episodes judge, whatever
their window bounds or direction), at the first new episode that matched the
reversed claim, and a learner drops its operations on that family while its
window still starts before the change point (a mixed window is evidence for
neither world). Meanwhile the curator's own validation, which reads only new
episodes, carries the family. Once the window has moved past the change point
the learner votes again, and the point is no longer needed.

The points live in the semantic meta key ``claim_change_points`` as
``{family: unix ms}``; ``record`` merges (newest wins) on the writer thread in
one transaction, bounded to ``MAX_POINTS`` families. ``family`` and
``without_straddling`` are pure. Must not: judge claims or change entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from curator.distiller.operations import Operation
from grimoire.context import Context
from grimoire.records import Claim

__all__ = ["CHANGE_POINTS_KEY", "MAX_POINTS", "family", "load", "record",
           "without_straddling"]

CHANGE_POINTS_KEY = "claim_change_points"
MAX_POINTS = 1024  # families kept; the oldest go first (each is one reversal, a rare event)


def family(claim: Claim) -> str:
    """The claims one set of episodes judges: strategy, the condition's fields, target."""
    return f"{claim.strategy or '*'}|{','.join(sorted(claim.condition))}|{claim.target}"


def _parse(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items()
            if isinstance(v, int) and not isinstance(v, bool)}


def load(ctx: Context) -> dict[str, int]:
    """The recorded change points, ``{family: unix ms}`` (empty when none)."""
    return _parse(ctx.semantic.get_meta(CHANGE_POINTS_KEY, None))


def record(ctx: Context, points: Mapping[str, int]) -> dict[str, int]:
    """Merge ``points`` into the stored ones (the later time wins), on the writer thread."""
    if not points:
        return load(ctx)

    def write() -> dict[str, int]:
        with ctx.semantic.transaction():
            merged = _parse(ctx.semantic.get_meta(CHANGE_POINTS_KEY, None))
            for key, at in points.items():
                merged[key] = max(at, merged.get(key, at))
            if len(merged) > MAX_POINTS:
                newest = sorted(merged.items(), key=lambda kv: kv[1])[-MAX_POINTS:]
                merged = dict(newest)
            ctx.semantic.set_meta(CHANGE_POINTS_KEY, merged)
        return merged

    result: dict[str, int] = ctx.writer.call(write)
    return result


def without_straddling(
    ops: Sequence[Operation], points: Mapping[str, int], window_start: int | None,
) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """(kept operations, dropped ones with the reason): an operation is dropped when its
    claim's family changed at a time after ``window_start`` (the oldest distilled episode),
    so the window mixes the world before the change with the world after it."""
    if not points or window_start is None:
        return list(ops), []
    kept: list[Operation] = []
    dropped: list[tuple[Operation, str]] = []
    for op in ops:
        at = points.get(family(op.claim))
        if at is not None and window_start < at:
            dropped.append((op, f"the window straddles a change the curator saw at {at}"))
        else:
            kept.append(op)
    return kept, dropped
