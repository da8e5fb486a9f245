"""``causal.link``, ``causal.chain`` and the write-time links (causal hints, regime shifts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import NotFoundError, ValidationError
from grimoire.methods.causal import NO_CONTEXT
from grimoire.stores.semantic.types import EdgeKind
from tests.retrieval.retrieve_support import open_grimoire, put_entry

MINUTE = 60_000


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with open_grimoire(tmp_path / "data", clock) as grimoire:
        yield grimoire


def _story(g: Grimoire, clock: FrozenClock) -> list[str]:
    """drought → rationing → black market → riots, linked explicitly."""
    texts = ["a drought ruined the harvest", "the council imposed grain rationing",
             "a black market for grain appeared", "riots broke out in the market district"]
    made = []
    for text in texts:
        made.append(g.episode_write(text=text)["id"])
        clock.advance(10 * MINUTE)
    reasons = ["grain ran short", "rations were too small", "prices exploded"]
    for cause, effect, why in zip(made, made[1:], reasons, strict=False):
        g.causal_link(cause_id=cause, effect_id=effect, relationship=why, weight=0.9)
    return made


def test_link_stores_an_explicit_edge(g: Grimoire, clock: FrozenClock) -> None:
    a = g.episode_write(text="gas spiked")["id"]
    clock.advance(MINUTE)
    b = put_entry(g, "swaps fail when gas spikes").id
    out = g.causal_link(cause_id=a, effect_id=b, relationship="gas made it fail", weight=0.7)
    assert out["edge"]["kind"] == "explicit" and out["edge"]["weight"] == 0.7
    stored = g.context.semantic.get_edge(a, b, EdgeKind.EXPLICIT)
    assert stored is not None and stored.relationship == "gas made it fail"
    g.causal_link(cause_id=a, effect_id=b, weight=0.4)  # re-linking replaces the values
    again = g.context.semantic.get_edge(a, b, EdgeKind.EXPLICIT)
    assert again is not None and again.weight == 0.4


@pytest.mark.parametrize(("params", "field"), [
    ({"effect_id": "x"}, "cause_id"),
    ({"cause_id": "x"}, "effect_id"),
    ({"cause_id": "x", "effect_id": "x"}, "effect_id"),
    ({"cause_id": "x", "effect_id": "y", "weight": 0}, "weight"),
    ({"cause_id": "x", "effect_id": "y", "weight": 1.5}, "weight"),
    ({"cause_id": "x", "effect_id": "y", "weight": True}, "weight"),
    ({"cause_id": "x", "effect_id": "y", "relationship": 5}, "relationship"),
    ({"cause_id": "x", "effect_id": "y", "kind": "auto"}, "params"),
])
def test_link_validation_names_the_field(g: Grimoire, params: dict[str, object],
                                         field: str) -> None:
    with pytest.raises(ValidationError) as info:
        g.causal_link(**params)
    assert info.value.field == field


def test_link_needs_both_items_and_time_order(g: Grimoire, clock: FrozenClock) -> None:
    a = g.episode_write(text="first")["id"]
    clock.advance(MINUTE)
    b = g.episode_write(text="second")["id"]
    with pytest.raises(NotFoundError, match="cause_id"):
        g.causal_link(cause_id="missing", effect_id=b)
    with pytest.raises(NotFoundError, match="effect_id"):
        g.causal_link(cause_id=a, effect_id="missing")
    with pytest.raises(ValidationError) as info:
        g.causal_link(cause_id=b, effect_id=a)
    assert info.value.field == "cause_id"
    assert g.context.semantic.list_edges() == []


def test_chain_by_id_walks_back_to_the_root_oldest_first(g: Grimoire, clock: FrozenClock) -> None:
    made = _story(g, clock)
    out = g.causal_chain(id=made[-1])
    assert [link["id"] for link in out["chain"]] == made
    assert [link["relationship"] for link in out["chain"]] == [
        None, "grain ran short", "rations were too small", "prices exploded"]
    assert out["chain"][1]["weight"] == 0.9 and out["chain"][0]["kind"] == "episode"
    assert out["narrative"] == (
        "a drought ruined the harvest → (because grain ran short) → the council imposed "
        "grain rationing → (because rations were too small) → a black market for grain "
        "appeared → (because prices exploded) → riots broke out in the market district")


def test_chain_by_query_starts_from_the_most_relevant_event(
        g: Grimoire, clock: FrozenClock) -> None:
    made = _story(g, clock)
    out = g.causal_chain(query="riots in the market district")
    assert out["start_id"] == made[-1] and len(out["chain"]) == 4
    assert 0.0 < out["similarity"] <= 1.0


def test_chain_errors_and_empty_memory(g: Grimoire) -> None:
    assert g.causal_chain(query="anything") == {"chain": [], "narrative": NO_CONTEXT,
                                                "start_id": None, "scope": "default"}
    with pytest.raises(ValidationError):
        g.causal_chain(query="a", id="b")
    with pytest.raises(ValidationError):
        g.causal_chain()
    with pytest.raises(NotFoundError):
        g.causal_chain(id="missing")


def test_causal_hint_links_at_write_time(g: Grimoire, clock: FrozenClock) -> None:
    cause = g.episode_write(text="oracle price lagged by 5 minutes")["id"]
    clock.advance(MINUTE)
    effect = g.episode_write(text="liquidation at a stale price", causal_hint=cause)["id"]
    edge = g.context.semantic.get_edge(cause, effect, EdgeKind.EXPLICIT)
    assert edge is not None and edge.weight == 1.0 and edge.lag_ms == MINUTE
    orphan = g.episode_write(text="hint to nowhere", causal_hint="missing")["id"]
    assert g.context.semantic.edges_to(orphan) == []  # logged, the write still succeeded


def test_a_hinted_event_also_gets_its_inferred_predecessors(
        g: Grimoire, clock: FrozenClock) -> None:
    """A causal hint names one cause; seed 000's auto-link adds the other recent, similar
    episodes as weak AUTO causes, never a second edge to the named one."""
    named = g.episode_write(text="oracle price lagged by 5 minutes on the eth feed")["id"]
    clock.advance(MINUTE)
    similar = g.episode_write(text="eth oracle price lagging behind spot again")["id"]
    unrelated = g.episode_write(text="routine heartbeat ok")["id"]
    clock.advance(MINUTE)
    effect = g.episode_write(text="liquidation at a stale eth oracle price",
                             causal_hint=named)["id"]
    edges = g.context.semantic.edges_to(effect)
    kinds = {(e.cause_id, e.kind) for e in edges}
    assert (named, EdgeKind.EXPLICIT) in kinds and (named, EdgeKind.AUTO) not in kinds
    assert (similar, EdgeKind.AUTO) in kinds
    assert unrelated not in {e.cause_id for e in edges}
    plain = g.episode_write(text="liquidation at a stale eth oracle price, again")["id"]
    # no hint: its causes are still searched (every type is auto-linked), none is explicit
    assert {e.kind for e in g.context.semantic.edges_to(plain)} == {EdgeKind.AUTO}


def test_regime_shift_is_auto_linked_to_recent_similar_episodes(
        g: Grimoire, clock: FrozenClock) -> None:
    related = g.episode_write(text="volatility rising fast as eth price volatility spikes")["id"]
    unrelated = g.episode_write(text="routine heartbeat ok")["id"]
    clock.advance(2 * 3_600_000)
    stale = g.episode_write(text="volatility rising fast again")["id"]
    clock.advance(10 * MINUTE)
    early = g.episode_write(text="eth price volatility rising fast")["id"]
    clock.advance(5 * MINUTE)
    shift = g.episode_write(text="regime shift to high volatility: price volatility rising fast",
                            type="regime_shift")["id"]
    causes = {e.cause_id: e for e in g.context.semantic.edges_to(shift, [EdgeKind.AUTO])}
    assert early in causes and stale in causes
    assert related not in causes and unrelated not in causes  # outside the 1 h window
    assert causes[early].weight > causes[stale].weight
    assert 0.3 <= causes[stale].weight <= 1.0
    # the observations were linked too: the chain walks back through early to stale
    assert [s["id"] for s in g.causal_chain(id=shift)["chain"]] == [stale, early, shift]


@pytest.mark.parametrize("kind", ["observation", "action", "safety_incident", "clade_alert"])
def test_every_event_type_is_auto_linked(g: Grimoire, clock: FrozenClock, kind: str) -> None:
    """Seed 000 links every new event, not only regime shifts, and seed 001's add_event
    searches every effect's causes: observations are linked too."""
    cause = g.episode_write(text="eth oracle price lagging behind spot again")["id"]
    clock.advance(MINUTE)
    event = g.episode_write(text="eth oracle price lag caused a stale liquidation",
                            type=kind)["id"]
    assert cause in {e.cause_id for e in g.context.semantic.edges_to(event, [EdgeKind.AUTO])}
    clock.advance(MINUTE)
    unrelated = g.episode_write(text="routine heartbeat ok, nothing to report")["id"]
    assert g.context.semantic.edges_to(unrelated) == []  # close in time, not in meaning


