"""``retrieve`` and the region MDP (SPEC §11): the query's region block and the
information-only ``region_p_success`` factor, on real stores with the curator's own phase."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from curator.cycle.summaries import REGIONS_KEY, update_regions
from curator.hierarchy.regions import RegionModel
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.records import Category, Claim
from grimoire.retrieval.regions import RegionView
from grimoire.retrieval.stages import region as pipeline_region
from tests.curator.test_curator_support import (
    finish_cycle,
    grimoire_at,
    hour,
    put,
    start_cycle,
    write,
)

QUERY = "gas fees spike in the congested mempool"
BIG = {"k": 30, "max_tokens": 5000}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock, **{"curator.regions": 2})


def _episodes() -> list[dict[str, Any]]:
    """Region "gas": swap mostly succeeds (7 of 8), bridge mostly fails (1 of 6);
    region "lending": hold succeeds. Each action follows an observation of its region."""
    plan = ([("gas", "swap", "positive")] * 7 + [("gas", "swap", "negative")]
            + [("gas", "bridge", "negative")] * 5 + [("gas", "bridge", "positive")]
            + [("lending", "hold", "positive")] * 6)
    texts = {"gas": "gas fees spike mempool congested gwei block {i}",
             "lending": "lending vault borrow collateral utilisation rate {i}"}
    out: list[dict[str, Any]] = []
    at = hour(1)
    for i, (where, action, outcome) in enumerate(plan):
        out.append({"text": texts[where].format(i=i), "timestamp": at, "type": "observation"})
        out.append({"text": f"{action} after " + texts[where].format(i=i), "type": "action",
                    "timestamp": at + 1_000, "actions": [action], "outcome": outcome,
                    "gain": 5.0 if outcome == "positive" else -5.0})
        at += 60_000
    out.append({"text": texts["gas"].format(i=99), "timestamp": at, "type": "observation"})
    return out


def _learn_regions(g: Grimoire) -> RegionModel:
    """Run the curator's regions phase and close the cycle, as ``run_cycle`` would."""
    cy = start_cycle(g)
    assert update_regions(cy)["episodes"] > 0
    finish_cycle(cy)
    return RegionModel.from_dict(g.context.semantic.get_meta(REGIONS_KEY))


def _claim(action: str) -> Claim:
    return Claim(condition={"action": action}, target="outcome:negative_rate",
                 direction="higher", effect=0.8, baseline=0.3, support=12)


def _world(g: Grimoire, clock: FrozenClock) -> dict[str, str]:
    write(g, _episodes())
    clock.set(hour(3))
    return {
        "bridge": put(g, content="bridge when gas fees spike in the congested mempool",
                      category=Category.HEURISTIC, claim=_claim("Bridge")).id,
        "plain": put(g, content="gas fees spike when the mempool is congested").id,
    }


def _query_region(g: Grimoire, model: RegionView) -> int:
    return model.assign(g.context.embedder.embed([QUERY])[0])


def test_no_model_no_region_block_and_no_factor(g: Grimoire, clock: FrozenClock) -> None:
    world = _world(g, clock)
    result = g.retrieve(query=QUERY, **BIG)
    assert "region" not in result
    assert world["bridge"] in [i["id"] for i in result["items"]]
    assert all(pipeline_region.FACTOR not in i["factors"] for i in result["items"])


