"""``Grimoire.open(read_only=True)`` in one process: reads answer, writes are refused by
name, retrieve skips its side writes, and nothing in the data directory changes.

Beside a running daemon (another process): tests/service/test_read_only_beside_daemon.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import NotAvailableError, StoreError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from tests.stores.test_read_only_stores import tree_digest

POOL = {"kind": "pool", "id": "univ3-eth-usdc"}


def fill(data: Path, clock: FrozenClock) -> dict[str, Any]:
    """A small Grimoire: episodes, a warning, a triple, a causal link, a curator cycle."""
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder()) as g:
        cause = g.episode_write(text="gas spiked to 140 gwei on mainnet", type="observation")
        effect = g.episode_write(text="swap 2 ETH for USDC reverted: out of gas",
                                 type="action", outcome="negative")
        g.causal_link(cause_id=cause["id"], effect_id=effect["id"])
        warning = g.entry_add(category="warning",
                              content="Avoid swaps when gas is above 80 gwei")
        g.kg_assert(subject=POOL, predicate="oracle_dependency",
                    object={"kind": "oracle", "id": "chainlink"}, valid_from=100)
        clock.advance(60_000)
        g.curator_run()
        return {"cause": cause["id"], "effect": effect["id"], "warning": warning["id"]}


def test_read_only_open_reads_everything_and_changes_no_file(tmp_path: Path,
                                                            clock: FrozenClock) -> None:
    data = tmp_path / "data"
    ids = fill(data, clock)
    before = tree_digest(data)
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder(), read_only=True) as g:
        assert g.read_only and g.context.read_only
        status = g.status()
        assert status["episodes"]["rows"] == 2
        assert g.episode_get(ids["effect"])["outcome"] == "negative"
        listed = g.entry_list()["entries"]
        assert ids["warning"] in {e["id"] for e in listed}
        found = g.retrieve(query="gas above 80 gwei swap", k=5)
        assert found["items"], found
        assert g.retrieve(query="swap reverted", k=5, mode="deciding")["items"]
        assert g.entry_explain(ids["warning"])["entry"]["id"] == ids["warning"]
        assert g.kg_at(POOL, 150)["triples"][0]["object"]["value"]["id"] == "chainlink"
        assert g.kg_neighbors(POOL, 150)["neighbors"]
        chain = g.causal_chain(id=ids["effect"])["chain"]
        assert [c["id"] for c in chain][:1] == [ids["cause"]]
        assert g.playbook_get()["exists"] is True
    assert tree_digest(data) == before  # no file created, changed or removed


def test_read_only_writes_are_refused_by_name(tmp_path: Path, clock: FrozenClock) -> None:
    data = tmp_path / "data"
    ids = fill(data, clock)
    with Grimoire.open(data, clock=clock, embedder=HashEmbedder(), read_only=True) as g:
        refused = {
            "episode.write": lambda: g.episode_write(text="x"),
            "episode.write_batch": lambda: g.episode_write_batch([{"text": "x"}]),
            "entry.add": lambda: g.entry_add(category="warning", content="x y z"),
            "outcome.report": lambda: g.outcome_report(retrieval_id="r", outcome="success"),
            "kg.assert": lambda: g.kg_assert(subject=POOL, predicate="oracle_dependency",
                                             object="x", valid_from=1),
            "kg.invalidate": lambda: g.kg_invalidate("t", 1),
            "causal.link": lambda: g.causal_link(cause_id=ids["cause"],
                                                 effect_id=ids["effect"]),
            "curator.run": g.curator_run,
            "tick": g.tick,
            "clade.pull": lambda: g.clade_pull(str(tmp_path / "clade")),
        }
        for method, call in refused.items():
            with pytest.raises(NotAvailableError, match=method.replace(".", r"\.")):
                call()
        # Below the facade, the stores refuse too.
        with pytest.raises(NotAvailableError, match="read-only"):
            g.context.semantic.set_meta("tick", 99)
        with pytest.raises(NotAvailableError, match="read-only"):
            g.context.writer.call(lambda: None)


def test_read_only_open_of_a_directory_without_data_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    with pytest.raises(StoreError, match="no Grimoire data"):
        Grimoire.open(missing, embedder=HashEmbedder(), read_only=True)
    assert not missing.exists()
