"""Asserted causal edges (causal.link, causal_hint, KG) count as support for causal discovery.

Real stores in tmp_path: a stream where a Clade alert is followed by a shift to
high_vol only twice (discovery needs three), with and without the agent
asserting the link; DISCOVERED and AUTO edges on the same pairs must not count.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from curator.learn import hook as learn
from curator.learn.causal_discovery import KGLink
from curator.learn.hook import asserted_links, distill, event_key, strategy_window
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Category, GrimoireEntry
from grimoire.stores.semantic.types import CausalEdge, EdgeKind
from tests.learn.learn_support import MINUTE, T0, entries, open_grimoire, write

NOW = T0 + 3 * MS_PER_DAY
CAUSE, EFFECT = "clade_alert", "regime_shift_to_high_vol"


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[Grimoire]:
    grimoire = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder)
    yield grimoire
    grimoire.close()


def two_followed_alerts() -> list[dict[str, Any]]:
    """Two alerts each followed 4 min later by a shift to high_vol, in 72 h of noise."""
    out: list[dict[str, Any]] = []
    for hour in (10, 40):
        ts = T0 + hour * 60 * MINUTE
        out.append({"type": "clade_alert", "text": "Clade alert: whale moved WETH",
                    "timestamp": ts, "importance": "notable"})
        out.append({"type": "regime_shift", "text": "Regime shift to high_vol",
                    "timestamp": ts + 4 * MINUTE, "regime": "high_vol"})
    for i in range(36):
        out.append({"type": "replicant_report", "text": f"Replicant backtest {i} finished",
                    "timestamp": T0 + i * 2 * 60 * MINUTE + 7 * MINUTE})
    return sorted(out, key=lambda p: int(p["timestamp"]))


def pairs(g: Grimoire, ids: list[str]) -> list[tuple[str, str]]:
    """(alert id, shift id) for the two planted pairs."""
    by_type: dict[str, list[str]] = {}
    for i in ids:
        ep = g.context.episodes.get(i)
        assert ep is not None
        by_type.setdefault(ep.type.value, []).append(i)
    return list(zip(by_type["clade_alert"], by_type["regime_shift"], strict=True))


def links(g: Grimoire) -> list[GrimoireEntry]:
    return [e for e in entries(g) if e.category is Category.CAUSAL_LINK]


def window_links(g: Grimoire, strategy: str | None = None) -> list[KGLink]:
    cfg = g.context.config.distiller
    window = strategy_window(g.context, strategy, cfg.window_episodes)
    return asserted_links(g.context, window, event_key(cfg), cfg.causal_lag_ms)


def test_two_followed_alerts_alone_are_no_link(g: Grimoire) -> None:
    """The negative case: below the minimum support and nothing asserted, nothing is found."""
    write(g, two_followed_alerts())
    assert g.context.config.distiller.causal_min_support == 3
    summary = distill(g.context, None, NOW)
    assert window_links(g) == []
    assert links(g) == [] and summary["edges"] == 0


def test_an_asserted_link_supplies_the_missing_support(g: Grimoire) -> None:
    """One causal.link between a planted pair: support 2 followed + 1 asserted = 3, a link."""
    ids = write(g, two_followed_alerts())
    (a1, b1), _ = pairs(g, ids)
    g.causal_link(cause_id=a1, effect_id=b1, relationship="the whale's sale moved the market")
    assert window_links(g) == [KGLink(CAUSE, EFFECT, 1)]
    summary = distill(g.context, None, NOW)
    (entry,) = links(g)
    claim = entry.claim
    assert claim is not None and claim.condition["event"] == CAUSE
    # The claim's rate is over the occurrences seen (2 of 2: "k of n times"); the assertion
    # is in the sentence and the evidence, not passed off as an occurrence.
    assert claim.target == f"event:{EFFECT}" and claim.support == 2 and claim.effect == 1.0
    assert "asserted explicitly once" in entry.content
    assert summary["edges"] == 2  # discovered edges for both observed pairs
    # Re-running does not count the discovered edges the first run wrote: still one asserted.
    assert window_links(g) == [KGLink(CAUSE, EFFECT, 1)]


def test_asserted_support_is_in_the_operation_evidence(g: Grimoire) -> None:
    """Both pairs asserted (causal.link and a second kind, KG, on one pair counts once)."""
    ids = write(g, two_followed_alerts())
    (a1, b1), (a2, b2) = pairs(g, ids)
    g.causal_link(cause_id=a1, effect_id=b1)
    g.causal_link(cause_id=a2, effect_id=b2)
    kg = CausalEdge(a2, b2, EdgeKind.KG, 1.0, "kg", 4 * MINUTE)
    g.context.writer.call(lambda: g.context.semantic.upsert_edge(kg, now=NOW))
    ctx, cfg = g.context, g.context.config.distiller
    window = strategy_window(ctx, None, cfg.window_episodes)
    ops = learn._rule_ops(ctx, window, [], cfg, None)
    (op,) = [op for op in ops if op.category is Category.CAUSAL_LINK]
    assert op.evidence["kg_evidence"] == 2 and op.evidence["kg_confirmed"] is True
    assert op.evidence["followed"] == 2 and op.evidence["support"] == 4


def test_discovered_and_auto_edges_do_not_count(g: Grimoire) -> None:
    """Discovery's own edges and similarity auto-links on the same pairs give no support."""
    ids = write(g, two_followed_alerts())
    edges = [CausalEdge(a, b, kind, 0.9, None, 4 * MINUTE)
             for a, b in pairs(g, ids) for kind in (EdgeKind.DISCOVERED, EdgeKind.AUTO)]

    def put() -> None:
        with g.context.semantic.transaction():
            for edge in edges:
                g.context.semantic.upsert_edge(edge, now=NOW)

    g.context.writer.call(put)
    assert window_links(g) == []
    distill(g.context, None, NOW)
    assert links(g) == []


