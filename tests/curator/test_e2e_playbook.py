"""End to end on the market simulator: the planted regularities reach PLAYBOOK.md, and when
the world reverses one, the stale rule leaves and the new one enters.

Needs the learning core's wiring (``curator.learn.hook``: the ExpeL distiller and causal
discovery behind the heartbeat's distill hook and the cycle's distil phase); without it
there is nothing to learn from and the module is skipped. The hash embedder keeps it
fast; LanceDB flushes are batched per simulated hour and the distiller runs every 50
episodes per strategy (both only affect speed). Each test is ~30-40 s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config, DecayConfig
from grimoire.feeds import SimFeed, load_scenario
from grimoire.feeds.sim.scenario import SCENARIO_DIR, Scenario, parse_scenario
from grimoire.gate.decay import evidence_confidence
from grimoire.models.embedders import HashEmbedder
from grimoire.records import EntryStatus, GrimoireEntry
from grimoire.stores.semantic.types import EntryFilter

pytest.importorskip("curator.learn.hook",
                    reason="needs the learning core wiring (curator.learn.hook)")
pytestmark = pytest.mark.slow

TICK_MS = 180_000  # the scenarios' tick_seconds_hint
SPEED = {"distiller.every_episodes": 50, "episodes.flush_ms": 3_600_000}

GAS_HEURISTIC = re.compile(r"When the time is between 02:00 and 04:00 UTC, prefer [^—]*swap"
                           r"[^—]*because gas averages")
GAS_WARNING = re.compile(r"Avoid [^—]*swap[^—]* when the time is between 02:00 and 04:00 UTC "
                         r"because gas averages")
# "Avoid swap when the market regime is high_vol and trading WETH/USDC because negative …"
SWAP_WARNING = re.compile(r"Avoid swap\b(?=[^—]*high_vol)(?=[^—]*WETH/USDC)[^—]*negative")
CAUSAL = re.compile(r"clade alert is followed by a regime shift to high vol", re.IGNORECASE)


def _rules(markdown: str) -> list[str]:
    """The rule and supporting-entry lines of PLAYBOOK.md (not the preamble's example)."""
    return [line for line in markdown.splitlines()
            if line.startswith("- `") and " · conf " in line]


def _listed(markdown: str, pattern: re.Pattern[str], *, kind: str | None = None) -> bool:
    return any(pattern.search(line) and (kind is None or f"· {kind} ·" in line)
               for line in _rules(markdown))


def _run(path: Path, scenario: Scenario, ticks: int, **config: Any
         ) -> Iterator[tuple[int, dict[str, Any], str]]:
    """Drive the heartbeat tick by tick; yield (tick, cycle summary, PLAYBOOK.md) per cycle."""
    clock = FrozenClock()
    start = clock.now
    feed = SimFeed(scenario, 7)
    with Grimoire.open(path, config=Config().replace(**{**SPEED, **config}), clock=clock,
                       embedder=HashEmbedder(dim=384)) as g:
        for tick in range(1, ticks + 1):
            now = start + tick * TICK_MS
            clock.set(now)
            summary = g.tick(now=now, feed_episodes=feed.poll(tick, now))
            if "curator" in summary:
                markdown = g.context.config.playbook_path.read_text(encoding="utf-8")
                assert markdown == g.playbook_get()["markdown"]
                yield tick, summary["curator"], markdown


def g_entries(path: Path) -> list[GrimoireEntry]:
    """Every stored entry of the data directory a run left behind."""
    with Grimoire.open(path, config=Config().replace(**SPEED), clock=FrozenClock(),
                       embedder=HashEmbedder(dim=384)) as g:
        return g.context.semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)),
                                               limit=None)


_TICKS = re.compile(r"✓(\d+) ✗(\d+)")
_CITED = re.compile(r"(\d+) episodes\)|: (\d+) of (\d+) times|\(n=(\d+)\)")


def _overclaimed(markdown: str) -> list[str]:
    """Lines whose ✓ exceeds the episodes their sentence cites (for a causal link, the
    followed occurrences: "k of n times")."""
    out = []
    for line in _rules(markdown):
        ticks, cited = _TICKS.search(line), _CITED.search(line)
        if ticks is None or cited is None:
            continue
        limit = int(cited[1] or cited[2] or cited[4])
        if int(ticks[1]) > limit:
            out.append(line)
    return out


