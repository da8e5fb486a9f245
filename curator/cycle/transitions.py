"""An entry's status transitions in a curator cycle: promote, demote, prune (SPEC §8 steps 3, 5).

Owns the rules, as pure functions of one entry, its effective (decayed)
confidence at the cycle's ``now`` and the curator config. Each returns the
reason for the transition, or None. It must not read stores or clocks; the
phases apply what these decide.

The statuses: ``candidate`` (never active), ``active`` (in PLAYBOOK.md when a
rule), ``demoted`` (was active, fell out; SPEC's "back to candidate, out of
PLAYBOOK.md", kept distinct so a warning is promoted "at any confidence" only
once and ``explain`` can say why it left), ``archived`` (cold storage).

Thresholds, all on effective confidence: insight (and causal link, strategy
fragment, dream journal) ≥ 0.6 → active; heuristic ≥ 0.7 → active, and only
when learnt here (self_learned / replicant provenance) or validated here at
least once; warnings are listed at any confidence when new. A claim this agent's learners
established (``is_established``: found significant by their family-wise test) is listed
when new too, whatever its category, as long as its evidence has not turned against it
(effective confidence >= the demotion line): the test already established what a wait
for ✓ would only repeat, a cycle later, or a day later for a two-hour window that has to
come round again. Its ✓ / ✗ then decide whether it stays. Demotion: active
< 0.4. A warning is only demoted when the evidence turned against it
(contradicted at least once) or it faded below the prune line: missing a
risk costs more than a false alarm. A rule derived from an insight follows
its parent out (a heuristic cannot outlive the knowledge it was derived from).

A claim the new episodes decisively *reversed* (``is_reversed``: its ``valid_until`` is
the time the world it describes ended, set by the reversal verdict) leaves active status
by that verdict alone (``reversal_reason``), whatever its confidence: its ✓ counted
before the change still outweigh one cycle's ✗, and confidence is a function of the
evidence, not a lever to push a claim out with. It is not promoted again while reversed;
re-finding it after the change (the world turned back) clears the mark.
An entry marked untrusted (its text instructs a model, ``grimoire.guard.instructions``) is
never promoted, and an active one is demoted at the next cycle, whatever its numbers.
Promotion and demotion can never both fire for the same state (a tested
invariant), so nothing flaps within a cycle.
"""

from __future__ import annotations

from datetime import UTC, datetime

from grimoire.config import CuratorConfig
from grimoire.guard.instructions import is_marked
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance

__all__ = [
    "DERIVED_TAG",
    "LOCAL_PROVENANCE",
    "SUMMARY_TAG",
    "demotion_reason",
    "derived_from",
    "is_derived",
    "is_established",
    "is_reversed",
    "is_summary",
    "low_confidence_count",
    "promotion_reason",
    "prune_exempt",
    "prune_reason",
    "reversal_reason",
]

DERIVED_TAG = "derived"
SUMMARY_TAG = "summary"
# This agent's own knowledge: learned here, or told here (by the agent or its owner).
LOCAL_PROVENANCE = frozenset({Provenance.SELF_LEARNED, Provenance.REPLICANT, Provenance.AGENT,
                              Provenance.OWNER})
_OPEN = (EntryStatus.CANDIDATE, EntryStatus.DEMOTED)


def is_summary(entry: GrimoireEntry) -> bool:
    """An L1/L2 hierarchical summary: managed by MUS pruning, never promoted."""
    return SUMMARY_TAG in entry.tags


def is_derived(entry: GrimoireEntry) -> bool:
    """A rule the curator parameterized from an insight (its parent_entry_ids)."""
    return DERIVED_TAG in entry.tags and bool(entry.parent_entry_ids)


def derived_from(entry: GrimoireEntry) -> str | None:
    """The insight a derived rule was parameterized from: its first parent (None for any
    other entry). A merge may add more parents later; they state other claims, so a rule is
    judged by, refreshed from and listed with this one only."""
    return entry.parent_entry_ids[0] if is_derived(entry) else None


def is_established(entry: GrimoireEntry, alpha: float) -> bool:
    """A claim this agent's learners established: learned here (``self_learned``) with the
    p-value of the learner's test at most ``alpha`` (the distiller's). The distiller, causal
    discovery and the check of an LLM's proposals admit a claim only once it passed their
    family-wise test (Holm over everything they tried, at ``distiller.alpha``), so such a
    claim's evidence is already significant. A summary, a rule derived from an insight
    (no claim of its own), outside knowledge and a claim without a test (p = 1) are not."""
    claim = entry.claim
    return (entry.provenance is Provenance.SELF_LEARNED and claim is not None
            and not is_summary(entry) and claim.p_value <= alpha)


def is_reversed(entry: GrimoireEntry) -> bool:
    """A claim whose valid time ended: the new episodes decisively reversed it at
    ``valid_until`` (a summary's ``valid_until`` is only the last episode it covers)."""
    return entry.valid_until is not None and not is_summary(entry)


