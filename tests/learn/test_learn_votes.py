"""Batched votes (the curator's contract) and claim aliases, on a real semantic store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator.distiller.operations import Operation, OpKind
from curator.learn.apply import apply_operations, link_weight
from curator.learn.filter import leak_reason, without_echoes, without_leaks
from curator.learn.votes import VOTES_KEY, parse_votes, record_votes
from grimoire.clock import MS_PER_DAY, MS_PER_HOUR, FrozenClock
from grimoire.config import DistillerConfig
from grimoire.errors import ValidationError
from grimoire.grimoire import Grimoire
from grimoire.ids import new_id
from grimoire.models.embedders import HashEmbedder
from grimoire.records import (
    Category,
    Claim,
    EntryStatus,
    Episode,
    EpisodeType,
    episode_from_params,
)
from grimoire.stores.semantic.types import EntryFilter
from tests.learn.learn_support import T0, open_grimoire, stored, write

NOW = T0 + 90 * MS_PER_DAY


@pytest.fixture
def g(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[Grimoire]:
    grimoire = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder)
    yield grimoire
    grimoire.close()


def test_votes_accumulate_in_the_agreed_shape(g: Grimoire) -> None:
    record_votes(g.context, {"a": {"up": 2}, "b": {"down": 1}})
    total = record_votes(g.context, {"a": {"up": 1, "down": 1}})
    expected = {"a": {"up": 3, "down": 1}, "b": {"up": 0, "down": 1}}
    assert total == expected and g.context.semantic.get_meta(VOTES_KEY) == expected


def test_bad_votes_are_refused_and_leave_the_meta_untouched(g: Grimoire) -> None:
    record_votes(g.context, {"a": {"up": 1}})
    for bad, field in (({"a": {"up": -1}}, "votes.a.up"), ({"a": {"sideways": 1}}, "votes.a"),
                       ({"": {"up": 1}}, "votes"), ({"a": {"up": True}}, "votes.a.up"),
                       (["a"], "votes")):
        with pytest.raises(ValidationError) as err:
            record_votes(g.context, bad)  # type: ignore[arg-type]
        assert err.value.field == field
    assert g.context.semantic.get_meta(VOTES_KEY) == {"a": {"up": 1, "down": 0}}


def test_no_votes_write_nothing(g: Grimoire) -> None:
    assert record_votes(g.context, {"a": {"up": 0, "down": 0}}) == {}
    assert g.context.semantic.get_meta(VOTES_KEY) is None


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from("abc"),
                                st.fixed_dictionaries({"up": st.integers(0, 5),
                                                       "down": st.integers(0, 5)}),
                                max_size=3), max_size=5))
def test_merging_is_a_sum_whatever_the_batching(batches: list[dict[str, dict[str, int]]]
                                                ) -> None:
    """Property: merged pending votes equal the per-entry sums of every batch."""
    from curator.learn.votes import _merge

    merged: dict[str, dict[str, int]] = {}
    for batch in batches:
        merged = _merge(merged, parse_votes(batch))
    for key in "abc":
        for direction in ("up", "down"):
            want = sum(b[key][direction] for b in batches if key in b)
            assert merged.get(key, {"up": 0, "down": 0})[direction] == want


def _episode(i: int, ts: int) -> Episode:
    return Episode(id=f"ep{i}", text="gas", type=EpisodeType.OBSERVATION, timestamp=ts)


def _add(content: str, claim: Claim, parents: tuple[str, ...] = ("ep0",)) -> Operation:
    return Operation(op=OpKind.ADD, category=Category.INSIGHT, claim=claim, content=content,
                     parent_episode_ids=parents, strategy=None)


def test_a_claim_merged_elsewhere_becomes_that_entrys_upvote(g: Grimoire) -> None:
    """Re-proposing a claim the gate folded into another entry is a batched vote for it."""
    text = "Gas averages 6.1 gwei (vs 24 overall) between 02:00 and 04:00 UTC (n=40)."
    first = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 6.1, 24.0, 40)
    # the same claim seen in one strategy's episodes: the global entry holds it
    other = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 7.0, 24.0, 44,
                  strategy="dca")
    eps = [_episode(0, NOW - 1000)]
    assert apply_operations(g.context, [_add(text, first)], eps, NOW)["admitted"] == 1
    (stored,) = g.context.semantic.list_entries(limit=None)
    result = apply_operations(g.context, [_add(text, other)], eps, NOW)
    assert result["skipped"] == 1  # identical text: a duplicate of the stored entry
    again = apply_operations(g.context, [_add(text, other)], eps, NOW)
    assert again["aliased"] == 1 and again["skipped"] == 0 and again["votes"] == 1
    assert g.context.semantic.get_meta(VOTES_KEY) == {stored.id: {"up": 1, "down": 0}}
    assert len(g.context.semantic.list_admissions(limit=None)) == 2  # no third gate decision


def test_a_claim_folded_into_another_claim_is_proposed_again(g: Grimoire) -> None:
    """Text alone made it a duplicate of an entry stating another claim: no alias, no vote."""
    text = "Gas averages 6.1 gwei (vs 24 overall) between 02:00 and 04:00 UTC (n=40)."
    first = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 6.1, 24.0, 40)
    other = Claim({"hour_window": [0, 2]}, "metric:gas_gwei", "higher", 30.0, 24.0, 40)
    eps = [_episode(0, NOW - 1000)]
    apply_operations(g.context, [_add(text, first)], eps, NOW)
    for _ in range(2):
        result = apply_operations(g.context, [_add(text, other)], eps, NOW)
        assert result["skipped"] == 1 and result["aliased"] == 0 and result["votes"] == 0
    assert g.context.semantic.get_meta(VOTES_KEY) is None


def test_a_rejected_claim_waits_for_twice_the_support(g: Grimoire) -> None:
    """Stale evidence (two months old) is rejected, then not re-proposed until it doubles."""
    claim = Claim({"regime": "bear"}, "metric:volume", "higher", 2.0, 1.0, 5)
    eps = [_episode(0, NOW - 60 * MS_PER_DAY)]
    assert apply_operations(g.context, [_add("Volume is higher.", claim)], eps, NOW)[
        "rejected"] == 1
    held = apply_operations(g.context, [_add("Volume is higher.", claim)], eps, NOW)
    assert held["held_back"] == 1 and held["rejected"] == 0 and held["consolidated"] == 0
    grown = Claim({"regime": "bear"}, "metric:volume", "higher", 2.0, 1.0, 10)
    retried = apply_operations(g.context, [_add("Volume is higher.", grown)], eps, NOW)
    assert retried["held_back"] == 0 and retried["rejected"] + retried["admitted"] == 1
    assert len(g.context.semantic.list_admissions(limit=None)) == 2  # the gate saw it again


def test_link_weight_is_the_share_chance_does_not_explain() -> None:
    def link(effect: float, base: float) -> Operation:
        claim = Claim({"event": "a", "within_ms": 600_000}, "event:b", "higher", effect, base, 5)
        return Operation(op=OpKind.ADD, category=Category.CAUSAL_LINK, claim=claim,
                         content="A is followed by B.")

    assert link_weight(link(0.5, 0.1)) == pytest.approx(0.8)
    assert link_weight(link(0.1, 0.1)) == 0.0 and link_weight(link(0.0, 0.0)) == 0.0
    assert link_weight(link(1.0, 0.0)) == 1.0


@pytest.mark.parametrize(("condition", "target", "dropped"), [
    ({"action": "swap", "metric_band": ["pnl", "lower"]}, "outcome:negative_rate", True),
    ({"action": "swap", "metric_band": ["gas_gwei", "upper"]}, "outcome:negative_rate", False),
    ({"metric_band": ["return_bps", "upper"]}, "metric:pnl", True),
    ({"metric_band": ["size_usd", "upper"]}, "metric:pnl", True),
    ({"metric_band": ["volume", "upper"]}, "metric:slippage_bps", False),
    ({"hour_window": [2, 4]}, "metric:fees", True),
    ({"metric_band": ["fees", "lower"]}, "metric:size_usd", True),
    ({"regime": "high_vol"}, "metric:pnl", False),
])
def test_leak_filter(condition: dict[str, object], target: str, dropped: bool) -> None:
    claim = Claim(condition, target, "higher", 2.0, 1.0, 10)
    cfg = DistillerConfig(derived_metrics=["fees"])  # a deployment that knows its fees
    op = Operation(op=OpKind.ADD, category=Category.INSIGHT, claim=claim, content="x")
    assert (leak_reason(op, cfg) is not None) is dropped
    down = Operation(op=OpKind.DOWNVOTE, category=Category.INSIGHT, claim=claim, content="x",
                     target_entry_id="e1")
    kept, gone = without_leaks([op, down], cfg)
    assert down in kept and (op in kept) is not dropped and len(gone) == int(dropped)


def test_hour_windows_need_their_window_to_come_round_again() -> None:
    """Issue 24: a 02:00-04:00 window is judged once its hours were seen on two days (04:00
    on the second day), not once two whole days have passed (the third morning); a window
    seen once (a stretch of the first morning) is not."""
    cfg = DistillerConfig()
    claim = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 6.0, 24.0, 20)
    add = Operation(op=OpKind.ADD, category=Category.INSIGHT, claim=claim, content="x")
    down = Operation(op=OpKind.DOWNVOTE, category=Category.INSIGHT, claim=claim, content="x",
                     target_entry_id="e1")
    every_3_min = 180_000

    def until(hours: float) -> list[int]:
        return list(range(0, int(hours * MS_PER_HOUR), every_3_min))

    kept, gone = without_leaks([add, down], cfg, timestamps=until(24 + 2.5))
    assert kept == [down] and "2 different days" in gone[0][1]  # 03:00 seen once
    assert without_leaks([add, down], cfg, timestamps=until(28))[0] == [add, down]
    late = dataclasses.replace(add, claim=dataclasses.replace(
        claim, condition={"hour_window": [18, 21]}))
    assert without_leaks([late], cfg, timestamps=until(28))[0] == []
    assert without_leaks([late], cfg, timestamps=until(45))[0] == [late]
    wraps = dataclasses.replace(add, claim=dataclasses.replace(
        claim, condition={"hour_window": [22, 2]}))
    assert without_leaks([wraps], cfg, timestamps=until(26))[0] == []  # 22-24 seen once
    assert without_leaks([wraps], cfg, timestamps=until(48))[0] == [wraps]
    assert without_leaks([add], cfg)[0] == [add]  # times unknown: not checked


def test_no_metric_is_derived_by_default() -> None:
    """Config defaults encode no data source's formulas (issue 11 item 7)."""
    assert DistillerConfig().derived_metrics == []
    claim = Claim({"hour_window": [2, 4]}, "metric:fees", "lower", 2.0, 6.0, 10)
    op = Operation(op=OpKind.ADD, category=Category.INSIGHT, claim=claim, content="x")
    assert leak_reason(op, DistillerConfig()) is None


