"""What every command shares: the common options, the config, printing."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from grimoire.config import Config, load_config
from grimoire.errors import ValidationError

__all__ = ["common", "emit", "load", "on_scope_dir", "refuse_unscoped", "scoped"]

H = TypeVar("H", bound=Callable[..., Any])


def common(p: argparse.ArgumentParser, json_help: str = "print the machine form (JSON)"
           ) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML config file (also GRIMOIRE_CONFIG)")
    p.add_argument("--data", metavar="DIR", help="data directory (overrides data_dir)")
    p.add_argument("--socket", metavar="PATH", help="daemon socket (overrides socket_path)")
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--scope", metavar="NAME",
                   help="the scope (an agent's, a user's or a project's memory) a command that "
                   "reads or writes memory uses; default: the default scope (README: Scopes)")


def scoped(handler: H) -> H:
    """Mark a command handler as one that passes ``--scope`` on to the method it calls."""
    setattr(handler, "takes_scope", True)  # noqa: B010 - a function's attribute
    return handler


def on_scope_dir(p: argparse.ArgumentParser) -> None:
    """Mark a command that acts on the stores of one data directory (``check``, ``export``,
    ...): ``--scope NAME`` points it at that scope's directory (``load``)."""
    p.set_defaults(takes_scope=True, scope_dir=True)


def refuse_unscoped(args: argparse.Namespace) -> None:
    """``--scope`` on a command that acts on the whole data directory is an error, never
    ignored (``cli.app.main`` asks before it runs the command)."""
    takes_scope = getattr(args, "takes_scope", False) or getattr(
        getattr(args, "handler", None), "takes_scope", False)
    if getattr(args, "scope", None) is not None and not takes_scope:
        raise ValidationError(f"--scope: `grimoire {args.command}` acts on the whole data "
                              "directory (every scope), not on one scope", field="scope")


def load(args: argparse.Namespace, **extra: Any) -> Config:
    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "data", None):
        overrides["data_dir"] = args.data
    if getattr(args, "socket", None):
        overrides["socket_path"] = args.socket
    path = getattr(args, "config", None) or os.environ.get("GRIMOIRE_CONFIG")
    config = load_config(path, env=os.environ, overrides=overrides)
    if getattr(args, "scope_dir", False) and getattr(args, "scope", None) is not None:
        from grimoire.scopes.names import scope_config

        config = scope_config(config, args.scope)
    return config


def emit(text: str) -> None:
    """Print text as is (non-ASCII included, whatever the locale says)."""
    out = sys.stdout
    if hasattr(out, "reconfigure") and (out.encoding or "").lower() not in ("utf-8", "utf8"):
        out.reconfigure(encoding="utf-8", errors="replace")
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
