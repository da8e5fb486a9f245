"""Scope names and where each scope lives on disk.

A scope name is a safe identifier, never a path: lower-case letters, digits, ``_`` and
``-``, starting with a letter or digit, at most 64 characters. ``default`` is the data
directory itself; any other name lives in ``DATA/scopes/NAME/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from grimoire.errors import ValidationError

__all__ = ["DEFAULT_SCOPE", "SCOPES_DIR", "check_scope", "scope_dir", "scopes_on_disk"]

DEFAULT_SCOPE = "default"
SCOPES_DIR = "scopes"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def check_scope(scope: Any) -> str:
    """The scope name to use (``None`` → the default one), or a ValidationError naming it."""
    if scope is None:
        return DEFAULT_SCOPE
    if not isinstance(scope, str) or _NAME.fullmatch(scope) is None:
        raise ValidationError(
            f"bad scope {scope!r}: a scope is a name of lower-case letters, digits, '_' and "
            "'-' (at most 64, starting with a letter or digit), e.g. 'agent', 'user-42', "
            "'project_x'; never a path", field="scope")
    return scope


def scope_dir(data_dir: Path, scope: str) -> Path:
    """Where ``scope``'s stores live under the data directory."""
    name = check_scope(scope)
    return Path(data_dir) if name == DEFAULT_SCOPE else Path(data_dir) / SCOPES_DIR / name


def scopes_on_disk(data_dir: Path) -> list[str]:
    """The scopes the data directory holds: ``default`` first, then each scope with stores."""
    found = [DEFAULT_SCOPE]
    parent = Path(data_dir) / SCOPES_DIR
    if parent.is_dir():
        found += sorted(p.name for p in parent.iterdir()
                        if p.is_dir() and _NAME.fullmatch(p.name) and p.name != DEFAULT_SCOPE
                        and (p / "semantic.sqlite").is_file())
    return found
