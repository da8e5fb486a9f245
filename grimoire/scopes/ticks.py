"""Each open scope's heartbeat in the daemon: its own ticks, distillations and curator cycle.

The daemon's tick runs on the default scope with the feed's episodes; then every other
scope open in this daemon gets a tick of its own at the same data time and without feed
episodes (the feed writes to the default scope), so each scope distils and runs its
curator cycle every ``curator.every_ticks`` of its own ticks, on its own episodes, and
compiles its own PLAYBOOK.md. A scope is open once a request named it since the daemon
started. One scope's failing tick is logged and does not stop the others'.
"""

from __future__ import annotations

from typing import Any

from grimoire.logs import get_logger
from grimoire.scopes.registry import REGISTRY_KEY, Scopes
from grimoire.service.heartbeat import run_tick

__all__ = ["tick_scopes"]

log = get_logger(__name__)


def tick_scopes(root: Any, now: int) -> dict[str, Any]:
    """One tick of every open scope but the default one; their summaries by scope."""
    found = root.context.extras.get(REGISTRY_KEY)
    if not isinstance(found, Scopes):
        return {}
    out: dict[str, Any] = {}
    for name, g in sorted(found.opened().items()):
        try:
            out[name] = run_tick(g.context, now=now)
        except Exception as exc:  # the next scope's tick still runs
            log.error("scope.tick.failed", scope=name, error=repr(exc), exc_info=exc)
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out
