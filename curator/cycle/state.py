"""What every curator phase shares: the cycle's state, its episode window, and how changes apply.

Owns ``CycleState`` (persisted in the semantic store's meta under
``curator_state``: cycle number, the last cycle's time, the episode
watermark, when the last L2 chapter was written), ``Cycle`` (the running
cycle handed to each phase) and ``apply_changes``.

Changes are computed from a read snapshot on the curator's thread and
applied on the writer thread in short transactions of ``curator.write_batch``
entries each, never one long transaction, so the agent's writes and reads
are not stalled for the length of a cycle. A change is a function of the
entry *as it is when applied* (re-read inside the write transaction), not a
blind overwrite: a vote an outcome report made between the snapshot and the
write is kept. Every applied change is recorded as a curator delta (the
fields it changed, before and after, and why) for ``entry.explain``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.gate.admit import Proposal, admit
from grimoire.gate.decay import effective_confidence
from grimoire.logs import get_logger
from grimoire.records import Category, EntryStatus, Episode, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

__all__ = [
    "ALL_STATUSES",
    "LIVE",
    "STATE_KEY",
    "VOTES_KEY",
    "Applied",
    "Change",
    "Cycle",
    "CycleState",
    "admit_recorded",
    "apply_changes",
    "changed_fields",
    "data_time",
    "entries",
    "invalidate",
    "list_all",
    "load_window",
    "parse_votes",
    "pending_votes",
    "refresh",
    "store_time",
    "window_vectors",
]

log = get_logger(__name__)

STATE_KEY = "curator_state"
VOTES_KEY = "pending_votes"  # written by the learners (curator.learn.votes), netted here
_VOLATILE = frozenset({"updated_at"})

Mutation = Callable[[GrimoireEntry], GrimoireEntry | None]


@dataclass(frozen=True, slots=True)
class CycleState:
    """What the next cycle needs to know about the previous ones."""

    cycle: int = 0  # cycles completed
    last_now: int | None = None  # the previous cycle's time (unix ms)
    watermark: tuple[int, str] | None = None  # newest (timestamp, id) already processed
    last_l2_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"cycle": self.cycle, "last_now": self.last_now,
                "watermark": list(self.watermark) if self.watermark else None,
                "last_l2_at": self.last_l2_at}

    @classmethod
    def from_dict(cls, data: Any) -> CycleState:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValidationError("must be an object", field=f"meta.{STATE_KEY}")
        try:
            mark = data.get("watermark")
            return cls(
                cycle=int(data.get("cycle", 0)),
                last_now=None if data.get("last_now") is None else int(data["last_now"]),
                watermark=None if mark is None else (int(mark[0]), str(mark[1])),
                last_l2_at=None if data.get("last_l2_at") is None else int(data["last_l2_at"]),
            )
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise ValidationError(f"malformed curator state: {exc!r}",
                                  field=f"meta.{STATE_KEY}") from exc

    @classmethod
    def load(cls, ctx: Context) -> CycleState:
        return cls.from_dict(ctx.semantic.get_meta(STATE_KEY, None))


@dataclass
class Cycle:
    """One running cycle: the context, its number and time, and the episodes new to it."""

    ctx: Context
    now: int
    number: int  # 1-based number of this cycle
    previous: CycleState
    window: list[Episode]  # episodes after the previous watermark, oldest first
    notes: dict[str, Any] = field(default_factory=dict)
    # Every entry, read once and kept current with what the cycle itself writes (see
    # ``entries``): each phase re-listing 2,000 entries cost ~0.1 s a time.
    cache: dict[str, GrimoireEntry] | None = None

    def eff(self, entry: GrimoireEntry) -> float:
        return effective_confidence(entry, self.now, self.ctx.config.decay)

    @property
    def watermark(self) -> tuple[int, str] | None:
        if not self.window:
            return self.previous.watermark
        last = self.window[-1]
        return (last.timestamp, last.id)


def data_time(previous: CycleState, window: Sequence[Episode], clock_now: int) -> int:
    """The cycle's time: the newest episode the curator has seen (this window's, else the
    previous watermark's); the clock's reading only before any episode was seen.

    Everything a cycle judges, decays, archives or re-finds runs on it (SPEC §13 "data
    time"): an agent that backfills its history or replays a log writes episodes with
    their own past timestamps while its clock reads today, and a cycle at the clock's time
    would see every lookback empty, every learned entry decayed to the floor a few
    seconds after it was made, and a gate that scores every finding as stale. Time never
    runs backwards: episodes older than the watermark are not in the window."""
    if window:
        return window[-1].timestamp
    if previous.watermark is not None:
        return previous.watermark[0]
    return int(clock_now)


def store_time(ctx: Context) -> int:
    """The data's own time for what the owner reads (``explain``, ``entry.get`` / ``list``):
    the newest episode stored, else the curator's watermark, the clock only before any
    episode was written: the same notion ``data_time`` gives a cycle. A replayed or
    backfilled store shows each entry as its cycles saw it, not decayed by however long
    ago the replayed days were on the clock."""
    newest = ctx.newest_episode_time()  # without opening LanceDB when it is not open
    if newest is not None:
        return newest
    return data_time(CycleState.load(ctx), [], ctx.now())


def load_window(ctx: Context, after: tuple[int, str] | None, limit: int) -> list[Episode]:
    """Episodes newer than ``after`` (by (timestamp, id)), at most the ``limit`` newest,
    oldest first. The episode store reads from a snapshot: appends do not disturb it."""
    since = None if after is None else after[0]
    recent = ctx.episodes.recent(limit, since=since)
    if after is not None:
        recent = [e for e in recent if (e.timestamp, e.id) > after]
    return sorted(recent, key=lambda e: (e.timestamp, e.id))


@dataclass(frozen=True, slots=True)
class Change:
    """One change to one entry: ``mutate`` gets the entry as stored now and returns the new
    version (None or the same entry = nothing to do). ``op`` names it in the audit trail;
    ``record=False`` skips the delta (bookkeeping such as low-confidence counters)."""

    entry_id: str
    op: str
    mutate: Mutation
    why: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    record: bool = True
    embedding: npt.NDArray[np.float32] | None = None  # a new vector when the text changed
    consume: tuple[int, int] | None = None  # (up, down) batched votes this change applies


@dataclass(frozen=True, slots=True)
class Applied:
    entry_id: str
    op: str
    before: GrimoireEntry
    after: GrimoireEntry


def changed_fields(before: GrimoireEntry, after: GrimoireEntry) -> tuple[dict[str, Any],
                                                                         dict[str, Any]]:
    """The JSON forms of the fields that differ (``updated_at`` ignored)."""
    a, b = before.to_dict(), after.to_dict()
    keys = [k for k in a if k not in _VOLATILE and a[k] != b[k]]
    return {k: a[k] for k in keys}, {k: b[k] for k in keys}


def _apply_batch(ctx: Context, batch: Sequence[Change], cycle: int, now: int) -> list[Applied]:
    """Writer thread: one transaction; each change re-reads its entry (sees earlier ones)."""
    applied: list[Applied] = []
    semantic = ctx.semantic
    consumed: dict[str, tuple[int, int]] = {}
    with semantic.transaction():
        for change in batch:
            if change.consume is not None:
                consumed[change.entry_id] = change.consume
            current = semantic.get_entry(change.entry_id)
            if current is None:
                continue  # removed since the snapshot: nothing to change
            new = change.mutate(current)
            if new is None or new == current:
                continue
            new = dataclasses.replace(new, updated_at=max(now, current.updated_at))
            semantic.update_entry(new, change.embedding)
            if change.record:
                before, after = changed_fields(current, new)
                semantic.add_curator_delta(
                    cycle=cycle, op=change.op, entry_id=change.entry_id, before=before,
                    after={**after, "why": change.why, **({"detail": dict(change.detail)}
                                                         if change.detail else {})},
                    now=now)
            applied.append(Applied(change.entry_id, change.op, current, new))
        if consumed:
            # In the same transaction as the votes' effect: each vote counts exactly once,
            # and votes the learners add meanwhile stay pending for the next cycle.
            _take_votes(ctx, consumed)
    return applied


def admit_recorded(cy: Cycle, proposal: Proposal, vector: npt.NDArray[np.float32], *, op: str,
                   why: str, detail: Mapping[str, Any] | None = None,
                   consolidate: Sequence[str] = ()) -> dict[str, Any]:
    """Writer thread: ``knowledge.admit`` and its audit record in one job; with
    ``consolidate``, mark those episodes consolidated when the gate saw the proposal
    through (admitted, merged or skipped as a known restatement)."""
    result = admit(cy.ctx, proposal, vector, now=cy.now)
    decision = str(result["decision"])
    if consolidate and decision in ("admitted", "merged", "skipped"):
        cy.ctx.semantic.mark_consolidated(consolidate)
    if result.get("id") and decision in ("admitted", "merged", "quarantined"):
        cy.ctx.semantic.add_curator_delta(
            cycle=cy.number, op=op, entry_id=result["id"], before=None,
            after={"why": f"{decision}: {why}", "detail": dict(detail or {})}, now=cy.now)
    return result


def parse_votes(value: object) -> dict[str, tuple[int, int]]:
    """``{entry_id: {"up": n, "down": n}}`` as ``{entry_id: (up, down)}``.

    The learners validate what they write (``curator.learn.votes``); a malformed item
    here is logged loudly and left out, so one bad record cannot stop every cycle.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        log.error("curator.votes.malformed", value=repr(value)[:200])
        return {}
    out: dict[str, tuple[int, int]] = {}
    for entry_id, counts in value.items():
        up = counts.get("up", 0) if isinstance(counts, Mapping) else None
        down = counts.get("down", 0) if isinstance(counts, Mapping) else None
        if (not isinstance(entry_id, str) or not entry_id
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                           for n in (up, down))):
            log.error("curator.votes.malformed", entry_id=repr(entry_id)[:80],
                      counts=repr(counts)[:200])
            continue
        assert isinstance(up, int) and isinstance(down, int)
        if up or down:
            out[entry_id] = (up, down)
    return out


