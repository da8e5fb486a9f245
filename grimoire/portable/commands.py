"""The CLI subcommands of this package: ``mcp``, ``backup``, ``restore``, ``export``, ``import``,
``clade``, ``reembed``, ``testament``. ``grimoire.cli`` registers them with ``add_commands``
and hands a parsed command to ``run_command``; the logic lives in the modules of this package.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grimoire.config import Config

__all__ = ["COMMANDS", "add_commands", "run_command"]

COMMANDS = ("mcp", "backup", "restore", "export", "import", "clade", "reembed", "testament",
            "check", "repair")


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add this package's subcommands to the ``grimoire`` parser's subparsers."""
    p = sub.add_parser("mcp", help="MCP server over stdio (tools: add_event, query, …)",
                       description="Serve the Model Context Protocol over stdin/stdout, "
                       "bridging every tool to the running daemon's socket; with no daemon "
                       "running, the read tools read DIR read-only and the write tools say to "
                       "start one.")
    common(p)
    p.set_defaults(takes_scope=True)
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
    p.add_argument("--json", action="store_true", help="print the machine form (JSON)")
    p.add_argument("--forgotten-in", metavar="DIR",
                   help="the data directory whose TOMBSTONES.jsonl is applied to the restored "
                   "copy: every forget written since the backup began (default: the "
                   "directory the backup was taken from, when it still exists)")
    p.add_argument("--config", metavar="FILE", help="YAML config to open the restored copy "
                   "with (the embedding model) when tombstones are applied")
    p = sub.add_parser("check", help="find damaged store files (exit 1 names them)",
                       description="Read every store of DIR as an open would, and more: "
                       "SQLite integrity_check, every LanceDB row and data file, every LMDB "
                       "record; each in a child process, so a reader that crashes on a "
                       "damaged file is reported, not fatal. Changes nothing; exit 1 when "
                       "a store is damaged, with the repair to run.")
    common(p)
    p = sub.add_parser("repair", help="a repaired copy: a backup plus every intact store",
                       description="Build a repaired copy of DIR in INTO (new): BACKUP "
                       "restored, every store `grimoire check` finds intact taken from DIR, "
                       "the rows of the newest readable version of a damaged episode table "
                       "added, every write acknowledged since the backup replayed from the "
                       "damaged store's redo copy, and the forgets written since the backup "
                       "applied. DIR is not changed.")
    common(p)
    p.add_argument("--backup", default=None, metavar="BACKUP",
                   help="the newest grimoire backup (without one, a damaged store is "
                   "rebuilt from its redo copy alone, which covers it only if it began "
                   "with the store)")
    p.add_argument("--into", required=True, metavar="INTO", help="new data directory")
    p = sub.add_parser("export", help="write a knowledge bundle (JSONL + manifest)",
                       description="Export entries, causal links, active KG triples and "
                       "PLAYBOOK.md as a versioned bundle directory (reads DIR read-only: a "
                       "running daemon keeps serving).")
    common(p)
    p.add_argument("out", help="new bundle directory")
    p.add_argument("--min-confidence", type=float, default=None,
                   help="entries below this confidence stay home (default 0.3)")
    p = sub.add_parser("import", help="import a bundle through the admission gate",
                       description="Import a bundle: every item through the admission gate "
                       "at the provenance's discounted confidence; importing twice adds "
                       "nothing; a tampered bundle is refused whole. Simulated and real "
                       "memory are not mixed unless asked (--allow-mixed); a fresh DIR "
                       "becomes what the bundle was exported from.")
    common(p)
    p.add_argument("bundle", help="bundle directory")
    p.add_argument("--provenance", required=True, choices=("predecessor", "clade", "lethe"),
                   help="where the bundle comes from")
    p.add_argument("--allow-mixed", action="store_true",
                   help="import a bundle of simulated memory into real memory or the other "
                   "way round (refused otherwise; FEED.json records the mix)")
    p = sub.add_parser("testament", help="the death reflection: a testament a successor "
                       "starts from", description="Run a final curator cycle, then write OUT: "
                       "a verified bundle of the active knowledge, the causal graph with its "
                       "evidence, the lessons (the costliest failures and the warnings they "
                       "produced), the generation and the lifetime's figures. The daemon must "
                       "be stopped (it is the agent's death). A successor starts from it with "
                       "grimoire run --inherit OUT, at generation + 1; the lessons' warnings "
                       "are its bloodstains.")
    common(p)
    p.add_argument("out", help="new testament directory")
    p = sub.add_parser("reembed", help="copy a data directory re-embedded by another model",
                       description="Write OUT: the data directory with every episode and "
                       "entry vector recomputed by MODEL (same dimension); the daemon must "
                       "be stopped. Then point data_dir at OUT and set embedding.model.")
    common(p)
    p.add_argument("out", help="new data directory")
    p.add_argument("--model", required=True,
                   help="the embedding model to move to (e.g. multilingual-e5-small-q4)")
    p = sub.add_parser("clade", help="publish to / pull from a shared Clade table",
                       description="Exchange warnings, active heuristics and validated "
                       "insights through one shared LanceDB table (clade.publish / clade.pull; "
                       "through the daemon when one runs). With clade.uri set, every curator "
                       "cycle does both by itself.")
    clade_sub = p.add_subparsers(dest="clade_command", required=True, metavar="CLADE_COMMAND")
    for name in ("publish", "pull"):
        q = clade_sub.add_parser(name, help=f"clade.{name}", description=f"clade.{name}")
        common(q)
        q.add_argument("uri", help="the shared table's location (path or object-store URI)")
        q.add_argument("--agent", help="this agent's name (default: the data directory's)")
        if name == "pull":
            q.add_argument("--allow-mixed", action="store_true",
                           help="also pull rows published from the other kind of memory "
                           "(simulated vs real) or from none (FEED.json records the mix)")