def _metric_op(metric: str, condition: dict[str, object], effect: float, base: float,
               ) -> Operation:
    return Operation(op=OpKind.ADD, category=Category.INSIGHT, content=metric,
                     claim=Claim(condition, f"metric:{metric}", "lower", effect, base, 40))


def test_a_metric_computed_from_another_is_its_echo() -> None:
    """The general rule in place of a configured list: a fee computed from gas (× price, +
    a size term) moves with gas, so its cheap-hour finding is gas's echo and goes; the
    stronger relative effect (gas's: the fee's other terms dilute it) stays, as does an
    independent metric's finding under the same condition and a coupled one under
    another condition. A condition on a band of a coupled metric is arithmetic."""
    rng = np.random.default_rng(3)
    episodes = []
    for i in range(200):
        gas = float(rng.lognormal(3.0, 0.3))
        price = float(3400 * rng.lognormal(0, 0.02))
        size = float(rng.uniform(500, 5000))
        episodes.append(episode_from_params(
            {"text": f"tick {i}", "type": "observation", "timestamp": T0 + i * 60_000,
             "metrics": {"gas_gwei": gas, "fees": gas * 150_000e-9 * price + size * 5e-4,
                         "slippage_bps": float(rng.lognormal(2.5, 0.3))}},
            id=f"e{i}", now_ms=T0 + i * 60_000))
    cfg = DistillerConfig()
    window = {"hour_window": [2, 4]}
    gas = _metric_op("gas_gwei", window, 6.0, 24.0)
    fees = _metric_op("fees", window, 4.0, 13.0)
    slip = _metric_op("slippage_bps", window, 6.0, 12.0)
    other = _metric_op("fees", {"regime": "high_vol"}, 20.0, 13.0)
    band = _metric_op("fees", {"metric_band": ["gas_gwei", "lower"]}, 4.0, 13.0)
    kept, gone = without_echoes([fees, gas, slip, other, band], episodes, cfg)
    assert kept == [gas, slip, other]
    assert [op for op, _ in gone] == [fees, band]
    assert "echo of the gas_gwei finding" in gone[0][1]
    # Independent metrics are never coupled; too few shared episodes judge nothing.
    assert without_echoes([gas, slip], episodes, cfg)[0] == [gas, slip]
    assert without_echoes([fees, gas], episodes[:10], cfg)[0] == [fees, gas]


