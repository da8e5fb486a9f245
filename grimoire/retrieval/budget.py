"""The token budget of a retrieve (SPEC §9.6, default 500 tokens).

Choice: items are taken in rank order; an item that does not fit in what is
left of the budget is skipped and the walk goes on, so shorter lower-ranked
items can still fill the space (seed 004: "more entries at shorter length >
fewer at full length"). Items are not cut to squeeze in, because a
truncated episode loses its end (usually the outcome) and reads as
something it was not.

The one exception: if not a single item fits, the first (best) item is
returned truncated to the budget at a word boundary and marked
``truncated``, so that a retrieve with evidence never comes back empty.

Tokens are counted on each item's text only (the caller's formatting is not
charged). Owns: which items fit. Must not reorder items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from grimoire.errors import ValidationError

__all__ = ["ELLIPSIS", "Fitted", "fit", "truncate"]

T = TypeVar("T")
ELLIPSIS = " …"


@dataclass(frozen=True, slots=True)
class Fitted(Generic[T]):
    """An item that made the budget: its text (possibly truncated) and its token count."""

    item: T
    text: str
    tokens: int
    truncated: bool = False


def truncate(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The longest word prefix of ``text`` (plus " …") that counts at most ``max_tokens``.

    Binary search over the number of words: O(log n) calls to
    ``count_tokens``. If even one word is over the budget, that word alone
    is returned (a budget below one word cannot be honoured).
    """
    if count_tokens(text) <= max_tokens:
        return text
    words = text.split()
    low, high = 1, max(1, len(words) - 1)
    best = words[0] + ELLIPSIS if words else ""
    if words and count_tokens(best) > max_tokens:
        return words[0]
    while low <= high:
        middle = (low + high) // 2
        candidate = " ".join(words[:middle]) + ELLIPSIS
        if count_tokens(candidate) <= max_tokens:
            best = candidate
            low = middle + 1
        else:
            high = middle - 1
    return best


def _content(item: object) -> str:
    return item if isinstance(item, str) else str(getattr(item, "content"))  # noqa: B009


def fit(
    items: Sequence[T],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    text_of: Callable[[T], str] | None = None,
) -> list[Fitted[T]]:
    """The items, in order, whose texts fit ``max_tokens`` together (see the module rules).

    ``text_of`` gives an item's text; by default a string is its own text and
    anything else (a ``Candidate``) is read through its ``content``.
    """
    text_of = text_of or _content
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValidationError(f"must be an integer >= 1, got {max_tokens!r}", field="max_tokens")
    left = max_tokens
    out: list[Fitted[T]] = []
    for item in items:
        text = text_of(item)
        tokens = count_tokens(text)
        if tokens <= left:
            out.append(Fitted(item, text, tokens))
            left -= tokens
            if left == 0:
                break
    if not out and items:
        first = items[0]
        text = truncate(text_of(first), max_tokens, count_tokens)
        out.append(Fitted(first, text, count_tokens(text), truncated=True))
    return out
