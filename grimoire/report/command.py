"""``grimoire report``: open the data directory, collect, write the HTML file."""

from __future__ import annotations

from pathlib import Path

from grimoire.config import Config
from grimoire.errors import ConfigError
from grimoire.report.data import collect
from grimoire.report.page import write_report

__all__ = ["make_report"]


def make_report(config: Config, out: Path) -> tuple[Path, int]:
    """Write the report of ``config.data_dir`` to ``out``; returns the path and its bytes.

    The data directory must exist (a report never creates an empty store). It is opened
    read-only, so a running daemon keeps serving while the report reads (episodes as of
    the open, the rest as last committed)."""
    from grimoire.grimoire import Grimoire

    root = Path(config.data_dir)
    if not (root / "semantic.sqlite").exists() and not (root / "episodes").exists():
        raise ConfigError(f"{root} holds no Grimoire data (no semantic.sqlite, no episodes/): "
                          "pass the data directory of a store with --data")
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory: name the HTML file to write")
    with Grimoire.open(config=config, read_only=True) as g:
        data = collect(g.context)
    return out, write_report(data, out)
