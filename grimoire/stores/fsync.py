"""``fsync_path``: make a file's or a directory's data (a directory: its entries) durable.

The stores' one copy of the open-fsync-close dance, used after a rename or a new file so
that the name survives a power loss as well as the bytes. Must not decide what to sync.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_path"]


def fsync_path(path: str | Path) -> None:
    """fsync ``path`` (a file or a directory), raising OSError as ``os.fsync`` does."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