def test_planted_regularities_stand_in_the_playbook(tmp_path: Path) -> None:
    """After 1,500 ticks (~3 simulated days) of the default scenario, PLAYBOOK.md holds the
    cheap-gas window as a heuristic and the losing high_vol swaps as a warning; at no cycle
    does a line's ✓ exceed the episodes (or followed occurrences) its sentence cites
    (issue 11). The whale alert → high_vol lead-lag is learned as a causal link whose
    confidence is what its ✓ / ✗ give (SPEC §13): the scenario also writes unrelated clade
    alerts, so about half of all clade alerts are followed, its ✓ (followed occurrences)
    and ✗ (the others) stay near even, and it is not listed as a confident rule (before,
    votes on its pooled verdicts showed a link at ✓3 ✗5 active at 0.62); found by
    discovery's family-wise test, it may be listed, at that confidence."""
    # The true regime on every episode: this test pins the pipeline at 1,500 ticks; recall
    # under the shipped 15% label noise is measured by scripts/bench_learning.py.
    clean = dataclasses.replace(load_scenario(None), label_noise=0.0)
    cycles = list(_run(tmp_path / "data", clean, 1500))
    assert len(cycles) == 30
    for tick, _, markdown in cycles:
        assert _overclaimed(markdown) == [], (tick, _overclaimed(markdown))
    _, summary, markdown = cycles[-1]
    assert summary["phases"]["distil"].get("strategies", 0) >= 1
    assert _listed(markdown, GAS_HEURISTIC), markdown
    assert _listed(markdown, SWAP_WARNING), markdown
    (link,) = [e for e in g_entries(tmp_path / "data") if CAUSAL.search(e.content)]
    assert link.validated_count >= 3 and link.contradicted_count >= 3
    assert link.confidence == evidence_confidence(link.provenance, link.validated_count,
                                                  link.contradicted_count, DecayConfig())
    # Discovery's family-wise test established it (issue 24: listed without a second wait
    # for ✓), at the confidence its near-even ✓ / ✗ give: never a confident rule.
    if _listed(markdown, CAUSAL, kind="causal link"):
        assert link.status is EntryStatus.ACTIVE and link.confidence < 0.6
    # The front matter counts what is listed.
    assert re.search(r"^  heuristics: [1-9]", markdown, re.MULTILINE)
    assert re.search(r"^  warnings: [1-9]", markdown, re.MULTILINE)


def _gas_reversed_at(tick: int) -> Scenario:
    """The reversal scenario with only the cheap-gas window reversing, at ``tick``. The
    simulated clock starts at midnight with 480 ticks a day, so the 02:00-04:00 window
    opens at ticks 40, 520, 1000, 1480, ..."""
    raw = yaml.safe_load((SCENARIO_DIR / "reversal.yaml").read_text(encoding="utf-8"))
    for regularity in raw["regularities"]:
        regularity["reverse_at_tick"] = tick if regularity["name"] == "cheap_gas_02_04_utc" \
            else None
    return parse_scenario(raw, source=f"reversal(gas at {tick})")


REVERSE_AT = 1480  # the fourth window opens: the third (ticks 1000-1040) made the rule


def test_a_reversed_window_replaces_its_heuristic(tmp_path: Path) -> None:
    """Gas in 02:00-04:00 turns from cheap to dear as the fourth window opens. An
    hour-of-day rule needs two days of episodes, so the cheap-gas heuristic stands from the
    cycle after the third window. The cycle that sees the dear window (tick 1500) finds the
    cheap claim decisively reversed: the stale heuristic leaves PLAYBOOK.md within 3
    cycles and never comes back (the learners, whose windows still hold the cheap days,
    hold their votes on it), and the dear-window warning enters and stays, with the
    distiller's default settings."""
    seen: dict[int, str] = {}
    for tick, _, markdown in _run(tmp_path / "data", _gas_reversed_at(REVERSE_AT), 1700):
        seen[tick] = markdown
    before = [t for t in sorted(seen) if t < REVERSE_AT]
    assert _listed(seen[before[-1]], GAS_HEURISTIC), seen[before[-1]]
    first_evidence = 1500  # the first cycle whose episodes include the reversed window
    gone = [t for t in sorted(seen) if t >= first_evidence and not _listed(seen[t],
                                                                            GAS_HEURISTIC)]
    assert gone and gone[0] <= first_evidence + 2 * 50, "stale heuristic outlived 3 cycles"
    assert all(not _listed(seen[t], GAS_HEURISTIC) for t in seen if t >= gone[0])
    assert not any(_listed(seen[t], GAS_WARNING) for t in before)
    entered = min(t for t in seen if _listed(seen[t], GAS_WARNING))
    assert first_evidence <= entered <= first_evidence + 2 * 50, entered
    assert all(_listed(seen[t], GAS_WARNING) for t in seen if t >= entered)
