"""Critical safety incidents and bloodstains (SPEC §13): a self-learned critical incident
becomes an ordinary critical warning (not a bloodstain); a warning from a death reflection
is one (the testament's lessons: tests/portable/test_succession.py)."""

from __future__ import annotations

import dataclasses

from curator.cycle.transitions import prune_exempt
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.gate.decay import effective_confidence
from grimoire.records import Category, EntryStatus
from grimoire.stores.semantic.types import EntryFilter
from tests.curator.test_curator_support import episode, hour, write


def _warnings(g: Grimoire) -> list:  # type: ignore[type-arg]
    return g.context.semantic.list_entries(
        EntryFilter(categories=(Category.WARNING,),
                    statuses=(EntryStatus.CANDIDATE, EntryStatus.ACTIVE)), limit=None)


def test_a_critical_safety_incident_becomes_an_ordinary_critical_warning(
        g: Grimoire, clock: FrozenClock) -> None:
    text = ("Safety incident: invariant max_slippage_bps broken by a swap on WETH/USDC: "
            "slippage 140 bps above the 50 bps limit.")
    (incident,) = write(g, [episode(text, at=hour(1), type="safety_incident",
                                    importance="critical", strategy="eth-dca",
                                    token_pair="WETH/USDC", outcome="negative")])
    write(g, [episode("routine safety note", at=hour(1.5), type="safety_incident",
                      importance="routine")])
    clock.set(hour(2))
    summary = g.curator_run()
    assert summary["phases"]["incidents"]["incidents"] == 1
    (warning,) = _warnings(g)
    assert warning.parent_episode_ids == (incident,)
    assert "slippage 140 bps" in warning.content and warning.strategy == "eth-dca"
    assert "critical" in warning.tags and "safety_incident" in warning.tags
    # Not a bloodstain: no death paid for it, so no death premium.
    assert not warning.is_bloodstain
    cfg = g.context.config.decay
    later = warning.last_accessed_at + 30 * MS_PER_DAY
    stained = dataclasses.replace(warning, is_bloodstain=True)
    assert effective_confidence(warning, later, cfg) < effective_confidence(stained, later, cfg)
    assert prune_exempt(warning)  # as every warning
    found = g.retrieve(query="slippage above the limit on WETH/USDC swaps", k=5)
    item = next(i for i in found["items"] if i["id"] == warning.id)
    assert "bloodstain" not in item["factors"]
    # Listed in PLAYBOOK.md as a learned warning, without the bloodstain mark.
    text = g.playbook_get()["markdown"]
    line = next(x for x in text.splitlines() if "Avoid repeating this safety incident" in x)
    assert "bloodstain" not in line
    # The same incident again is not evidence: no second warning, no ✓.
    g.curator_run()
    (again,) = _warnings(g)
    assert again.validated_count == warning.validated_count


def test_a_warning_from_a_death_reflection_is_a_bloodstain(g: Grimoire) -> None:
    added = g.entry_add(category="warning", provenance="death_reflection",
                        content="Avoid leveraged LP positions when the oracle lags spot")
    assert g.entry_get(added["id"])["is_bloodstain"] is True
    told = g.entry_add(category="warning",
                       content="Avoid bridging to base during sequencer outages")
    assert g.entry_get(told["id"])["is_bloodstain"] is False