def test_observations_are_not_linked_when_the_config_leaves_them_out(
        tmp_path: Path, clock: FrozenClock) -> None:
    types = [t for t in Config().retrieval.auto_link_types if t != "observation"]
    with open_grimoire(tmp_path / "d", clock, **{"retrieval.auto_link_types": types}) as g:
        g.episode_write(text="eth oracle price lagging behind spot again")
        clock.advance(MINUTE)
        note = g.episode_write(text="eth oracle price lag noted once more")["id"]
        assert g.context.semantic.edges_to(note) == []


def test_auto_linking_keeps_an_events_strongest_causes_only(g: Grimoire,
                                                             clock: FrozenClock) -> None:
    """An alert among many similar recent events gets retrieval.causal_max_fan_in (5)
    inferred causes, the strongest, not one per event (the demo's alerts had ~30)."""
    recent = []
    for i in range(12):
        recent.append(g.episode_write(text=f"eth oracle price lagging behind spot {i}")["id"])
        clock.advance(MINUTE)
    hinted = g.episode_write(text="someone said the oracle was fine")["id"]
    g.causal_link(cause_id=recent[0], effect_id=hinted)  # explicit: never dropped
    alert = g.episode_write(text="eth oracle price lagging behind spot: stale liquidation",
                            type="clade_alert", causal_hint=hinted)["id"]
    bound = g.context.config.retrieval.causal_max_fan_in
    inferred = g.context.semantic.edges_to(alert, [EdgeKind.AUTO])
    assert len(inferred) == bound
    assert recent[-1] in {e.cause_id for e in inferred}  # nearest in time: strongest
    assert g.context.semantic.get_edge(hinted, alert, EdgeKind.EXPLICIT) is not None


