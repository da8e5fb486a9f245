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
their window bounds or direction; the negative and the positive outcome rate of
one condition are one family, "swaps on WETH/DAI win" turning into "... lose"),
at the first new episode that matched the reversed claim. A learner whose window
still starts before the change point does not take that family's operations from
its whole window (a mixed window is evidence for neither world): it judges the
family on the episodes since the change point alone (``since_change``), so the
world after the change is learned as soon as those episodes show it, not once a
long window has forgotten the old one. Once the window has moved past the change
point the whole window is the learner's again, and the point is no longer needed.

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

__all__ = ["CHANGE_POINTS_KEY", "MAX_POINTS", "family", "load", "record", "since_change",
           "without_straddling"]

CHANGE_POINTS_KEY = "claim_change_points"
MAX_POINTS = 1024  # families kept; the oldest go first (each is one reversal, a rare event)


_OUTCOME_RATES = frozenset({"outcome:negative_rate", "outcome:positive_rate"})


def family(claim: Claim) -> str:
    """The claims one set of episodes judges: strategy, the condition's fields, target (an
    outcome's negative and positive rate are one target: the same actions judge both)."""
    target = "outcome:rate" if claim.target in _OUTCOME_RATES else claim.target
    return f"{claim.strategy or '*'}|{','.join(sorted(claim.condition))}|{target}"


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


def since_change(points: Mapping[str, int], window_start: int | None,
                 window_end: int | None) -> list[int]:
    """The change points inside a learner's window (after its oldest episode, at or before
    its newest), oldest first: each is a sub-window the learner judges its families on."""
    if not points or window_start is None or window_end is None:
        return []
    return sorted({at for at in points.values() if window_start < at <= window_end})


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