def test_region_block_ranks_the_regions_actions(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    model = _learn_regions(g)
    region = _query_region(g, model)
    assert [a for a, _, _ in model.best_action(region)][:2] == ["swap", "bridge"]
    result = g.retrieve(query=QUERY, **BIG)
    block = result["region"]
    assert block["id"] == region
    assert [a["action"] for a in block["best_actions"]][:2] == ["swap", "bridge"]
    assert len(block["best_actions"]) <= 3
    for got, (action, mean, n) in zip(block["best_actions"], model.best_action(region),
                                      strict=False):
        assert got == {"action": action, "p_success": pytest.approx(
            model.p_success(region, action)), "mean_reward": pytest.approx(mean), "n": n}
    swap, bridge = block["best_actions"][:2]
    assert swap["p_success"] == pytest.approx(8 / 10) and swap["n"] == 8  # Beta(1, 1)
    assert bridge["p_success"] == pytest.approx(2 / 8) and bridge["n"] == 6


def test_claimed_action_gets_region_p_success(g: Grimoire, clock: FrozenClock) -> None:
    world = _world(g, clock)
    model = _learn_regions(g)
    region = _query_region(g, model)
    result = g.retrieve(query=QUERY, **BIG)
    by_id = {i["id"]: i for i in result["items"]}
    assert by_id[world["bridge"]]["factors"][pipeline_region.FACTOR] == {
        "value": pytest.approx(model.p_success(region, "bridge"))}
    assert pipeline_region.FACTOR not in by_id[world["plain"]]["factors"]
    episodes = [i for i in result["items"] if i["kind"] == "episode"]
    assert episodes and all(pipeline_region.FACTOR not in i["factors"] for i in episodes)


def test_ranking_is_identical_with_and_without_the_model(
        g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    before = g.retrieve(query=QUERY, mode="browse", **BIG)
    _learn_regions(g)
    after = g.retrieve(query=QUERY, mode="browse", **BIG)
    assert "region" not in before and "region" in after
    assert [(i["id"], i["score"]) for i in after["items"]] == [
        (i["id"], i["score"]) for i in before["items"]]
    for old, new in zip(before["items"], after["items"], strict=True):
        extra = {k: v for k, v in new["factors"].items() if k != pipeline_region.FACTOR}
        assert extra == old["factors"]
    assert any(pipeline_region.FACTOR in i["factors"] for i in after["items"])


def test_model_is_parsed_once_per_curator_cycle(
        g: Grimoire, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    _world(g, clock)
    _learn_regions(g)
    parsed: list[int] = []
    real = RegionView.from_dict

    def counting(data: Any) -> RegionView:
        parsed.append(1)
        return real(data)

    monkeypatch.setattr(RegionView, "from_dict", counting)
    first = g.retrieve(query=QUERY, mode="browse")
    second = g.retrieve(query="lending vault borrow collateral", mode="browse")
    assert len(parsed) == 1 and first["region"]["id"] != second["region"]["id"]
    finish_cycle(start_cycle(g))  # the next cycle: the model may have changed
    g.retrieve(query=QUERY, mode="browse")
    assert len(parsed) == 2


def test_unreadable_or_foreign_model_is_ignored(g: Grimoire, clock: FrozenClock) -> None:
    _world(g, clock)
    model = _learn_regions(g)
    ctx = g.context
    ctx.writer.call(lambda: ctx.semantic.set_meta(REGIONS_KEY, {"format": 99}))
    pipeline_region.forget_region_model(ctx)
    assert "region" not in g.retrieve(query=QUERY, mode="browse")
    other = RegionModel(1)
    other.fit([[1.0, 0.0, 0.0]])  # regions of another embedding dimension
    ctx.writer.call(lambda: ctx.semantic.set_meta(REGIONS_KEY, other.to_dict()))
    pipeline_region.forget_region_model(ctx)
    result = g.retrieve(query=QUERY, mode="browse")
    assert "region" not in result and result["items"]
    ctx.writer.call(lambda: ctx.semantic.set_meta(REGIONS_KEY, model.to_dict()))
    pipeline_region.forget_region_model(ctx)
    assert g.retrieve(query=QUERY, mode="browse")["region"]["id"] == _query_region(g, model)


def test_region_rank_scales_advice_by_the_regions_outcomes(
        tmp_path: Path, clock: FrozenClock) -> None:
    """``retrieval.region_rank`` on, deciding mode: a recommendation of an action that fails
    in the query's region is scaled by 0.5 + P(success), a warning against it by
    0.5 + (1 − P(success)); relevance tiers are kept. Off (the default): no such factor."""
    for on in (True, False):
        gen = grimoire_at(tmp_path / str(on), clock, **{"curator.regions": 2,
                                                        "retrieval.region_rank": on})
        g = next(gen)
        try:
            world = _world(g, clock)
            warn = put(g, content="avoid bridging when gas fees spike in the mempool",
                       category=Category.WARNING, claim=_claim("Bridge")).id
            model = _learn_regions(g)
            p = model.p_success(_query_region(g, model), "bridge")
            items = {i["id"]: i for i in g.retrieve(query=QUERY, mode="deciding", **BIG)[
                "items"]}
            if on:
                assert items[world["bridge"]]["factors"]["region_rank"]["multiplier"] == (
                    pytest.approx(0.5 + p))
                assert items[warn]["factors"]["region_rank"]["multiplier"] == (
                    pytest.approx(1.5 - p))
                assert "region_rank" not in items[world["plain"]]["factors"]
            else:
                assert all("region_rank" not in i["factors"] for i in items.values())
        finally:
            gen.close()
