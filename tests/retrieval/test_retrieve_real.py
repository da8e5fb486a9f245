"""The pipeline with the real embedding model: meaning, not shared words, decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.models.embedders import FastEmbedEmbedder
from grimoire.records import Category
from tests.retrieval.retrieve_support import HOUR, ids, open_grimoire, put_entry

pytestmark = pytest.mark.slow


def test_semantic_match_and_causal_root_with_the_real_model(
        tmp_path: Path, real_embedder: FastEmbedEmbedder) -> None:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "d", clock, embedder=real_embedder) as g:
        cheap = put_entry(g, "Transaction fees on Ethereum are lowest in the early morning UTC",
                          category=Category.INSIGHT)
        put_entry(g, "Slippage grows when pool liquidity is thin", category=Category.INSIGHT)
        put_entry(g, "Bridges to Arbitrum take about ten minutes", category=Category.INSIGHT)
        # No word in common with the entry: only the model knows "gas" ≈ "fees".
        top = g.retrieve(query="when is gas cheapest?", kinds=["entry"], mode="browse")
        assert ids(top)[0] == cheap.id

        root = g.episode_write(text="A popular NFT collection launched and flooded the mempool")
        clock.advance(10 * 60_000)
        for text in ["My token swap failed with an out-of-gas error",
                     "The swap transaction was reverted by the router",
                     "Gas estimation for the swap came back too low",
                     "Retrying the swap also reverted"]:
            g.episode_write(text=text, type="action", outcome="negative")
            clock.advance(60_000)
        event = g.episode_write(text="Swap reverted again because it ran out of gas",
                                type="action", outcome="negative")["id"]
        g.causal_link(cause_id=root["id"], effect_id=event, relationship="blocks were full")
        clock.advance(HOUR)
        result = g.retrieve(query="why do my swaps keep reverting?", k=5, event_id=event)
        assert root["id"] in ids(result)[:3]
        assert result["causal_chain"]["narrative"].startswith(
            "A popular NFT collection launched and flooded the mempool → (because blocks "
            "were full) →")
