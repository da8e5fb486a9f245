"""Atomic replacement of PLAYBOOK.md on disk.

Owns the one file write of the playbook package: a reader (the owner, the
agent, an editor) sees either the whole old file or the whole new one, never
a torn mix, and a crash or power loss at any point leaves one of the two. It
must not decide what the text is (``compiler`` does) and reads no clock.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from grimoire.errors import StoreError, ValidationError

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably.

    Steps: encode first (bad text fails before anything is touched); write a
    temporary file in the same directory; fsync it; ``os.replace`` it over
    ``path``; fsync the directory so the rename itself survives a power loss.
    On any failure before the rename, the temporary file is removed and the
    old file is left exactly as it was. An existing file keeps its permission
    bits; a new one is created owner-only (0600), like the rest of the data dir.
    OS errors are raised as ``StoreError``.
    """
    path = Path(path)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"is not valid Unicode text: {exc.reason}", field="text") from exc
    directory = path.parent
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o600
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StoreError(f"cannot create a temporary file in {directory}: {exc.strerror}") from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        # Whatever interrupted us (OSError, KeyboardInterrupt), the old file is
        # untouched; only our temporary file needs cleaning up.
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise StoreError(f"cannot open {directory} to sync it: {exc.strerror}") from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise StoreError(f"cannot sync {directory}: {exc.strerror}") from exc
    finally:
        os.close(fd)
