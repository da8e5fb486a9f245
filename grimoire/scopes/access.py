"""Which socket peer may use which scope: ``access.scopes`` maps a uid to its scopes.

The socket server reads each connection's peer uid from the kernel (SO_PEERCRED: the
peer cannot choose it) and asks this policy twice: at connect, whether the uid may
connect at all (``admits``), and on each request, whether it may use the scope the
request names (``check``; no ``scope`` is the default scope). The rules:

- an empty ``access.scopes`` (the default) is today's rule: only the daemon's own uid
  connects, and it may use every scope;
- a listed uid may use the scopes listed for it (``*``: every scope); a uid not listed
  is refused at connect;
- the daemon's own uid, when not listed, keeps every scope (list it to restrict it).

``health`` without a scope answers any admitted peer (liveness: version, tick, uptime);
with one it is checked like every other method. A refusal is a ``ScopeDeniedError``
(JSON-RPC code -32060, ``data.type`` "ScopeDeniedError") naming the uid, the scope and
the scopes the uid may use, and is logged (``scope.denied``, warning).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grimoire.errors import ConfigError, ScopeDeniedError, ValidationError
from grimoire.logs import get_logger
from grimoire.scopes.names import check_scope

__all__ = ["ALL", "Access", "check_access"]

log = get_logger(__name__)

ALL = "*"


class Access:
    """The uid → scopes policy of one daemon."""

    def __init__(self, grants: Mapping[str, Sequence[str]] | None = None,
                 owner_uid: int | None = None) -> None:
        self.owner_uid = os.getuid() if owner_uid is None else owner_uid
        self.grants: dict[int, frozenset[str]] = {}
        for key, names in (grants or {}).items():
            if not str(key).isdigit():
                raise ConfigError(f"access.scopes: {key!r} is not a uid (a number, e.g. 1001)")
            if isinstance(names, str) or not isinstance(names, Sequence):
                raise ConfigError(f"access.scopes.{key}: expected a list of scopes")
            checked = set()
            for name in names:
                if name != ALL:
                    try:
                        name = check_scope(name)
                    except ValidationError as exc:
                        raise ConfigError(f"access.scopes.{key}: {exc}") from None
                checked.add(name)
            self.grants[int(key)] = frozenset(checked)
        self.grants.setdefault(self.owner_uid, frozenset({ALL}))

    @property
    def shared(self) -> bool:
        """Another uid than the daemon's own is granted a scope."""
        return any(uid != self.owner_uid for uid in self.grants)

    def admits(self, uid: int | None) -> bool:
        return uid is not None and uid in self.grants

    def allowed(self, uid: int | None) -> list[str]:
        return sorted(self.grants.get(uid, frozenset())) if uid is not None else []

    def check(self, uid: int | None, method: str, params: Mapping[str, Any]) -> None:
        """Raise ScopeDeniedError (logged) unless ``uid`` may call ``method`` in its scope."""
        given = params.get("scope")
        if method == "health" and given is None:
            return
        scope = check_scope(given)
        granted = self.grants.get(uid, frozenset()) if uid is not None else frozenset()
        if ALL in granted or scope in granted:
            return
        log.warning("scope.denied", uid=uid, scope=scope, method=method,
                    allowed=sorted(granted))
        may = ", ".join(sorted(granted)) or "none"
        raise ScopeDeniedError(f"uid {uid} may not use scope {scope!r} ({method}); its "
                               f"scopes: {may} (access.scopes in the daemon's config)")


def check_access(grants: Mapping[str, Sequence[str]], socket: Path, data_dir: Path) -> Access:
    """The daemon's policy, checked before anything is created: a bad grant, or other uids
    granted while the socket sits in the (owner-only) data directory, is a ConfigError."""
    access = Access(grants)
    if access.shared and socket.parent.resolve() == data_dir.resolve():
        raise ConfigError("access.scopes grants other uids, so they must reach the socket, "
                          f"but it is in the data directory {data_dir}, which stays "
                          "owner-only: set socket_path to a directory of its own (e.g. "
                          "/run/grimoire/grimoire.sock)")
    return access
