"""A backup of the data directory carries every scope (``DATA/scopes/NAME``).

``grimoire backup`` copies the default scope's stores its own way (SQLite's online
backup, LMDB's copy, LanceDB's rows); each other scope is a data directory of the same
shape, backed up by the same function into ``DEST/scopes/NAME`` before the backup's
manifest is written, so the manifest's file table (sizes and hashes) covers every scope
and ``restore`` (a verified copy of the whole tree) brings them all back. The scope's own
manifest is dropped: the outer one vouches for its files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from grimoire.portable.manifest import MANIFEST
from grimoire.scopes.names import SCOPES_DIR, scope_dir, scopes_on_disk

__all__ = ["backup_scopes"]


def backup_scopes(root: Path, dest: Path, backup: Callable[..., dict[str, Any]]
                  ) -> dict[str, Any]:
    """Back up each scope of ``root`` into ``dest/scopes/NAME``; their stores' counts."""
    out: dict[str, Any] = {}
    for name in scopes_on_disk(root)[1:]:
        target = dest / SCOPES_DIR / name
        target.parent.mkdir(mode=0o700, exist_ok=True)
        made = backup(scope_dir(root, name), target)
        (target / MANIFEST).unlink()
        out[name] = made["stores"]
    return out


def apply_scope_tombstones(g: Any, source: Path, scopes: dict[str, Any]) -> dict[str, Any]:
    """After a restore into ``g``'s directory: each restored scope gets the forgets its
    source scope (``source/scopes/NAME``) wrote since that scope's backup began."""
    from grimoire.forget import apply_tombstones
    from grimoire.forget.tombstones import TOMBSTONES
    from grimoire.scopes.registry import registry

    out: dict[str, Any] = {}
    for name, stores in sorted(scopes.items()):
        origin = scope_dir(source, name)
        if (origin / TOMBSTONES).is_file():
            began = int((stores or {}).get("began_at_ms", 0))
            out[name] = apply_tombstones(registry(g).get(name).context, origin, since_ms=began)
    return out