def test_inferred_edges_no_decision_used_are_pruned_after_their_ttl(
        g: Grimoire, clock: FrozenClock) -> None:
    """Causal edges earn their place: the curator prunes an inferred edge nobody was
    served on a causal chain for retrieval.causal_edge_ttl_hours (48) of data time; one
    served to a decision lives on from that use; the agent's explicit edges stay."""
    from curator.cycle.run import run_cycle
    from tests.retrieval.retrieve_support import settle

    hour = 3_600_000
    served_cause = g.episode_write(text="eth oracle price lagging behind spot")["id"]
    idle_cause = g.episode_write(text="gas fees spiking on base chain")["id"]
    clock.advance(MINUTE)
    served = g.episode_write(text="eth oracle price lagging behind spot by 3 blocks",
                             type="clade_alert")["id"]
    idle = g.episode_write(text="gas fees spiking on base chain again",
                           type="clade_alert")["id"]
    g.causal_link(cause_id=idle_cause, effect_id=idle)  # explicit beside the auto edge
    semantic = g.context.semantic
    assert semantic.get_edge(served_cause, served, EdgeKind.AUTO) is not None
    assert semantic.get_edge(idle_cause, idle, EdgeKind.AUTO) is not None
    clock.advance(30 * hour)
    result = g.retrieve(query="eth oracle price lagging behind spot by 3 blocks")
    assert [link["id"] for link in result["causal_chain"]["chain"]] == [served_cause, served]
    g.retrieve(query="gas fees spiking on base chain again", mode="browse")  # not a decision
    settle(g)
    clock.advance(30 * hour)  # 60 h after the edges were made, 30 h after the use
    # The curator runs on the data's own time: the agent's next episode moves it.
    g.episode_write(text="a quiet hour on every chain")
    summary = run_cycle(g.context)
    assert summary["phases"]["edges"]["pruned"] == 1
    assert semantic.get_edge(served_cause, served, EdgeKind.AUTO) is not None
    assert semantic.get_edge(idle_cause, idle, EdgeKind.AUTO) is None
    assert semantic.get_edge(idle_cause, idle, EdgeKind.EXPLICIT) is not None
    clock.advance(49 * hour)  # the use is old now too
    g.episode_write(text="another quiet hour on every chain")
    assert run_cycle(g.context)["phases"]["edges"]["pruned"] == 1
    assert semantic.get_edge(served_cause, served, EdgeKind.AUTO) is None


def test_retrieval_walks_an_observations_inferred_causes_only_when_asked(
        g: Grimoire, clock: FrozenClock) -> None:
    """Every observation is auto-linked, but the top episode retrieval picks by itself does
    not pull in its auto-linked causes (they reordered every answer by the turns before it);
    the same walk runs when the caller names the event, and the chain has them."""
    cause = g.episode_write(text="eth oracle price lagging behind spot again")["id"]
    clock.advance(MINUTE)
    effect = g.episode_write(text="eth oracle price lag seen on the lending market")["id"]
    assert g.context.semantic.edges_to(effect, [EdgeKind.AUTO])
    implicit = g.retrieve(query="eth oracle price lag seen on the lending market", k=3)
    assert implicit["trace"]["event_id"] == effect and implicit["trace"]["ancestors"] == 0
    named = g.retrieve(query="eth oracle price lag seen on the lending market", k=3,
                       event_id=effect)
    assert named["trace"]["ancestors"] == 1
    assert [s["id"] for s in g.causal_chain(id=effect)["chain"]] == [cause, effect]
    # an event's auto-linked causes are walked as before
    clock.advance(MINUTE)
    alert = g.episode_write(text="eth oracle price lag alert on the lending market",
                            type="clade_alert")["id"]
    event = g.retrieve(query="eth oracle price lag alert on the lending market", k=3)
    assert event["trace"]["event_id"] == alert and event["trace"]["ancestors"] >= 1
