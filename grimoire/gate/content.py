"""Refusing contentless text at the admission gate (issue 11).

A knowledge entry must state something: "ok", "gas high" or "!!!" is a word
or two with no claim, and once admitted it would be listed in PLAYBOOK.md as
if it were knowledge. The rule is structural, not a word list: the text must
hold at least ``MIN_WORDS`` words (runs of two or more letters: numbers alone say
nothing, "1 2 3" is not a claim). Pure: text in,
a reason or None out.
"""

from __future__ import annotations

import re

from grimoire.errors import ValidationError

__all__ = ["MIN_WORDS", "contentless_reason", "require_content"]

MIN_WORDS = 3
_WORD = re.compile(r"[^\W\d_]{2,}")


def contentless_reason(text: str) -> str | None:
    """Why ``text`` states no claim (fewer than ``MIN_WORDS`` words), else None."""
    words = _WORD.findall(text)
    if len(words) >= MIN_WORDS:
        return None
    return (f"states no claim: {len(words)} word{'s' * (len(words) != 1)}; write what holds, "
            f"when and why (at least {MIN_WORDS} words, e.g. 'avoid swaps when gas is above "
            "50 gwei')")


def require_content(text: str, field: str = "content") -> None:
    """Raise ValidationError naming ``field`` when ``text`` states no claim."""
    reason = contentless_reason(text)
    if reason is not None:
        raise ValidationError(reason, field=field)