def reversal_reason(entry: GrimoireEntry) -> str | None:
    """Why an active entry leaves active status (and PLAYBOOK.md) because its claim was
    reversed, whatever its confidence, or None."""
    if entry.status is not EntryStatus.ACTIVE or not is_reversed(entry):
        return None
    until = datetime.fromtimestamp(int(entry.valid_until or 0) / 1000, UTC)
    return f"the new episodes reversed its claim (it held until {until:%Y-%m-%d %H:%M} UTC)"


def promotion_reason(entry: GrimoireEntry, eff: float, cfg: CuratorConfig, *,
                     parent_active: bool = True, established: bool = False) -> str | None:
    """Why a candidate or demoted entry becomes active now, or None. ``established``: the
    entry's claim passed its learner's family-wise test (``is_established``)."""
    if entry.status not in _OPEN or is_summary(entry) or is_reversed(entry):
        return None
    if is_marked(entry.tags):  # text that instructs a model is kept, never made a rule
        return None
    if is_derived(entry) and not parent_active:
        return None
    if entry.category is Category.WARNING:
        contradicted = entry.contradicted_count > 0 and eff < cfg.demote_below
        if entry.status is EntryStatus.CANDIDATE and eff >= cfg.prune_below and not contradicted:
            return "warnings are listed at any confidence"
        if entry.status is EntryStatus.DEMOTED and eff >= cfg.demote_below:
            return f"warning back at {eff:.2f} >= {cfg.demote_below}"
        return None
    if established and entry.status is EntryStatus.CANDIDATE and eff >= cfg.demote_below:
        # Not for a demoted one: it left because its evidence turned against it, and comes
        # back at its category's threshold (no flapping around the demotion line).
        return "its learner's family-wise test found it significant: listed from now on"
    if entry.category is Category.HEURISTIC:
        if eff < cfg.heuristic_promote:
            return None
        if entry.provenance not in LOCAL_PROVENANCE and entry.validated_count < 1:
            return None  # outside knowledge must be validated here first (seed 004)
        return f"heuristic at {eff:.2f} >= {cfg.heuristic_promote}"
    if eff >= cfg.insight_promote:
        return f"{entry.category.value.replace('_', ' ')} at {eff:.2f} >= {cfg.insight_promote}"
    return None


def demotion_reason(entry: GrimoireEntry, eff: float, cfg: CuratorConfig, *,
                    parent_active: bool = True) -> str | None:
    """Why an active entry leaves active status (and PLAYBOOK.md) now, or None."""
    if entry.status is not EntryStatus.ACTIVE:
        return None
    reversed_ = reversal_reason(entry)
    if reversed_ is not None:
        return reversed_
    if is_marked(entry.tags):  # marked after it was active (older data, a later detector)
        return "its text instructs a model (marked untrusted): never a rule"
    if is_derived(entry) and not parent_active:
        return "the insight it was derived from is no longer active"
    if entry.category is Category.WARNING:
        if eff < cfg.prune_below:
            return f"warning faded to {eff:.2f} < {cfg.prune_below}"
        if eff < cfg.demote_below and entry.contradicted_count > 0:
            return (f"warning contradicted ({entry.contradicted_count}x) and at {eff:.2f} "
                    f"< {cfg.demote_below}")
        return None
    if eff < cfg.demote_below:
        return f"{eff:.2f} < {cfg.demote_below}"
    return None


def prune_exempt(entry: GrimoireEntry) -> bool:
    """Structural knowledge, warnings and bloodstains are never pruned (seed 004)."""
    return (entry.decay_class is DecayClass.STRUCTURAL or entry.category is Category.WARNING
            or entry.is_bloodstain or is_summary(entry))


def low_confidence_count(entry: GrimoireEntry, eff: float, cfg: CuratorConfig) -> int:
    """The entry's ``consecutive_low_confidence`` after this cycle, counted up to
    ``prune_cycles`` (where a prunable entry is archived): an exempt entry at the floor
    would otherwise be rewritten every cycle for ever."""
    if eff >= cfg.prune_below:
        return 0
    return min(entry.consecutive_low_confidence + 1, max(1, cfg.prune_cycles))


def prune_reason(entry: GrimoireEntry, low_cycles: int, cfg: CuratorConfig) -> str | None:
    """Why the entry goes to cold storage now (``low_cycles`` counts this cycle), or None."""
    if entry.status in (EntryStatus.ARCHIVED, EntryStatus.QUARANTINED) or prune_exempt(entry):
        return None
    if low_cycles >= cfg.prune_cycles:
        return f"below {cfg.prune_below} for {low_cycles} consecutive cycles"
    if entry.quality_score < cfg.prune_quality and entry.access_count < cfg.prune_min_access:
        return (f"quality {entry.quality_score:.3f} < {cfg.prune_quality} with "
                f"{entry.access_count} accesses")
    return None