def test_an_assertion_outside_the_lag_window_does_not_count(g: Grimoire) -> None:
    """The claim says "within causal_lag_ms": a link asserted across hours supports it not."""
    ids = write(g, two_followed_alerts())
    (a1, _), (_, b2) = pairs(g, ids)  # alert at 10 h, shift at 40 h
    g.causal_link(cause_id=a1, effect_id=b2)
    assert window_links(g) == []
    distill(g.context, None, NOW)
    assert links(g) == []


def test_a_cause_outside_the_window_is_fetched(g: Grimoire) -> None:
    """Global alerts asserted as causes of a strategy's losing swaps: the strategy's window
    holds no alert, the causes are read from the store, and the link is the strategy's."""
    alerts = [{"type": "clade_alert", "text": f"Clade alert {i}", "importance": "notable",
               "timestamp": T0 + i * 3 * 60 * MINUTE} for i in range(4)]
    swaps = [{"type": "action", "text": f"swap {i}", "strategy": "s", "actions": ["swap"],
              "outcome": "negative", "timestamp": T0 + i * 3 * 60 * MINUTE + 2 * MINUTE}
             for i in range(4)]
    swaps.append({"type": "action", "text": "swap late", "strategy": "s", "actions": ["swap"],
                  "outcome": "positive", "timestamp": T0 + 20 * 60 * MINUTE})
    alert_ids, swap_ids = write(g, alerts), write(g, swaps)
    for a, b in zip(alert_ids[:3], swap_ids[:3], strict=True):
        g.causal_link(cause_id=a, effect_id=b)
    assert window_links(g, "s") == [KGLink(CAUSE, "action:swap:negative", 3)]
    assert window_links(g) == []  # the effects are the strategy's, not the global window's
    distill(g.context, "s", NOW)
    (entry,) = links(g)
    assert entry.strategy == "s" and entry.claim is not None
    assert entry.claim.condition["event"] == CAUSE
    assert entry.claim.target == "event:action:swap:negative" and entry.claim.support == 3


def test_a_causal_hint_counts_as_an_assertion(g: Grimoire) -> None:
    """The write-time causal_hint is an explicit edge: it supplies the third observation."""
    stream = two_followed_alerts()
    last_shift = max(i for i, p in enumerate(stream) if p["type"] == "regime_shift")
    shift = stream.pop(last_shift)
    ids = write(g, stream)
    alerts = [i for i, p in zip(ids, stream, strict=True) if p["type"] == "clade_alert"]
    (shift_id,) = write(g, [{**shift, "causal_hint": alerts[-1]}])
    edge = g.context.semantic.get_edge(alerts[-1], shift_id, EdgeKind.EXPLICIT)
    assert edge is not None
    assert window_links(g) == [KGLink(CAUSE, EFFECT, 1)]
    distill(g.context, None, NOW)
    (entry,) = links(g)
    assert entry.claim is not None and entry.claim.support == 2  # the occurrences seen
    assert "asserted explicitly once" in entry.content


def test_cause_episodes_read_from_the_store_are_bounded(
    g: Grimoire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most _MAX_FETCHED_CAUSES causes outside the window are read: the rest count not."""
    alerts = [{"type": "clade_alert", "text": f"Clade alert {i}", "importance": "notable",
               "timestamp": T0 + i * 3 * 60 * MINUTE} for i in range(3)]
    swaps = [{"type": "action", "text": f"swap {i}", "strategy": "s", "actions": ["swap"],
              "outcome": "negative", "timestamp": T0 + i * 3 * 60 * MINUTE + 2 * MINUTE}
             for i in range(3)]
    for a, b in zip(write(g, alerts), write(g, swaps), strict=True):
        g.causal_link(cause_id=a, effect_id=b)
    assert window_links(g, "s") == [KGLink(CAUSE, "action:swap:negative", 3)]
    monkeypatch.setattr(learn, "_MAX_FETCHED_CAUSES", 2)
    assert window_links(g, "s") == [KGLink(CAUSE, "action:swap:negative", 2)]