def _printer(args: argparse.Namespace) -> Callable[[Any], None]:
    """How this command prints its answer: a few lines for a person, JSON with ``--json``."""

    def emit(value: Any) -> None:
        if getattr(args, "json", False):
            print(json.dumps(value, indent=2, default=str))
        else:
            from grimoire.portable.views import render

            print(render(args.command, value))

    return emit


def run_command(args: argparse.Namespace, load: Callable[[argparse.Namespace], Config]) -> int:
    """Run one of ``COMMANDS``; returns the exit code (errors propagate to ``cli.main``)."""
    c = args.command
    _print = _printer(args)
    # Opening stores logs through structlog, whose default prints to stdout: keep stdout
    # for the command's JSON answer and send warnings and errors to stderr.
    import logging

    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
                        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if c == "restore":
        from grimoire.portable.backup import restore

        result = restore(args.src, args.dir)
        result["forgotten"] = _apply_forgotten(args, result)
        _print(result)
        return 0
    config = load(args)
    if c == "check":
        from grimoire.portable.check import check

        found = check(config.data_dir)
        _print(found)
        return 0 if found["ok"] else 1
    if c == "repair":
        from grimoire.portable.check import repair

        if getattr(args, "scope", None) is not None and args.backup is not None:
            from grimoire.errors import ValidationError

            raise ValidationError("--scope with --backup: a backup's copy of a scope has no "
                                  "manifest of its own; restore the whole backup (`grimoire "
                                  "restore`) or repair the scope from its redo copy alone "
                                  "(without --backup)", field="scope")

        repaired = repair(config.data_dir, args.backup, args.into)
        args.dir, args.forgotten_in = args.into, str(config.data_dir)
        repaired["forgotten"] = _apply_forgotten(args, repaired["backup"])
        _print(repaired)
        return 0 if repaired["check"]["ok"] else 1
    if c == "backup":
        import os

        from grimoire.portable.backup import backup

        # A backup is background work beside a daemon that answers the agent: yield the CPU.
        os.nice(10)
        _print(backup(config.data_dir, args.dest, config_file=getattr(args, "config", None),
                      playbook=config.playbook_path))
        return 0
    if c == "reembed":
        from grimoire.models.factory import make_embedder
        from grimoire.portable.reembed import reembed

        e = config.embedding
        embedder = make_embedder(args.model, None, e.dim, e.threads, e.batch_size,
                                 e.max_tokens)
        _print(reembed(config.data_dir, args.out, embedder, config))
        return 0
    if c == "mcp":
        from grimoire.mcp.server import serve

        return serve(config, scope=args.scope)
    from grimoire.portable.session import run_on_store

    if c == "export":
        params: dict[str, Any] = {"out": args.out}
        if args.min_confidence is not None:
            params["min_confidence"] = args.min_confidence
        _print(run_on_store(config, "export", params))
        return 0
    if c == "import":
        _print(run_on_store(config, "import", {"bundle": args.bundle,
                                               "provenance": args.provenance,
                                               "allow_mixed": args.allow_mixed}))
        return 0
    if c == "testament":
        _print(run_on_store(config, "testament", {"out": args.out}))
        return 0
    if c == "clade":
        params = {"uri": args.uri}
        if args.agent:
            params["agent"] = args.agent
        if getattr(args, "allow_mixed", False):
            params["allow_mixed"] = True
        _print(run_on_store(config, f"clade.{args.clade_command}", params))
        return 0
    print(f"grimoire: unknown command {c}", file=sys.stderr)
    return 2


def _apply_forgotten(args: Any, restored: dict[str, Any]) -> dict[str, Any] | None:
    """A backup is never rewritten by ``forget``: the restored copy gets every tombstone
    the source wrote since the backup began applied to it (``grimoire.forget``)."""
    from grimoire.forget.tombstones import TOMBSTONES

    source = args.forgotten_in or restored.get("source")
    scopes = restored.get("stores", {}).get("scopes") or {}  # DATA/scopes/* (grimoire.scopes)
    if not source or not ((Path(source) / TOMBSTONES).is_file() or scopes):
        return None
    from grimoire.config import load_config
    from grimoire.forget import apply_tombstones
    from grimoire.grimoire import Grimoire
    from grimoire.scopes.backup import apply_scope_tombstones

    config = load_config(args.config or restored.get("config"),
                         overrides={"data_dir": str(args.dir)})
    began = int(restored.get("stores", {}).get("began_at_ms", 0))
    with Grimoire.open(config=config) as g:
        applied: dict[str, Any] = (
            apply_tombstones(g.context, Path(source), since_ms=began)
            if (Path(source) / TOMBSTONES).is_file() else {"applied": 0})
        if scopes:
            applied["scopes"] = apply_scope_tombstones(g, Path(source), scopes)
        return applied