def pending_votes(ctx: Context) -> dict[str, tuple[int, int]]:
    """The learners' batched UPVOTE / DOWNVOTE counts per entry since the last cycle."""
    return parse_votes(ctx.semantic.get_meta(VOTES_KEY, None))


def _take_votes(ctx: Context, consumed: Mapping[str, tuple[int, int]]) -> None:
    current = parse_votes(ctx.semantic.get_meta(VOTES_KEY, None))
    for entry_id, (up, down) in consumed.items():
        held = current.pop(entry_id, None)
        if held is not None and (held[0] > up or held[1] > down):
            current[entry_id] = (max(0, held[0] - up), max(0, held[1] - down))
    ctx.semantic.set_meta(VOTES_KEY, {k: {"up": u, "down": d}
                                      for k, (u, d) in sorted(current.items())})


def apply_changes(cy: Cycle, changes: Sequence[Change]) -> list[Applied]:
    """Apply ``changes`` in order, ``curator.write_batch`` per writer-thread transaction."""
    size = max(1, cy.ctx.config.curator.write_batch)
    applied: list[Applied] = []
    for start in range(0, len(changes), size):
        batch = list(changes[start:start + size])
        done = cy.ctx.writer.call(
            functools.partial(_apply_batch, cy.ctx, batch, cy.number, cy.now))
        if cy.cache is not None:
            for item in done:
                cy.cache[item.entry_id] = item.after
        applied.extend(done)
    return applied


