"""Told is not learned (issue 11 item 4): ``entry.add`` records who told an entry, the
gate refuses contentless text, and PLAYBOOK.md lists told entries apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.gate.content import contentless_reason
from tests.curator.test_curator_support import grimoire_at


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


@pytest.mark.parametrize("text", ["ok", "gas high", "!!! ??", "42"])
def test_contentless_text_is_refused_and_nothing_is_stored(g: Grimoire, text: str) -> None:
    before = g.context.semantic.counts()
    with pytest.raises(ValidationError) as info:
        g.entry_add(category="warning", content=text)
    assert info.value.field == "content" and "states no claim" in str(info.value)
    assert g.context.semantic.counts() == before
    assert g.context.semantic.list_admissions() == []


def test_a_sentence_with_a_claim_is_not_contentless() -> None:
    assert contentless_reason("avoid swaps when gas is above 50 gwei") is None
    assert contentless_reason("gas high") is not None


def test_a_hand_added_warning_is_told_not_learned_and_shown_apart(g: Grimoire) -> None:
    added = g.entry_add(category="warning",
                        content="Avoid bridging to base during sequencer outages")
    assert added["decision"] == "admitted"
    entry = g.entry_get(added["id"])
    assert entry["provenance"] == "agent"
    owner = g.entry_add(category="heuristic", provenance="owner",
                        content="Prefer limit orders for WETH/USDC above 10 ETH notional")
    assert g.entry_get(owner["id"])["provenance"] == "owner"
    g.curator_run()
    text = g.playbook_get()["markdown"]
    told = text.index("### Told or inherited, not yet confirmed by outcomes")
    line = next(x for x in text.splitlines() if "sequencer outages" in x)
    assert "told by the agent · warning" in line and text.index(line) > told
    assert "### Warnings: avoid these" not in text  # nothing learned yet
    assert "learned from the agent's own outcomes" in text
