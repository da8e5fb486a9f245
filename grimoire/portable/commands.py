"""The CLI subcommands of this package: ``mcp``, ``backup``, ``restore``, ``export``, ``import``,
``clade``. ``grimoire.cli`` registers them with ``add_commands`` and hands a parsed
command to ``run_command``; the logic lives in the modules of this package.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from grimoire.config import Config

__all__ = ["COMMANDS", "add_commands", "run_command"]

COMMANDS = ("backup", "restore")


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add this package's subcommands to the ``grimoire`` parser's subparsers."""
    p = sub.add_parser("backup", help="consistent snapshot of a data directory (live)",
                       description="Snapshot every store while the daemon runs; writes "
                       "DEST with a manifest of versions, row counts and sha256.")
    common(p)
    p.add_argument("dest", help="new directory for the backup")
    p = sub.add_parser("restore", help="restore a verified backup into an empty directory",
                       description="Verify SRC's manifest (refuses a mismatch or a partial "
                       "copy), then copy it to DIR.")
    p.add_argument("src", help="backup directory")
    p.add_argument("dir", help="data directory to create (absent or empty)")
    p.add_argument("--json", action="store_true", help="print raw JSON")


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def run_command(args: argparse.Namespace, load: Callable[[argparse.Namespace], Config]) -> int:
    """Run one of ``COMMANDS``; returns the exit code (errors propagate to ``cli.main``)."""
    c = args.command
    if c == "restore":
        from grimoire.portable.backup import restore

        _print(restore(args.src, args.dir))
        return 0
    config = load(args)
    if c == "backup":
        from grimoire.portable.backup import backup

        _print(backup(config.data_dir, args.dest, config_file=getattr(args, "config", None),
                      playbook=config.playbook_path))
        return 0
    print(f"grimoire: unknown command {c}", file=sys.stderr)
    return 2
