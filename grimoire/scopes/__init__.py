"""Scopes: one memory per agent, user or project, each a partition of the data directory.

The default scope is the data directory itself (every store as before); a scope ``NAME``
is a complete Grimoire in ``DATA/scopes/NAME/`` (its own episodes, semantic store, graph,
PLAYBOOK.md and curator cycle), opened lazily beside the default one and sharing its
embedding model, clock and LLM. Isolation is by construction: a read in one scope opens
only that scope's stores, so no filter can be forgotten and no ranking sees another
scope's rows.

Modules: ``names`` (the names and where a scope lives), ``registry`` (opening and closing
the scopes of one open Grimoire), ``route`` (the facade's ``scope=`` parameter: routing and
stamping answers), ``access`` (which socket peer may use which scope), ``ticks`` (each open
scope's heartbeat in the daemon) and ``backup`` (a backup carries every scope).
May import: the context, errors, logs, the stores' marker, the heartbeat (``ticks``) and the
backup's manifest name; never the facade, which imports this package (the registry opens
a scope with the class of the Grimoire it serves).
"""

from grimoire.scopes.names import DEFAULT_SCOPE, check_scope, scope_dir

__all__ = ["DEFAULT_SCOPE", "check_scope", "scope_dir"]
