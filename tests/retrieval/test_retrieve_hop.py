"""Entity-centred expansion (stages.hop): the query's actors and the second hop."""

from __future__ import annotations

import math
from pathlib import Path

from grimoire.config import Config
from grimoire.retrieval.stages.hop import hop_terms
from tests.retrieval.retrieve_support import ids, open_grimoire

WEIGHTS = Config().retrieval.fusion_weights


def _no(*lists: str) -> dict[str, object]:
    return {"retrieval.fusion_weights": {**WEIGHTS, **dict.fromkeys(lists, 0.0)}}


def test_hop_terms_keeps_the_rare_linking_terms_the_query_lacks() -> None:
    first = [frozenset({"home", "country", "moved", "zed", "once"}),
             frozenset({"country", "weather"})]
    df = {"home": 2, "country": 3, "moved": 2, "zed": 4, "once": 1, "weather": 40}
    found = hop_terms(first, frozenset({"moved", "zed"}), df, 100, 0.05, 8)
    # "once" links nothing (one document), "weather" is everywhere, the query has the rest
    assert found == {"home": math.log(100 / 2), "country": math.log(100 / 3)}
    assert list(hop_terms(first, frozenset(), df, 100, 0.05, 1)) == ["home"]  # rarest first


def _vault(tmp_path: Path, **overrides: object) -> tuple[str, list[str]]:
    # No auto-linked causes: the loss's auto-linked cause would be B, and a "why" question
    # puts its root cause first; this test isolates the second hop.
    overrides = {"retrieval.auto_link_types": [], **overrides}
    with open_grimoire(tmp_path, **overrides) as g:  # type: ignore[arg-type]
        # B shares no word with the question: only the pool A names links it in
        b = g.episode_write(text="AERO/USDC liquidity was pulled overnight by its deployer, "
                                 "without any warning to the holders",
                            timestamp=1_000)["id"]
        for i in range(40):
            g.episode_write(text=f"market note {i}: calm trading on the usual venues",
                            timestamp=2_000 + i)
        g.episode_write(text="the vault lost money after a swap on AERO/USDC",
                        timestamp=5_000)
        result = g.retrieve(query="why did the vault lose money", kinds=["episode"], k=2,
                            mode="browse")
        if b in ids(result):  # the trace says how: the first hop, then its mentions
            assert result["trace"]["backends"]["hop.episode"] >= 1
            assert result["trace"]["hop"]["first"]
        return b, ids(result)


def test_only_the_second_hop_finds_what_the_first_hop_names(tmp_path: Path) -> None:
    b, found = _vault(tmp_path / "on")
    assert b in found
    b, found = _vault(tmp_path / "off", **_no("hop"))
    assert b not in found


def _spoken(tmp_path: Path, **overrides: object) -> tuple[str, list[str]]:
    with open_grimoire(tmp_path, **overrides) as g:  # type: ignore[arg-type]
        mel = g.episode_write(text="pottery class again, clay everywhere, so much fun today",
                              actor="Melanie",
                              thread="s1")["id"]
        for i in range(6):
            g.episode_write(text=f"pottery class again, clay everywhere {i}", actor="Caroline",
                            thread="s1")
        found = ids(g.retrieve(query="what class does Melanie take?", kinds=["episode"], k=2,
                               mode="browse"))
        return mel, found


def test_an_actor_the_query_names_ranks_first(tmp_path: Path) -> None:
    """The text does not say who spoke: only the actor field ties the turn to Melanie."""
    mel, found = _spoken(tmp_path / "on")
    assert found[0] == mel
    mel, found = _spoken(tmp_path / "off", **_no("entity"))
    assert found[0] != mel
