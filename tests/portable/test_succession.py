"""Death and succession (SPEC §13) on real stores: a testament, then a successor from it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.portable.succession import inherit, read_testament
from grimoire.portable.testament import write_testament
from grimoire.records import Category, EntryStatus, Provenance
from grimoire.stores.semantic.types import CausalEdge, EdgeKind, EntryFilter
from tests.curator.test_curator_support import (
    GAS_CLAIM,
    SWAP_CLAIM,
    episode,
    hour,
    open_grimoire,
    put,
    write,
)
from tests.service.daemon_support import REPO, daemon_env, short_dir

SWAP_WARNING = ("Avoid swap on eth-dca in high_vol: negative outcomes 80% of the time "
                "(vs 35% otherwise)")
GAS_INSIGHT = "Gas averages 6 gwei between 02:00 and 04:00 UTC (vs 24 gwei at other hours)"
GAS_RULE = "When it is between 02:00 and 04:00 UTC, prefer swap because gas is 6 gwei (vs 24)"
INCIDENT = ("Safety incident: invariant max_slippage_bps broken by a swap on WETH/USDC: "
            "slippage 140 bps above the 50 bps limit.")


def _swap(at: int, outcome: str, gain: float | None = None,
          regime: str = "high_vol") -> dict[str, Any]:
    return episode(f"swap WETH/USDC in {regime} went {outcome}", at=at, type="action",
                   tool="swap", actions=["swap"], regime=regime, strategy="eth-dca",
                   outcome=outcome, gain=gain, token_pair="WETH/USDC")


def _live(g: Grimoire) -> list[Any]:
    return g.context.semantic.list_entries(EntryFilter(statuses=(
        EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)), limit=None)


IDS: dict[str, str] = {}  # the predecessor's entries, by role (set by the fixture)


def _by_role(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Testament items by role (their sentences are re-stated by the final cycle)."""
    by_id = {item["source_id"]: item for item in items}
    return {role: by_id[i] for role, i in IDS.items() if i in by_id}


@pytest.fixture
def testament(tmp_path: Path, clock: FrozenClock) -> Path:
    """A predecessor that lost money swapping in high_vol, broke an invariant, learned a
    warning, an insight with a derived rule and a causal link, then died."""
    with open_grimoire(tmp_path / "pred", clock) as g:
        failures = write(g, [_swap(hour(1 + i / 10), "negative", gain=-(i + 1) * 10.0)
                             for i in range(6)])
        write(g, [_swap(hour(2 + i / 10), "positive", gain=5.0) for i in range(3)])
        write(g, [episode(INCIDENT, at=hour(3), type="safety_incident",
                          importance="critical", strategy="eth-dca", outcome="negative")])
        warning = put(g, category=Category.WARNING, content=SWAP_WARNING, claim=SWAP_CLAIM,
                      strategy="eth-dca", parent_episode_ids=tuple(failures), confidence=0.8)
        insight = put(g, content=GAS_INSIGHT, claim=GAS_CLAIM, confidence=0.7)
        rule = put(g, category=Category.HEURISTIC, content=GAS_RULE, confidence=0.75,
                   tags=("derived", "action:swap"), parent_entry_ids=(insight.id,))
        idle = put(g, content="a candidate nobody confirmed about bridges",
                   status=EntryStatus.CANDIDATE)
        summary = put(g, content="L1: six swaps lost money in high_vol this morning",
                      tags=("summary", "l1"))
        IDS.update(warning=warning.id, insight=insight.id, rule=rule.id, idle=idle.id,
                   summary=summary.id)
        g.context.writer.call(lambda: g.context.semantic.upsert_edge(CausalEdge(
            cause_id=failures[0], effect_id=failures[1], kind=EdgeKind.EXPLICIT, weight=0.9,
            relationship="the first loss drained the pool", evidence_count=4), now=hour(3)))
        g.kg_assert(subject={"kind": "pool", "id": "weth-usdc"}, predicate="oracle_dependency",
                    object={"kind": "oracle", "id": "chainlink-eth"}, valid_from=100)
        clock.set(hour(4))
        out = tmp_path / "testament"
        result = write_testament(g.context, out)
        assert result["generation"] == 0 and result["final_cycle"] == 1
        assert {warning.id, rule.id, insight.id} <= {
            json.loads(x)["source_id"] for x in (out / "entries.jsonl").read_text().splitlines()}
    return out


