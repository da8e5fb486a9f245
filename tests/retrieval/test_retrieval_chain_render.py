"""Seed 001's causal chain (oldest first, cycle-safe) and its renderings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from grimoire.errors import ValidationError
from grimoire.retrieval.chain import ChainLink, walk_to_root
from grimoire.retrieval.render import context_block, format_time, narrative
from tests.retrieval.retrieval_support import HOUR, NOW, axis, make_candidate

Causes = Mapping[str, Sequence[tuple[str, str | None, float]]]

CAUSES: Causes = {
    "revert": [("gas_spike", "high gas made the swap unprofitable", 0.9)],
    "gas_spike": [("nft_mint", "a popular mint filled the blocks", 0.7)],
}
TEXT = {
    "nft_mint": "A popular NFT mint started",
    "gas_spike": "Gas spiked to 180 gwei",
    "revert": "Swap of 2 ETH reverted",
}
TIME = {"nft_mint": NOW - 3 * HOUR, "gas_spike": NOW - 2 * HOUR, "revert": NOW - HOUR}


def causes_of(table: Causes):  # type: ignore[no-untyped-def]
    return lambda node: list(table.get(node, []))


def test_walk_returns_the_chain_oldest_first() -> None:
    chain = walk_to_root("revert", causes_of(CAUSES))
    assert chain == [
        ChainLink("nft_mint"),
        ChainLink("gas_spike", "a popular mint filled the blocks", 0.7),
        ChainLink("revert", "high gas made the swap unprofitable", 0.9),
    ]


def test_walk_follows_the_strongest_cause_and_stops_at_max_depth() -> None:
    table: Causes = {"x": [("weak", "w", 0.2), ("strong", "s", 0.8)],
                     "strong": [("root", None, 1.0)]}
    assert [c.id for c in walk_to_root("x", causes_of(table))] == ["root", "strong", "x"]
    assert [c.id for c in walk_to_root("x", causes_of(table), max_depth=1)] == ["strong", "x"]
    assert walk_to_root("x", causes_of(table), max_depth=0) == [ChainLink("x")]
    with pytest.raises(ValidationError, match="max_depth"):
        walk_to_root("x", causes_of(table), max_depth=-1)


def test_walk_is_cycle_safe() -> None:
    """a ← b ← c ← a: stops before revisiting, falling back to an unvisited cause if any."""
    table: Causes = {"a": [("b", "r1", 1.0)], "b": [("c", "r2", 1.0)],
                     "c": [("a", "loop", 1.0), ("d", "r3", 0.1)]}
    assert [c.id for c in walk_to_root("a", causes_of(table), 50)] == ["d", "c", "b", "a"]
    loop: Causes = {"a": [("b", None, 1.0)], "b": [("a", None, 1.0)]}
    assert [c.id for c in walk_to_root("a", causes_of(loop), 50)] == ["b", "a"]


def test_narrative_reads_oldest_first_in_plain_english() -> None:
    chain = walk_to_root("revert", causes_of(CAUSES))
    assert narrative(chain, TEXT.__getitem__) == (
        "A popular NFT mint started → (because a popular mint filled the blocks) → "
        "Gas spiked to 180 gwei → (because high gas made the swap unprofitable) → "
        "Swap of 2 ETH reverted"
    )
    unexplained = [ChainLink("nft_mint"), ChainLink("gas_spike")]
    assert "→ (led to) →" in narrative(unexplained, TEXT.__getitem__)
    assert narrative([], TEXT.__getitem__) == ""


def test_context_block_matches_seed_000_layout() -> None:
    heuristic = make_candidate(
        "h1", content="When gas > 150 gwei, delay swaps\nbecause they revert",
        category="heuristic", confidence=0.82, regime="high_vol")
    episode = make_candidate("e1", kind="episode", content="Swap of 2 ETH reverted",
                             timestamp=NOW - HOUR, vector=axis(1), is_bloodstain=False)
    chain = walk_to_root("revert", causes_of(CAUSES))
    block = context_block("why did my swap fail?", [heuristic, episode], chain,
                          TEXT.__getitem__, TIME.get, scores={"h1": 0.71, "e1": 0.55})
    assert block == (
        "QUERY: why did my swap fail?\n"
        "\n"
        "EVIDENCE (ranked):\n"
        "1. [heuristic · confidence 0.82 · regime high_vol · score 0.71] "
        "When gas > 150 gwei, delay swaps because they revert\n"
        "2. [episode · 2025-12-31 23:00 UTC · score 0.55] Swap of 2 ETH reverted\n"
        "\n"
        "CAUSAL CHAIN (oldest first):\n"
        "[2025-12-31 21:00 UTC] A popular NFT mint started\n"
        "[2025-12-31 22:00 UTC] Gas spiked to 180 gwei"
        " (because a popular mint filled the blocks)\n"
        "[2025-12-31 23:00 UTC] Swap of 2 ETH reverted"
        " (because high gas made the swap unprofitable)\n"
    )


def test_context_block_without_items_or_chain() -> None:
    block = context_block("anything?", [], texts={})
    assert block == "QUERY: anything?\n\nEVIDENCE (ranked):\n(none)\n"
    truncated = context_block("q", [make_candidate("a", content="long text")],
                              texts={"a": "long …"})
    assert "] long …" in truncated and format_time(0) == "1970-01-01 00:00 UTC"
