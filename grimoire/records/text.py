"""Text fields must be Unicode text: no unpaired surrogate (JSON lets ``"\\ud800"`` through)."""

from __future__ import annotations

from grimoire.errors import ValidationError

__all__ = ["require_unicode"]


def require_unicode(value: str, field: str) -> str:
    """``value`` unchanged, or a ValidationError naming the field and the position of the
    first lone surrogate (it cannot be stored as UTF-8, embedded or returned)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise ValidationError(
            f"holds an unpaired surrogate U+{ord(bad):04X} at character {exc.start}: not valid "
            "Unicode text (send UTF-8, or escape a character outside the BMP as a surrogate "
            "pair)", field=field) from None
    return value
