"""Token budget: in order, skip what does not fit, never empty when there is evidence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.errors import ValidationError
from grimoire.retrieval.budget import ELLIPSIS, fit, truncate
from tests.retrieval.retrieval_support import make_candidate


def words(text: str) -> int:
    """A stand-in tokenizer: one token per word (the ellipsis counts as one)."""
    return len(text.split())


def text(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def same(item: str) -> str:
    return item


def test_items_fit_in_order_until_the_budget_is_spent() -> None:
    items = [text(3, "a"), text(4, "b"), text(2, "c")]
    out = fit(items, 7, words, same)
    assert [f.item for f in out] == items[:2]
    assert [f.tokens for f in out] == [3, 4] and not any(f.truncated for f in out)


def test_an_item_that_does_not_fit_is_skipped_and_smaller_ones_still_fill() -> None:
    """More entries at shorter length: the 8-word item is skipped, the 2-word one taken."""
    items = [text(3, "a"), text(8, "b"), text(2, "c")]
    out = fit(items, 6, words, same)
    assert [f.item for f in out] == [items[0], items[2]]


def test_nothing_fits_returns_the_first_item_truncated() -> None:
    items = [text(50, "a"), text(40, "b")]
    (only,) = fit(items, 10, words, same)
    assert only.item == items[0] and only.truncated
    assert only.text == text(9, "a") + ELLIPSIS and only.tokens == 10


def test_default_text_reads_strings_and_candidate_content() -> None:
    assert [f.text for f in fit(["one two"], 5, words)] == ["one two"]
    (fitted,) = fit([make_candidate("a", content="three small words")], 5, words)
    assert fitted.text == "three small words" and fitted.tokens == 3


def test_empty_input_and_bad_budget() -> None:
    assert fit([], 10, words, same) == []
    with pytest.raises(ValidationError, match="max_tokens"):
        fit(["a"], 0, words, same)


def test_truncate_keeps_text_that_fits_and_single_overlong_words() -> None:
    assert truncate("short text", 5, words) == "short text"
    assert truncate(text(20), 5, words) == text(4) + ELLIPSIS
    assert truncate("supercalifragilistic", 0, words) == "supercalifragilistic"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 30), max_size=12), st.integers(1, 60))
def test_budget_properties(lengths: list[int], budget: int) -> None:
    """Order kept; total within budget; never empty when there are items."""
    items = [text(n, f"i{k}_") for k, n in enumerate(lengths)]
    out = fit(items, budget, words, same)
    positions = [items.index(f.item) for f in out]
    assert positions == sorted(positions)
    assert sum(f.tokens for f in out) <= budget
    assert bool(out) == bool(items)
