"""What every command shares: the common options, the config, printing."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from grimoire.config import Config, load_config

__all__ = ["common", "emit", "load"]


def common(p: argparse.ArgumentParser, json_help: str = "print the machine form (JSON)"
           ) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML config file (also GRIMOIRE_CONFIG)")
    p.add_argument("--data", metavar="DIR", help="data directory (overrides data_dir)")
    p.add_argument("--socket", metavar="PATH", help="daemon socket (overrides socket_path)")
    p.add_argument("--json", action="store_true", help=json_help)


def load(args: argparse.Namespace, **extra: Any) -> Config:
    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "data", None):
        overrides["data_dir"] = args.data
    if getattr(args, "socket", None):
        overrides["socket_path"] = args.socket
    path = getattr(args, "config", None) or os.environ.get("GRIMOIRE_CONFIG")
    return load_config(path, env=os.environ, overrides=overrides)


def emit(text: str) -> None:
    """Print text as is (non-ASCII included, whatever the locale says)."""
    out = sys.stdout
    if hasattr(out, "reconfigure") and (out.encoding or "").lower() not in ("utf-8", "utf8"):
        out.reconfigure(encoding="utf-8", errors="replace")
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
