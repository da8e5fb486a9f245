"""Scope names and where each scope lives on disk.

A scope name is a safe identifier, never a path: lower-case letters, digits, ``_`` and
``-``, starting with a letter or digit, at most 64 characters. ``default`` is the data
directory itself; any other name lives in ``DATA/scopes/NAME/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from grimoire.errors import NotFoundError, ValidationError

__all__ = ["DEFAULT_SCOPE", "SCOPES_DIR", "SCOPE_CHANGES", "check_scope", "scope_config",
           "scope_dir", "scopes_on_disk"]

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


#: What a scope's config changes beside its data directory (``registry``, ``scope_config``):
#: its PLAYBOOK.md is its own, and only the default scope exchanges with a Clade.
SCOPE_CHANGES = {"playbook.path": None, "clade.uri": None}


def scope_config(config: Any, scope: str | None) -> Any:
    """``config`` (a ``Config``) pointed at ``scope``'s directory, for a command that acts
    on the stores of one data directory (``grimoire check --scope NAME``): the name checked
    (``check_scope``), and a NotFoundError for a scope the directory does not hold."""
    name = check_scope(scope)
    if name == DEFAULT_SCOPE:
        return config
    where = scope_dir(Path(config.data_dir), name)
    if not (where / "semantic.sqlite").is_file():
        raise NotFoundError(f"scope {name!r} holds nothing yet (no {where}); scopes on disk: "
                            f"{', '.join(scopes_on_disk(Path(config.data_dir)))} (a scope is "
                            "made by its first write)")
    return config.replace(data_dir=str(where), **SCOPE_CHANGES)