def test_a_testament_holds_knowledge_graph_lessons_and_figures(testament: Path) -> None:
    t = read_testament(testament)  # verified: every file and item hash
    entries = _by_role(t.bundle.entries)
    # the idle candidate and the episode summary stay home
    assert set(entries) == {"warning", "insight", "rule"}
    assert entries["warning"]["claim"]["condition"] == {"action": "swap",
                                                        "regime": "high_vol"}
    assert entries["rule"]["parents"] == [IDS["insight"]]
    (edge,) = [c for c in t.bundle.causal if c["kind"] == "explicit"]
    assert edge["weight"] == 0.9 and edge["evidence_count"] == 4
    # the asserted fact, and those the curator's graph phase drew from the episodes
    asserted = [x for x in t.bundle.triples if x["predicate"] == "oracle_dependency"]
    assert len(asserted) == 1 and asserted[0]["subject"] == {"kind": "pool", "id": "weth-usdc"}
    assert all(x["predicate"].startswith("custom:") for x in t.bundle.triples
               if x not in asserted)
    # lessons: costliest first (the 60 loss), then the smaller ones; the incident (no loss)
    costs = [lesson["cost"] for lesson in t.lessons]
    assert costs[:6] == [60.0, 50.0, 40.0, 30.0, 20.0, 10.0] and len(t.lessons) == 7
    assert all(IDS["warning"] in lesson["warnings"] for lesson in t.lessons[:6])
    incident = t.lessons[6]
    assert incident["episode"]["type"] == "safety_incident"
    (incident_warning,) = incident["warnings"]  # the final cycle wrote it from the incident
    (written,) = [e for e in t.bundle.entries if e["source_id"] == incident_warning]
    assert written["content"] == "Avoid repeating this safety incident: " + INCIDENT
    assert written["is_bloodstain"] is False  # an ordinary warning where it was learned
    figures = t.body["figures"]
    assert t.generation == 0 and figures["episodes"] == 10
    assert figures["losses"] == 210.0 and figures["gains"] == 15.0 and figures["net"] == -195.0
    assert figures["actions_by_outcome"] == {"negative": 6, "positive": 3}
    assert figures["curator_cycles"] == 1 and figures["causal_edges"] >= 1


def test_a_successor_inherits_at_generation_plus_one(testament: Path, tmp_path: Path,
                                                     clock: FrozenClock) -> None:
    exported = [json.loads(x) for x in (testament / "entries.jsonl").read_text().splitlines()]
    roles = _by_role(exported)
    confidence = {e["content"]: e["confidence"] for e in exported}
    with open_grimoire(tmp_path / "succ", clock) as g:
        got = inherit(g.context, testament)
        assert got["generation"] == 1 and got["predecessor_generation"] == 0
        assert g.status()["generation"] == 1
        entries = {e.content: e for e in _live(g)}
        stain = entries[roles["warning"]["content"]]
        incident = entries["Avoid repeating this safety incident: " + INCIDENT]
        insight, rule = entries[roles["insight"]["content"]], entries[roles["rule"]["content"]]
        for bloody in (stain, incident):  # the lessons' warnings: bloodstains
            assert bloody.is_bloodstain and bloody.provenance is Provenance.DEATH_REFLECTION
        for plain in (insight, rule):
            assert not plain.is_bloodstain and plain.provenance is Provenance.PREDECESSOR
        for e in (stain, insight, rule):  # at the predecessor weight, as candidates
            assert e.status is EntryStatus.CANDIDATE and "inherited" in e.tags
            assert e.confidence == pytest.approx(confidence[e.content] * 0.6, abs=1e-3)
            assert e.source.generation_number == 0 and e.validated_count == 0
        assert stain.claim == SWAP_CLAIM and insight.claim == GAS_CLAIM
        assert rule.parent_entry_ids == (insight.id,)  # still derived from its insight
        edges = [e for e in g.context.semantic.list_edges()
                 if (e.relationship or "").startswith("inherited")]
        assert edges and all(e.weight == 0.3 for e in edges)
        # the same testament again (a restart with --inherit): nothing happens
        before = len(_live(g))
        again = inherit(g.context, testament)
        assert again["already_inherited"] is True and again["generation"] == 1
        assert len(_live(g)) == before

        # Re-validated by its own outcomes: the successor's own swaps in high_vol fail.
        write(g, [_swap(hour(10 + i / 10), "negative", gain=-1.0) for i in range(8)]
              + [_swap(hour(11 + i / 10), "positive", gain=1.0, regime="low_vol")
                 for i in range(8)])
        clock.set(hour(12))
        g.curator_run()
        after = g.entry_get(stain.id)
        assert after["validated_count"] >= 3 and after["status"] == "active"
        text = g.playbook_get()["markdown"]
        line = next(x for x in text.splitlines() if "Avoid swap when" in x)
        assert "bloodstain" in line
        # its own testament says generation 1
        mine = write_testament(g.context, tmp_path / "testament-2")
        assert mine["generation"] == 1