def test_a_claim_found_again_after_it_was_archived_revives_its_one_entry(g: Grimoire) -> None:
    """One entry per claim (SPEC §13): a claim archived after fading and then found again
    is the same entry, back as a candidate with its ✓ / ✗, and the re-finding is only its
    (uncounted) vote, not a new entry at ✓0 (issue 24's churn: dropped and re-made)."""
    text = "Gas averages 6.1 gwei (vs 24 overall) between 02:00 and 04:00 UTC (n=40)."
    claim = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 6.1, 24.0, 40)
    eps = [_episode(0, NOW - 1000)]
    assert apply_operations(g.context, [_add(text, claim)], eps, NOW)["admitted"] == 1
    semantic = g.context.semantic
    (first,) = semantic.list_entries(limit=None)
    cold = dataclasses.replace(first, status=EntryStatus.ARCHIVED, validated_count=12,
                               contradicted_count=2, confidence=0.55,
                               consecutive_low_confidence=3)
    g.context.writer.call(lambda: semantic.update_entry(cold))
    refound = dataclasses.replace(claim, effect=6.4, support=44)
    result = apply_operations(g.context, [_add(text, refound)], eps, NOW + 1000)
    assert result["revived"] == 1 and result["admitted"] == 0 and result["votes"] == 1
    every = semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)), limit=None)
    assert [e.id for e in every] == [first.id]
    back = semantic.get_entry(first.id)
    assert back is not None and back.status is EntryStatus.CANDIDATE
    assert (back.validated_count, back.contradicted_count, back.confidence) == (12, 2, 0.55)
    assert back.consecutive_low_confidence == 0
    assert [d.op for d in semantic.list_curator_deltas(entry_id=first.id)] == ["revive"]
    # found again later: a vote for the same entry, still one entry
    again = apply_operations(g.context, [_add(text, refound)], eps, NOW + 2000)
    assert again["aliased"] == 1 and again["revived"] == 0
    assert len(semantic.list_entries(EntryFilter(statuses=tuple(EntryStatus)),
                                     limit=None)) == 1


