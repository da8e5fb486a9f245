"""Causal-link discovery on synthetic event streams (numpy-seeded)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from curator.distiller.operations import ExistingClaim, OpKind
from curator.learn.causal_discovery import KGLink, default_event_key, discover_links
from grimoire.config import DistillerConfig
from grimoire.errors import ValidationError
from grimoire.records import Category, Claim, Episode, EpisodeType, Outcome

START = 1_767_225_600_000
DAY = 86_400_000
MINUTE = 60_000
CFG = DistillerConfig()  # 10-minute lag window


def make_stream(
    seed: int, *, planted: float = 0.8, shifts: int = 40, alerts: int = 100,
    reports: int = 80, ticks: int = 500, days: int = 30,
) -> list[Episode]:
    """Regime shifts, clade alerts, replicant reports and ticks at random times.

    With ``planted`` > 0, that share of regime shifts is followed 1–8 minutes
    later by an extra clade alert.
    """
    rng = np.random.default_rng(seed)
    out: list[Episode] = []

    def add(t: int, kind: str) -> None:
        out.append(Episode(id=f"{kind[:3]}{len(out)}", text=kind, type=EpisodeType(kind),
                           timestamp=int(t)))

    span = (START, START + days * DAY)
    for t in rng.integers(*span, shifts):
        add(int(t), "regime_shift")
        if rng.random() < planted:
            add(int(t) + int(rng.integers(1 * MINUTE, 8 * MINUTE)), "clade_alert")
    for kind, count in (("clade_alert", alerts), ("replicant_report", reports),
                        ("observation", ticks)):
        for t in rng.integers(*span, count):
            add(int(t), kind)
    return out


def test_planted_link_is_found_with_its_lag() -> None:
    episodes = make_stream(1)
    ops = discover_links(episodes, [], CFG, strategy="s")
    assert len(ops) == 1
    op = ops[0]
    assert op.op is OpKind.ADD and op.category is Category.CAUSAL_LINK
    assert op.claim.condition == {"event": "regime_shift", "within_ms": CFG.causal_lag_ms}
    assert op.claim.target == "event:clade_alert" and op.claim.direction == "higher"
    assert op.claim.strategy == "s"
    ev = op.evidence
    assert ev["occurrences"] == 40 and ev["followed"] >= 25
    assert 1 * MINUTE <= ev["lag_ms"] <= 8 * MINUTE
    assert op.claim.effect > 0.6 and op.claim.baseline < 0.05
    # the rate's denominator: "k of n times" reads effect × support of support
    assert op.claim.support == ev["occurrences"]
    assert round(op.claim.effect * op.claim.support) == ev["followed"]
    # each pair links a regime shift to the clade alert after it, within the window
    by_id = {e.id: e for e in episodes}
    assert len(ev["pairs"]) == ev["followed"]
    for cause_id, effect_id in ev["pairs"]:
        cause, effect = by_id[cause_id], by_id[effect_id]
        assert cause.type is EpisodeType.REGIME_SHIFT and effect.type is EpisodeType.CLADE_ALERT
        assert 0 < effect.timestamp - cause.timestamp <= CFG.causal_lag_ms
    assert op.content.startswith("A regime shift is followed by a clade alert within 10 min: ")
    assert "median lag" in op.content
    assert json.loads(json.dumps(op.to_dict()))["evidence"]["pairs"][0] == list(ev["pairs"][0])


def test_independent_streams_give_no_link_over_twenty_seeds() -> None:
    found = []
    for seed in range(300, 320):
        found.extend(op.content for op in discover_links(
            make_stream(seed, planted=0.0), [], CFG, strategy=None))
    assert found == []


def test_dense_effects_are_not_links() -> None:
    """B so frequent that any window holds one: following A is no evidence."""
    episodes = make_stream(2, planted=0.0, alerts=20_000, days=10)
    assert discover_links(episodes, [], CFG, strategy=None) == []


def test_repeat_run_upvotes_and_reversal_downvotes() -> None:
    first = discover_links(make_stream(3), [], CFG, strategy=None)
    existing = [ExistingClaim("c1", first[0].claim, 0.5)]
    again = discover_links(make_stream(3), existing, CFG, strategy=None)
    assert [(op.op, op.target_entry_id) for op in again] == [(OpKind.UPVOTE, "c1")]
    later = [dataclasses.replace(e, timestamp=e.timestamp + 30 * DAY)
             for e in make_stream(4, planted=0.0)]
    down = discover_links(later, existing, CFG, strategy=None)
    assert [(op.op, op.target_entry_id) for op in down] == [(OpKind.DOWNVOTE, "c1")]
    assert down[0].content.startswith("Not confirmed by recent episodes: a regime shift")
    assert down[0].claim.key == first[0].claim.key


def test_too_few_causes_cannot_contradict() -> None:
    claim = Claim({"event": "regime_shift", "within_ms": CFG.causal_lag_ms},
                  "event:clade_alert", "higher", 0.8, 0.03, 30, 1e-20)
    sparse = make_stream(5, planted=0.0, shifts=2)
    assert discover_links(sparse, [ExistingClaim("c1", claim, 0.5)], CFG, strategy=None) == []


def test_knowledge_graph_links_count_as_support() -> None:
    """An asserted link is proposed with its KG evidence even before episodes show it."""
    episodes = make_stream(6, planted=0.0)
    ops = discover_links(episodes, [], CFG, strategy=None,
                         kg_links=[KGLink("oracle_update", "action:swap:negative", 4)])
    assert len(ops) == 1
    op = ops[0]
    assert op.claim.target == "event:action:swap:negative" and op.claim.support == 4
    assert op.evidence["kg_confirmed"] is True and op.evidence["kg_evidence"] == 4
    assert "by 4 explicit assertions" in op.content
    # with too little evidence nothing is proposed
    assert discover_links(episodes, [], CFG, strategy=None,
                          kg_links=[("oracle_update", "action:swap:negative", 2)]) == []


def test_kg_evidence_adds_to_episode_support() -> None:
    ops = discover_links(make_stream(7), [], CFG, strategy=None,
                         kg_links=[("regime_shift", "clade_alert", 5)])
    assert len(ops) == 1
    assert ops[0].claim.support == ops[0].evidence["occurrences"]
    assert ops[0].evidence["kg_evidence"] == 5
    assert "asserted explicitly 5 times" in ops[0].content


def test_episodes_overrule_a_contradicted_kg_link() -> None:
    """Plenty of regime shifts, followed by reports only by chance: the link is not proposed."""
    episodes = make_stream(8, planted=0.0, shifts=400, reports=300)
    ops = discover_links(episodes, [], CFG, strategy=None,
                         kg_links=[("regime_shift", "replicant_report", 3)])
    assert ops == []


def test_bad_kg_link_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"kg_links\[0\]"):
        discover_links([], [], CFG, strategy=None, kg_links=[("a", "b", -1)])


def test_default_event_key() -> None:
    def ep(**kw: object) -> Episode:
        base: dict[str, object] = {"id": "x", "text": "t", "type": EpisodeType.ACTION,
                                   "timestamp": START}
        base.update(kw)
        return Episode(**base)  # type: ignore[arg-type]

    assert default_event_key(ep(actions=("swap",), outcome=Outcome.NEGATIVE)) == \
        "action:swap:negative"
    assert default_event_key(ep(tool="uniswap")) == "action:uniswap"
    assert default_event_key(ep(type=EpisodeType.OBSERVATION)) is None
    assert default_event_key(ep(type=EpisodeType.SAFETY_INCIDENT)) == "safety_incident"


def test_custom_event_key() -> None:
    """Callers may label events their own way (e.g. by importance)."""
    episodes = make_stream(9)
    ops = discover_links(episodes, [], CFG, strategy=None,
                         event_key=lambda e: None if e.type is EpisodeType.OBSERVATION
                         else e.type.value.upper())
    assert [op.claim.target for op in ops] == ["event:CLADE_ALERT"]