def test_a_successor_starts_empty_and_from_one_testament(testament: Path, tmp_path: Path,
                                                         clock: FrozenClock) -> None:
    with open_grimoire(tmp_path / "lived", clock) as g:
        write(g, [episode("a life of its own", at=hour(1))])
        with pytest.raises(ValidationError, match="episodes of its own"):
            inherit(g.context, testament)
    with open_grimoire(tmp_path / "succ", clock) as g:
        inherit(g.context, testament)
        other = tmp_path / "other"
        write_testament(g.context, other)
        with pytest.raises(ValidationError, match="already inherited"):
            inherit(g.context, other)


def test_a_tampered_testament_or_a_plain_bundle_is_refused(testament: Path, tmp_path: Path,
                                                           clock: FrozenClock) -> None:
    lessons = testament / "lessons.jsonl"
    lines = lessons.read_text().splitlines()
    lessons.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    with pytest.raises(ValidationError):
        read_testament(testament)
    with open_grimoire(tmp_path / "a", clock) as g:
        from grimoire.portable.bundle import export_bundle

        export_bundle(g.context, tmp_path / "bundle")
    with pytest.raises(ValidationError, match="not a testament"):
        read_testament(tmp_path / "bundle")


@pytest.fixture
def short() -> Iterator[Path]:
    with short_dir("suc") as path:
        yield path


def test_testament_and_run_inherit_from_the_command_line(short: Path) -> None:
    env = daemon_env()
    pred, succ, out = short / "p", short / "s", short / "t"

    def grimoire(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grimoire", *args], capture_output=True,
                              text=True, env=env, cwd=str(REPO), timeout=120)

    from grimoire.models.embedders import HashEmbedder

    with Grimoire.open(pred, embedder=HashEmbedder()) as g:
        g.episode_write(text="swap reverted on WETH/USDC", type="action", outcome="negative",
                        gain=-12.0)
        g.entry_add(category="warning", content="Avoid swaps on WETH/USDC when gas is above "
                    "80 gwei because they revert", confidence=0.9)
    p = grimoire("testament", "--data", str(pred), str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["lessons"] == 1
    p = grimoire("run", "--data", str(succ), "--inherit", str(out), "--max-ticks", "1",
                 "--tick-seconds", "0.05")
    assert p.returncode == 0, p.stderr
    assert "daemon.inherited" in p.stdout + p.stderr
    p = grimoire("status", "--data", str(succ), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["generation"] == 1
    # started again with the same testament: nothing more comes in
    p = grimoire("run", "--data", str(succ), "--inherit", str(out), "--max-ticks", "1",
                 "--tick-seconds", "0.05")
    assert p.returncode == 0, p.stderr
    assert json.loads(grimoire("status", "--data", str(succ), "--json").stdout)[
        "inherited"]["entries"]["admitted"] == 1
