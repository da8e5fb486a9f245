"""Summaries apart (issue 24 part 6): ``entry.list`` shows rules, insights and causal links
by default; the curator's L1/L2 summaries are a kind asked for (``kind``). ``retrieve``
leaves them out when ``summaries`` is false (the MCP tools' default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from curator.cycle.transitions import SUMMARY_TAG
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.records import Category, EntryStatus
from grimoire.retrieval.stages import sources
from tests.curator.test_curator_support import grimoire_at, put

L1 = ("summary", "summary:l1", "token_pair:WETH/USDC")
L2 = ("summary", "summary:l2")


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)


def _fill(g: Grimoire) -> dict[str, str]:
    return {
        "warning": put(g, category=Category.WARNING, confidence=0.7,
                       content="Avoid swap when gas is above 80 gwei: fees eat the gain").id,
        "insight": put(g, confidence=0.6, content="Gas averages 8 gwei between 02:00 and "
                       "04:00 UTC").id,
        "link": put(g, category=Category.CAUSAL_LINK, confidence=0.6,
                    content="A clade alert is followed by a regime shift to high vol").id,
        "l1": put(g, tags=L1, confidence=0.9, status=EntryStatus.CANDIDATE,
                  content="14 episodes of swaps on WETH/USDC: gas 5.9-58 gwei").id,
        "l2": put(g, tags=L2, confidence=0.9, status=EntryStatus.CANDIDATE,
                  content="Chapter of 3 session summaries covering swaps and gas").id,
    }


def _ids(out: dict[str, object]) -> set[str]:
    return {e["id"] for e in out["entries"]}  # type: ignore[attr-defined, index]


def test_entry_list_leaves_summaries_out_unless_asked(g: Grimoire) -> None:
    ids = _fill(g)
    knowledge = {ids["warning"], ids["insight"], ids["link"]}
    assert _ids(g.entry_list()) == knowledge
    assert g.entry_list()["kind"] == "knowledge"
    assert _ids(g.entry_list(kind="summary")) == {ids["l1"], ids["l2"]}
    assert _ids(g.entry_list(kind="summary:l1")) == {ids["l1"]}
    assert _ids(g.entry_list(kind="summary:l2")) == {ids["l2"]}
    assert _ids(g.entry_list(kind="all")) == knowledge | {ids["l1"], ids["l2"]}
    # The other filters still apply within a kind.
    assert _ids(g.entry_list(category="insight")) == {ids["insight"]}
    assert _ids(g.entry_list(kind="summary", category="insight", status="candidate")) == {
        ids["l1"], ids["l2"]}
    with pytest.raises(ValidationError) as err:
        g.entry_list(kind="summaries")
    assert err.value.field == "kind"


def test_the_limit_counts_entries_of_the_kind_however_many_summaries_rank_above(
        g: Grimoire) -> None:
    ids = _fill(g)
    for i in range(230):  # more than a page of summaries, all more confident than the rules
        put(g, tags=L1, confidence=0.95, content=f"{i} episodes of swaps, session {i}")
    first = g.entry_list(limit=2)["entries"]
    assert len(first) == 2 and first[0]["id"] == ids["warning"]  # the most confident
    assert _ids(g.entry_list(limit=3)) == {ids["warning"], ids["insight"], ids["link"]}
    assert len(g.entry_list(kind="summary", limit=231)["entries"]) == 231
    assert len(g.entry_list(kind="summary:l1", limit=1000)["entries"]) == 231


def test_retrieve_leaves_summaries_out_when_asked(g: Grimoire) -> None:
    ids = _fill(g)
    query = "swaps on WETH/USDC and gas"
    with_them = {i["id"] for i in g.retrieve(query=query, k=20, kinds=["entry"])["items"]}
    assert {ids["l1"], ids["l2"]} <= with_them
    without = {i["id"] for i in g.retrieve(query=query, k=20, kinds=["entry"],
                                           summaries=False)["items"]}
    assert not without & {ids["l1"], ids["l2"]} and ids["warning"] in without
    with pytest.raises(ValidationError) as err:
        g.retrieve(query=query, summaries="no")
    assert err.value.field == "summaries"


def test_retrieval_names_the_curator_s_summary_tag() -> None:
    assert sources.SUMMARY_TAG == SUMMARY_TAG