LIVE = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)
ALL_STATUSES = tuple(EntryStatus)


def entries(cy: Cycle) -> dict[str, GrimoireEntry]:
    """Every entry (any status) by id, oldest first: read on first use, then kept current
    with the cycle's own writes (``apply_changes``, ``refresh``). Phases decide from it;
    what they change is re-read inside the write transaction, so a concurrent writer's
    change is never overwritten by this snapshot."""
    if cy.cache is None:
        found = cy.ctx.semantic.list_entries(EntryFilter(statuses=ALL_STATUSES),
                                             order="created_at", limit=None)
        cy.cache = {e.id: e for e in sorted(found, key=lambda e: (e.created_at, e.id))}
    return cy.cache


def refresh(cy: Cycle, ids: Sequence[str | None]) -> None:
    """Re-read these entries into the cycle's snapshot (after a write outside
    ``apply_changes``: an admission, a merge, a quarantine resolution)."""
    if cy.cache is None:
        return
    for entry_id in ids:
        if entry_id:
            found = cy.ctx.semantic.get_entry(entry_id)
            if found is not None:
                cy.cache[entry_id] = found


def invalidate(cy: Cycle) -> None:
    """Forget the snapshot (another module wrote an unknown set of entries)."""
    cy.cache = None


def list_all(cy: Cycle, statuses: Sequence[EntryStatus] = LIVE,
             categories: Sequence[Category] | None = None) -> list[GrimoireEntry]:
    """Every entry with these statuses (and categories), oldest first, from the snapshot."""
    wanted = frozenset(statuses)
    kinds = None if categories is None else frozenset(categories)
    return [e for e in entries(cy).values()
            if e.status in wanted and (kinds is None or e.category in kinds)]


def window_vectors(cy: Cycle) -> npt.NDArray[np.float32]:
    """The window's episode vectors (rows in window order), read once per cycle."""
    cached = cy.notes.get("window_vectors")
    if cached is None:
        cached = cy.ctx.episodes.vectors_for([e.id for e in cy.window]) if cy.window else (
            np.zeros((0, cy.ctx.episodes.dim), dtype=np.float32))
        cy.notes["window_vectors"] = cached
    vectors: npt.NDArray[np.float32] = cached
    return vectors
