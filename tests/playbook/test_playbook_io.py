"""Atomic PLAYBOOK.md replacement: a failed write leaves the old file, never a torn one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import playbook.io as pio
from grimoire.errors import StoreError, ValidationError
from playbook import write_atomic


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "PLAYBOOK.md")


def test_writes_a_new_file_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "PLAYBOOK.md"
    write_atomic(path, "# new ✓\n")
    assert path.read_text(encoding="utf-8") == "# new ✓\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_replaces_an_existing_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "PLAYBOOK.md"
    path.write_text("old\n", encoding="utf-8")
    path.chmod(0o640)
    write_atomic(path, "new\n")
    assert path.read_text(encoding="utf-8") == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_failure_before_replace_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsync of the temporary file fails (a full disk, an I/O error): nothing changes."""
    path = tmp_path / "PLAYBOOK.md"
    path.write_text("old\n", encoding="utf-8")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(pio.os, "fsync", failing_fsync)
    with pytest.raises(StoreError, match="cannot write"):
        write_atomic(path, "new\n")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert leftovers(tmp_path) == []


def test_interrupt_during_replace_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "PLAYBOOK.md"
    path.write_text("old\n", encoding="utf-8")

    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new\n")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert leftovers(tmp_path) == []


def test_text_that_cannot_be_encoded_is_refused_before_touching_disk(tmp_path: Path) -> None:
    path = tmp_path / "PLAYBOOK.md"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        write_atomic(path, "bad \ud800 surrogate")
    assert info.value.field == "text"
    assert path.read_text(encoding="utf-8") == "old\n"
    assert leftovers(tmp_path) == []


def test_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        write_atomic(tmp_path / "nope" / "PLAYBOOK.md", "x\n")


def test_readers_see_old_or_new_never_partial(tmp_path: Path) -> None:
    """Many rewrites of different lengths: every read sees one whole version."""
    path = tmp_path / "PLAYBOOK.md"
    versions = {f"v{i}\n" * (i + 1) for i in range(30)}
    write_atomic(path, "v0\n")
    fd = os.open(path, os.O_RDONLY)  # a reader holding the old file keeps the old bytes
    try:
        for text in sorted(versions):
            write_atomic(path, text)
            assert path.read_text(encoding="utf-8") in versions
        assert os.read(fd, 100) == b"v0\n"
    finally:
        os.close(fd)
