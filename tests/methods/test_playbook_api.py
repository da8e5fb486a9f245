"""PLAYBOOK.md from the stores: what is listed, byte-identical output, atomic replacement,
and ``playbook.get`` before and after the first cycle."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from curator.cycle.run import run_cycle
from curator.views.playbook import render_playbook, select_entries, write_playbook
from grimoire import Grimoire
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.errors import StoreError
from grimoire.methods.playbook import playbook_get
from grimoire.records import Category, Claim, DecayClass, EntryStatus
from tests.curator.test_curator_support import GAS_CLAIM, grimoire_at, put


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


def _rules(g: Grimoire) -> dict[str, str]:
    insight = put(g, claim=GAS_CLAIM, confidence=0.9)
    heuristic = put(g, category=Category.HEURISTIC, confidence=0.8, tags=("derived",),
                    parent_entry_ids=(insight.id,), decay_class=DecayClass.REGIME_CONDITIONAL,
                    content="When the time is between 02:00 and 04:00 UTC, prefer swap because "
                            "gas averages 6 gwei (vs 24 gwei otherwise; 40 episodes).")
    warning = put(g, category=Category.WARNING, confidence=0.3,
                  content="Avoid swap when the regime is high_vol because 80% of them lose.")
    link = put(g, category=Category.CAUSAL_LINK, confidence=0.7,
               content="A whale alert is followed by high_vol within 9 min.")
    lonely = put(g, confidence=0.95, content="Volume doubles on Mondays (n=12).")
    candidate = put(g, category=Category.HEURISTIC, confidence=0.9, status=EntryStatus.CANDIDATE,
                    content="When idle, do nothing because it costs nothing.")
    return {"insight": insight.id, "heuristic": heuristic.id, "warning": warning.id,
            "link": link.id, "lonely": lonely.id, "candidate": candidate.id}


def test_selection_is_active_rules_their_parents_and_causal_links(g: Grimoire) -> None:
    ids = _rules(g)
    chosen = {e.id for e in select_entries(g.context)}
    assert chosen == {ids["insight"], ids["heuristic"], ids["warning"], ids["link"]}


def test_same_state_gives_byte_identical_playbook(g: Grimoire, clock: FrozenClock) -> None:
    _rules(g)
    first = render_playbook(g.context, now=clock.now, tick=7)
    second = render_playbook(g.context, now=clock.now, tick=7)
    assert first == second
    written = write_playbook(g.context, now=clock.now, tick=7)
    assert g.context.config.playbook_path.read_bytes() == first.encode("utf-8")
    assert written["selected"] == {"heuristic": 1, "warning": 1, "insight": 1, "causal_link": 1}
    assert "tick: 7" in first and "Avoid swap when the regime is high_vol" in first
    assert "prefer swap because gas averages 6 gwei" in first
    # The confidence shown is the effective one at `now`: older state reads lower.
    later = render_playbook(g.context, now=clock.now + 14 * MS_PER_DAY, tick=7)
    assert "conf 0.80" in first and "conf 0.40" in later


def test_write_is_atomic_and_leaves_the_old_file_on_failure(
        g: Grimoire, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    _rules(g)
    write_playbook(g.context, now=clock.now, tick=1)
    path = g.context.config.playbook_path
    old = path.read_bytes()

    def broken(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(StoreError):
        write_playbook(g.context, now=clock.now + 1000, tick=2)
    assert path.read_bytes() == old
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".PLAYBOOK")] == []


def test_playbook_get_before_and_after_the_first_cycle(g: Grimoire, clock: FrozenClock) -> None:
    _rules(g)
    before = playbook_get(g.context)
    assert before["exists"] is False and "not saved" in before["note"]
    assert not g.context.config.playbook_path.exists()
    assert before["markdown"].startswith("---\nplaybook_format: 1\n")
    g.context.tick = 50
    run_cycle(g.context)
    after = g.playbook_get()
    assert after["exists"] is True and after["tick"] == 50
    assert after["generated_at"] == clock.now
    assert after["markdown"] == g.context.config.playbook_path.read_text(encoding="utf-8")
    assert "curator_cycles: 1" in after["markdown"]
    # The cycle compiles from its own snapshot; the store gives the same bytes.
    assert render_playbook(g.context, now=clock.now, tick=50) == after["markdown"]


def test_an_active_insight_with_a_claim_is_listed_alone(g: Grimoire) -> None:
    """A learned regularity no rule was derived from (volume is neither a cost nor a gain)
    is still knowledge the agent earned: listed with its numbers. An active insight with no
    claim (a summary) still is not."""
    volume = Claim({"hour_window": [12, 15]}, "metric:volume", "higher", 6e6, 2.5e6, 40)
    found = put(g, claim=volume, confidence=0.9)
    summary = put(g, confidence=0.95, content="Volume doubles on Mondays (n=12).")
    chosen = {e.id for e in select_entries(g.context)}
    assert found.id in chosen and summary.id not in chosen
    markdown = render_playbook(g.context, now=g.context.now(), tick=1)
    line = next(x for x in markdown.splitlines() if x.startswith(f"- `{found.id[:8]}"))
    assert "volume averages 6M (vs 2.5M otherwise: 2.4 times as high; 40 episodes)" in line
