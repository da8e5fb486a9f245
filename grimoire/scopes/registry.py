"""The scopes of one open Grimoire: each opened on first use, closed with it.

A scope other than ``default`` is a whole Grimoire over ``DATA/scopes/NAME/`` opened with
the default one's clock, embedding model and LLM (the model is loaded once, whatever the
number of scopes) and the same configuration but for where it lives: its PLAYBOOK.md is
its own (``playbook.path`` is not shared) and it never exchanges with the Clade on its own
(``clade.uri`` stays the default scope's: one scope's knowledge must not reach a shared
table that others pull from). A writable open creates the scope's directory (owner-only)
and carries the data directory's FEED.json into it; a read-only open of a scope that was
never written is a NotFoundError. The registry lives in the default scope's context
(``ctx.extras[REGISTRY_KEY]``), and every scope's context points at it.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from grimoire.context import Context
from grimoire.errors import ConfigError, NotFoundError
from grimoire.logs import get_logger
from grimoire.scopes.names import (
    DEFAULT_SCOPE,
    SCOPE_CHANGES,
    check_scope,
    scope_dir,
    scopes_on_disk,
)
from grimoire.stores.marker import MARKER

__all__ = ["REGISTRY_KEY", "SCOPE_KEY", "Scopes", "close_scopes", "registry", "scope_of"]

log = get_logger(__name__)

REGISTRY_KEY = "scopes.registry"
SCOPE_KEY = "scopes.name"
#: The facade's ``Grimoire`` (not imported here: the facade imports this package).
Grimoire = Any

# What a scope shares with the default scope's context when it opens (the daemon's
# learning thread, so its distillations and cycles run there too; the daemon's status).
_SHARED_EXTRAS = ("curator.background", "daemon_status")


def scope_of(ctx: Context) -> str:
    """The scope a context serves."""
    name = ctx.extras.get(SCOPE_KEY, DEFAULT_SCOPE)
    return str(name)


class Scopes:
    """The default scope's Grimoire and the other scopes opened so far."""

    def __init__(self, root: Grimoire) -> None:
        self.root = root
        self._open: dict[str, Grimoire] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, scope: str | None) -> Grimoire:
        """The Grimoire serving ``scope`` (opening it on first use)."""
        name = check_scope(scope)
        if name == DEFAULT_SCOPE:
            return self.root
        found = self._open.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._open.get(name)
            if found is None:
                found = self._open_scope(name)
                self._open[name] = found
        return found

    def opened(self) -> dict[str, Grimoire]:
        """The scopes open now (the default one excluded)."""
        return dict(self._open)

    def names(self) -> list[str]:
        """Every scope on disk or open, ``default`` first."""
        ctx = self.root.context
        return [DEFAULT_SCOPE, *sorted(set(scopes_on_disk(ctx.data_dir)[1:]) | set(self._open))]

    def _open_scope(self, name: str) -> Grimoire:
        if self._closed:
            raise NotFoundError(f"scope {name!r}: this Grimoire is closed")
        ctx = self.root.context
        where = scope_dir(ctx.data_dir, name)
        if self.root.read_only:
            if not (where / "semantic.sqlite").is_file():
                raise NotFoundError(f"scope {name!r} holds nothing yet (no {where}); scopes "
                                    f"on disk: {', '.join(scopes_on_disk(ctx.data_dir))}")
        else:
            _owner_only_dir(where.parent)
            _owner_only_dir(where)
            marker = ctx.data_dir / MARKER
            if marker.is_file() and not (where / MARKER).exists():
                shutil.copy2(marker, where / MARKER)  # simulated or real, as the directory
        config = ctx.config.replace(data_dir=str(where), **SCOPE_CHANGES)
        opened = type(self.root).open(config=config, clock=ctx.clock, embedder=ctx.embedder,
                               llm=ctx.extras.get("llm"), read_only=self.root.read_only)
        child = opened.context
        child.extras[SCOPE_KEY] = name
        child.extras[REGISTRY_KEY] = self
        child.events.simulated = ctx.events.simulated
        for key in _SHARED_EXTRAS:
            if key in ctx.extras:
                child.extras[key] = ctx.extras[key]
        log.info("scope.opened", scope=name, data_dir=str(where),
                 read_only=self.root.read_only)
        return opened

    def share(self, key: str, value: Any) -> None:
        """Set ``ctx.extras[key]`` in every scope, open now or later (the daemon's executor)."""
        self.root.context.extras[key] = value
        for g in self.opened().values():
            g.context.extras[key] = value

    def close(self) -> list[BaseException]:
        """Close every scope but the default one; the errors, to raise after the default's."""
        with self._lock:
            self._closed = True
            scopes, self._open = self._open, {}
        errors: list[BaseException] = []
        for g in scopes.values():
            try:
                g.close()
            except Exception as exc:  # keep closing the others
                errors.append(exc)
        return errors


def _owner_only_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the scope directory {path} ({exc.strerror})"
                          ) from None


def registry(g: Grimoire) -> Scopes:
    """The registry of ``g``'s scopes (made on first use, in the default scope's context)."""
    ctx = g.context
    found = ctx.extras.get(REGISTRY_KEY)
    if found is None:
        with ctx.state_lock:
            found = ctx.extras.get(REGISTRY_KEY)
            if found is None:
                found = ctx.extras[REGISTRY_KEY] = Scopes(g)
    assert isinstance(found, Scopes)
    return found


def close_scopes(ctx: Context) -> list[BaseException]:
    """Close the scopes a default scope's context opened (nothing for a scope's own)."""
    found = ctx.extras.get(REGISTRY_KEY)
    if not isinstance(found, Scopes) or scope_of(ctx) != DEFAULT_SCOPE:
        return []
    return found.close()
