"""Manifests: the sha256 and size of every file of a backup or bundle, written last.

A directory whose manifest is missing (a copy cut short), lists a file that is
absent, or has a file whose hash or size differs, or a file the manifest does
not list, is refused as a whole: ``verify`` raises ``ValidationError`` naming the
first problem and reads nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from grimoire.errors import ValidationError

__all__ = ["MANIFEST", "file_table", "fsync_tree", "read_manifest", "sha256_file", "verify",
           "write_json_atomic"]

MANIFEST = "manifest.json"
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def file_table(root: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {sha256, bytes}}`` for every file under ``root`` but the manifest."""
    return {
        p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for p in _files(root)
    }


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (and ``root`` itself)."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_manifest(root: Path, kind: str, max_version: int) -> dict[str, Any]:
    """The manifest of ``root``, checked for its kind and format version (not the files)."""
    path = root / MANIFEST
    if not root.is_dir():
        raise ValidationError(f"{root} is not a directory", field="path")
    if not path.exists():
        raise ValidationError(f"{root} has no {MANIFEST}: an incomplete or foreign copy, "
                              "refused", field="manifest")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path} is not readable JSON: {exc}", field="manifest") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != kind:
        raise ValidationError(f"{path} is not a {kind} manifest", field="manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= max_version:
        raise ValidationError(f"{path} has format_version {version!r}; this Grimoire reads "
                              f"1..{max_version}: upgrade it", field="manifest")
    if not isinstance(manifest.get("files"), dict):
        raise ValidationError(f"{path} lists no files", field="manifest")
    return manifest


def verify(root: Path, manifest: dict[str, Any]) -> None:
    """Every listed file present with its size and sha256, and no unlisted file."""
    listed: dict[str, Any] = manifest["files"]
    present = {p.relative_to(root).as_posix() for p in _files(root)}
    missing = sorted(set(listed) - present)
    if missing:
        raise ValidationError(f"{root} is partial: {len(missing)} file(s) of the manifest are "
                              f"missing, first {missing[0]}", field="manifest")
    extra = sorted(present - set(listed))
    if extra:
        raise ValidationError(f"{root} holds {len(extra)} file(s) the manifest does not list, "
                              f"first {extra[0]}", field="manifest")
    for rel, want in sorted(listed.items()):
        path = root / rel
        if not isinstance(want, dict):
            raise ValidationError(f"manifest entry for {rel} is malformed", field="manifest")
        if path.stat().st_size != want.get("bytes"):
            raise ValidationError(f"{rel}: {path.stat().st_size} bytes, the manifest says "
                                  f"{want.get('bytes')} (truncated or changed)", field="manifest")
        if sha256_file(path) != want.get("sha256"):
            raise ValidationError(f"{rel}: sha256 differs from the manifest (changed or "
                                  "corrupt), refused", field="manifest")