def test_an_edit_that_moves_the_condition_recounts_evidence_on_the_new_one(g: Grimoire
                                                                           ) -> None:
    """A verdict is evidence on the condition it was judged on (issue 24, many_pairs): ✗
    counted on 23:00 swaps for "swaps lose 20:00–00:00" are not ✗ of the edited claim
    "swaps lose 20:00–23:00", whose hours they are not in. The rows stay recorded, so a
    condition that moves back counts them again, and the rule derived from the entry
    follows its counts."""
    day = T0 + 10 * MS_PER_DAY
    params = [{"type": "action", "text": f"swap {i}", "strategy": "dca", "actions": ["swap"],
               "outcome": "negative" if i < 6 else "positive",
               "timestamp": day + (21 if i < 6 else 23) * MS_PER_HOUR + i * 60_000}
              for i in range(10)]
    ids = write(g, params)
    wide = Claim({"action": "swap", "hour_window": [20, 0]}, "outcome:negative_rate",
                 "higher", 0.6, 0.35, 10, 1e-6, "dca")
    text = "Avoid swap when the hour is 20:00–00:00 UTC."
    add = Operation(OpKind.ADD, Category.WARNING, wide, text, parent_episode_ids=tuple(ids),
                    strategy="dca")
    assert apply_operations(g.context, [add], [], NOW)["admitted"] == 1
    semantic = g.context.semantic
    (entry,) = semantic.list_entries(EntryFilter(categories=(Category.WARNING,)), limit=None)
    rule = dataclasses.replace(entry, id=new_id(NOW), claim=None, tags=("derived",),
                               parent_entry_ids=(entry.id,))

    def count() -> None:
        semantic.insert_entry(rule, np.ones(g.context.embedder.dim, np.float32))
        for target in (entry.id, rule.id):
            semantic.record_evidence(target, ids[:6], "confirm", cycle=1, now=NOW)
            semantic.record_evidence(target, ids[6:], "contradict", cycle=1, now=NOW)
            semantic.update_entry(dataclasses.replace(
                stored(g, target), validated_count=6, contradicted_count=4, confidence=0.55))
    g.context.writer.call(count)

    def edit(window: list[int]) -> None:
        claim = dataclasses.replace(wide, condition={"action": "swap", "hour_window": window})
        op = Operation(OpKind.EDIT, Category.WARNING, claim, text, target_entry_id=entry.id,
                       parent_episode_ids=tuple(ids), strategy="dca")
        assert apply_operations(g.context, [op], [], NOW)["edited"] == 1

    edit([20, 23])
    for target in (entry.id, rule.id):
        narrowed = stored(g, target)
        assert (narrowed.validated_count, narrowed.contradicted_count) == (6, 0)
        assert narrowed.confidence == pytest.approx((6 + 5) / (6 + 10))
    (delta,) = [d for d in semantic.list_curator_deltas(entry_id=entry.id) if d.op == "edit"]
    assert delta.before["contradicted_count"] == 4 and delta.after["contradicted_count"] == 0
    edit([20, 0])
    back = stored(g, entry.id)
    assert (back.validated_count, back.contradicted_count) == (6, 4)
    assert len(semantic.list_evidence(entry.id)) == 10  # each episode still counted once
