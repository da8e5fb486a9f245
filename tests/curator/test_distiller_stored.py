"""The distiller against the claims already stored: a repeat run upvotes rather than adds
again, a reversed or flipped regularity downvotes the old claim, a refined or moved one is
edited, and a claim it cannot judge (another strategy's, too few episodes now, an unknown
vocabulary) is left alone. Synthetic episodes from ``test_distiller.make_episodes``.
"""

from __future__ import annotations

import dataclasses

from curator.distiller.distill import distill
from curator.distiller.operations import NEGATIVE_RATE, ExistingClaim, OpKind
from grimoire.records import Category, Claim
from tests.curator.test_distiller import CFG, DAY, START, existing_from, make_episodes, only


def test_repeat_run_upvotes_instead_of_adding_again() -> None:
    episodes = make_episodes(7, cheap_gas=True, warning="bad")
    first = distill(episodes, [], CFG, strategy="s")
    assert {op.op for op in first} == {OpKind.ADD} and len(first) == 2
    existing = existing_from(first)
    second = distill(episodes, existing, CFG, strategy="s")
    assert sorted((op.op, op.target_entry_id) for op in second) == [
        (OpKind.UPVOTE, "entry-0"), (OpKind.UPVOTE, "entry-1")]
    assert [op.claim.key for op in second] == [op.claim.key for op in first]


def test_claims_of_another_strategy_are_neither_matched_nor_contradicted() -> None:
    episodes = make_episodes(7, cheap_gas=True)
    first = distill(episodes, [], CFG, strategy="a")
    other = distill(make_episodes(8), existing_from(first), CFG, strategy="b")
    assert other == []
    again = distill(episodes, existing_from(first), CFG, strategy="b")
    assert [op.op for op in again] == [OpKind.ADD]


def test_reversed_regularity_downvotes_the_old_claim() -> None:
    """Swaps that failed in the first month succeed in the second: the warning is downvoted."""
    first_month = make_episodes(9, warning="bad", id_prefix="a")
    second_month = make_episodes(10, warning="good", start=START + 30 * DAY, id_prefix="b")
    learned = distill(first_month, [], CFG, strategy=None)
    warning = only(learned, category=Category.WARNING)
    existing = [ExistingClaim("w1", warning.claim, 0.5)]
    ops = distill(second_month, existing, CFG, strategy=None)
    down = only(ops, op=OpKind.DOWNVOTE)
    assert down.target_entry_id == "w1" and down.category is Category.WARNING
    assert down.claim.key == warning.claim.key
    assert down.claim.effect < 0.2  # what the second month shows
    assert down.content.startswith("Not confirmed by recent episodes: swap on WETH/USDC")
    assert down.evidence["p_value"] < CFG.alpha
    assert not [op for op in ops if op.category is Category.WARNING and op.op is OpKind.ADD]


def test_recent_window_after_a_flip_downvotes() -> None:
    """The facade feeds the most recent episodes: once they are mostly post-flip, DOWNVOTE."""
    before = make_episodes(11, warning="bad", id_prefix="a")
    after = make_episodes(12, warning="good", start=START + 30 * DAY, id_prefix="b")
    old = only(distill(before, [], CFG, strategy=None), category=Category.WARNING)
    window = (before + after)[-2000:]
    ops = distill(window, [ExistingClaim("w1", old.claim, 0.5)], CFG, strategy=None)
    assert only(ops, target_entry_id="w1").op is OpKind.DOWNVOTE


def test_noise_never_downvotes_a_claim_it_cannot_judge() -> None:
    """A claim whose condition has too few episodes now is left alone."""
    claim = Claim({"action": "swap", "regime": "crisis", "token_pair": "WETH/USDC"},
                  NEGATIVE_RATE, "higher", 0.9, 0.3, 12, 1e-6)
    for seed in range(5):
        episodes = make_episodes(seed, n=300)
        assert distill(episodes, [ExistingClaim("x", claim, 0.5)], CFG, strategy=None) == []


def test_a_refined_window_edits_the_stored_claim() -> None:
    """A stored 01:00–05:00 claim meets the sharper 02:00–04:00 finding: EDIT, not ADD."""
    episodes = make_episodes(13, cheap_gas=True)
    wide = Claim({"hour_window": [1, 5]}, "metric:gas_gwei", "lower", 12.0, 22.0, 300, 1e-9)
    ops = distill(episodes, [ExistingClaim("g1", wide, 0.6)], CFG, strategy=None)
    op = only(ops, target_entry_id="g1")
    assert op.op is OpKind.EDIT
    assert op.claim.condition == {"hour_window": [2, 4]}
    assert "between 02:00 and 04:00 UTC" in op.content


def test_a_moved_effect_edits_and_a_stable_one_upvotes() -> None:
    episodes = make_episodes(14, cheap_gas=True)
    first = only(distill(episodes, [], CFG, strategy=None), category=Category.INSIGHT)
    stale = dataclasses.replace(first.claim, effect=16.0)  # the gap was a third of today's
    close = dataclasses.replace(first.claim, effect=first.claim.effect * 1.05)
    edited = distill(episodes, [ExistingClaim("old", stale, 0.5)], CFG, strategy=None)
    assert only(edited, target_entry_id="old").op is OpKind.EDIT
    upvoted = distill(episodes, [ExistingClaim("old", close, 0.5)], CFG, strategy=None)
    assert only(upvoted, target_entry_id="old").op is OpKind.UPVOTE


def test_a_stored_claim_in_an_unknown_vocabulary_is_left_alone() -> None:
    claim = Claim({"moon_phase": "full"}, "metric:gas_gwei", "lower", 5.0, 22.0, 40, 1e-9)
    assert distill(make_episodes(15), [ExistingClaim("m", claim, 0.5)], CFG, strategy=None) == []
