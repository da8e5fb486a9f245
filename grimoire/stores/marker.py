"""``FEED.json``: whether a data directory holds simulated or real memory.

The first daemon started on a directory writes it (``grimoire.service.datadir``); a
restored backup and an import into a fresh directory carry it over
(``grimoire.portable``). Everything that shows the memory to a person reads it here:
``status``, PLAYBOOK.md and the report say when the memory is simulated, and print its
times as simulated time. Reading it never creates or changes anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grimoire.errors import ConfigError

__all__ = ["KINDS", "MARKER", "is_simulated", "read_marker"]

MARKER = "FEED.json"
KINDS = ("simulated", "real")


def read_marker(data_dir: Path) -> dict[str, Any] | None:
    """The directory's record (``kind``, ``feed``, ``since``…), None when it has none."""
    path = Path(data_dir) / MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}): it says whether this data "
                          "directory holds simulated or real memory; restore or delete it"
                          ) from exc
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        raise ConfigError(f"{path} does not say kind: simulated or real; restore or delete it")
    return data


def is_simulated(data_dir: Path) -> bool:
    found = read_marker(data_dir)
    return found is not None and found["kind"] == "simulated"
