"""The ``grimoire`` command: run the daemon, or talk to a running one over its socket.

Thin by design: parse arguments, call one API method (api.METHODS) through the
client, render the answer. ``grimoire call METHOD JSON`` reaches any method;
the other commands are friendly shortcuts for the common ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grimoire import __version__
from grimoire.config import Config, config_items, load_config
from grimoire.errors import ConfigError, GrimoireError, ValidationError
from grimoire.service.api import METHODS

__all__ = ["build_parser", "main"]

EPILOG = "methods (grimoire call METHOD JSON):\n" + "\n".join(
    f"  {spec.name:<20} {spec.summary}" for spec in METHODS.values()
)
# `grimoire call --help`: each method with its parameters, from the table the server uses.
CALL_EPILOG = "methods and their params (? = optional):\n" + "\n".join(
    f"  {spec.name:<20} {spec.summary}\n  {'':<20} params {spec.params}"
    for spec in METHODS.values()
)


def _common(p: argparse.ArgumentParser, json_help: str = "print raw JSON") -> None:
    p.add_argument("--config", metavar="FILE", help="YAML config file (also GRIMOIRE_CONFIG)")
    p.add_argument("--data", metavar="DIR", help="data directory (overrides data_dir)")
    p.add_argument("--socket", metavar="PATH", help="daemon socket (overrides socket_path)")
    p.add_argument("--json", action="store_true", help=json_help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grimoire",
        description="Grimoire: the local, offline memory daemon of an autonomous agent.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"grimoire {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the daemon in the foreground (systemd-friendly)",
                         description="Run the daemon: socket server plus heartbeat. SIGTERM or "
                         "SIGINT drains and exits 0; a second signal exits at once.")
    _common(run, json_help="JSON log lines even on a terminal (the default when stdout is "
                           "not one, e.g. under systemd)")
    run.add_argument("--feed", help="tick feed: none (default: the agent writes over the "
                     "socket) | jsonl:PATH | sim (the simulated market, for demos; a data "
                     "directory holds simulated or real memory, never both)")
    run.add_argument("--scenario", metavar="FILE", help="simulator scenario YAML")
    run.add_argument("--speed", type=float, help="time acceleration for demos (e.g. 600)")
    run.add_argument("--tick-seconds", type=float, help="heartbeat tick length in seconds")
    run.add_argument("--max-ticks", type=int, help="stop after this many ticks")
    run.add_argument("--log-level", help="debug | info | warning | error")

    for name, help_text in [("status", "counts, health metrics, recent events"),
                            ("health", "is the daemon alive")]:
        _common(sub.add_parser(name, help=help_text, description=help_text))

    write = sub.add_parser("write", help="write one episode", description="Write one episode.")
    _common(write)
    write.add_argument("text", help="what happened, in words")
    write.add_argument("--type", default="observation", help="episode type")
    write.add_argument("--outcome", help="positive | negative | neutral | descriptive")
    write.add_argument("--strategy", help="strategy name")
    write.add_argument("--regime", help="market regime")
    write.add_argument("--ref", help="your own id for it (message id, tx hash)")
    write.add_argument("--metric", action="append", default=[], metavar="NAME=NUMBER",
                       help="a metric, repeatable (gas_gwei=12.5)")

    retrieve = sub.add_parser("retrieve", help="ranked context for a query",
                              description="Ranked context with why each item ranks there.")
    _common(retrieve)
    retrieve.add_argument("query", help="what the agent is about to decide")
    retrieve.add_argument("-k", type=int, default=10, help="items at most")
    retrieve.add_argument("--max-tokens", type=int, help="token budget")
    retrieve.add_argument("--mode", default="browse", help="deciding | browse | auto")

    pb = sub.add_parser("playbook", help="print PLAYBOOK.md",
                        description="Print PLAYBOOK.md (from the daemon, else from disk).")
    _common(pb)
    ex = sub.add_parser("explain", help="an entry's history and provenance",
                        description="Votes, decay, promotions and provenance of an entry.")
    _common(ex)
    ex.add_argument("id", help="entry id")
    _common(sub.add_parser("curate", help="run a curator cycle now",
                           description="Force a curator cycle and print its summary."))

    kg = sub.add_parser("kg", help="knowledge graph queries and assertions",
                        description="Query or change the bi-temporal knowledge graph.")
    kg_sub = kg.add_subparsers(dest="kg_command", required=True, metavar="KG_COMMAND")
    for name, help_text, args in [
        ("assert", "assert a fact", ["subject_kind", "subject_id", "predicate", "object",
                                     "valid_from"]),
        ("at", "facts valid at a block", ["subject_kind", "subject_id", "block"]),
        ("known-at", "facts as known at a time (unix ms)", ["subject_kind", "subject_id",
                                                            "time"]),
        ("neighbors", "entities within k hops", ["subject_kind", "subject_id", "block"]),
        ("invalidate", "close a fact at a block", ["id", "at"]),
    ]:
        p = kg_sub.add_parser(name, help=help_text, description=help_text)
        _common(p)
        for arg in args:
            p.add_argument(arg, help=arg.replace("_", " ")
                           + (" (JSON for an entity or a number)" if arg == "object" else ""))
        if name == "neighbors":
            p.add_argument("--max-hops", type=int, default=3, help="hops at most")

    call = sub.add_parser("call", help="call any API method with JSON params",
                          description="Call any method of the API.", epilog=CALL_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(call)
    call.add_argument("method", help="method name, e.g. episode.write")
    call.add_argument("params", nargs="?", default="{}", help="JSON object of params")

    report = sub.add_parser(
        "report", help="write an HTML report of what the memory holds and learned",
        description="Write one self-contained HTML file (charts drawn at build time, no "
        "network): rules' confidence and ✓/✗ per curator cycle and when they entered and "
        "left PLAYBOOK.md, episodes per day, retrieval latency and hit rate, the knowledge "
        "graph's size, causal links with their lags.")
    _common(report)
    report.add_argument("--out", metavar="FILE.html", default="grimoire-report.html",
                        help="the file to write (default: grimoire-report.html)")

    cfg = sub.add_parser("config", help="configuration", description="Configuration.")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, metavar="CONFIG_COMMAND")
    show = cfg_sub.add_parser("show", help="every setting with its value and help",
                              description="Print every setting, its value and its help.")
    _common(show)
    # -- knowledge that outlives one process (grimoire/portable, grimoire/mcp) ------------
    from grimoire.portable.commands import add_commands

    add_commands(sub, _common)
    # ---------------------------------------------------------------------------------------
    return parser


def _load(args: argparse.Namespace, **extra: Any) -> Config:
    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "data", None):
        overrides["data_dir"] = args.data
    if getattr(args, "socket", None):
        overrides["socket_path"] = args.socket
    path = getattr(args, "config", None) or os.environ.get("GRIMOIRE_CONFIG")
    return load_config(path, env=os.environ, overrides=overrides)


def _print(value: Any, raw: bool) -> None:
    if isinstance(value, str) and not raw:
        print(value)
    else:
        print(json.dumps(value, indent=2, sort_keys=False, default=str))


def _metrics(pairs: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, number = pair.partition("=")
        try:
            out[name] = float(number)
        except ValueError:
            raise ValidationError(f"expected NAME=NUMBER, got {pair!r}", field="metric") from None
        if not sep or not name:
            raise ValidationError(f"expected NAME=NUMBER, got {pair!r}", field="metric")
    return out


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not valid JSON: {exc}", field=what) from None


def _request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The API method and params a friendly command stands for."""
    c = args.command
    if c in ("status", "health"):
        return c, {}
    if c == "write":
        params: dict[str, Any] = {"text": args.text, "type": args.type}
        for key in ("outcome", "strategy", "regime", "ref"):
            if getattr(args, key):
                params[key] = getattr(args, key)
        if args.metric:
            params["metrics"] = _metrics(args.metric)
        return "episode.write", params
    if c == "retrieve":
        # an owner at the terminal asks why things rank where they do: the full breakdown
        params = {"query": args.query, "k": args.k, "mode": args.mode, "explain": True}
        if args.max_tokens:
            params["max_tokens"] = args.max_tokens
        return "retrieve", params
    if c == "playbook":
        return "playbook.get", {}
    if c == "explain":
        return "entry.explain", {"id": args.id}
    if c == "curate":
        return "curator.run", {}
    if c == "call":
        params = _json_arg(args.params, "params")
        if not isinstance(params, dict):
            raise ValidationError("must be a JSON object", field="params")
        if args.method == "entry.add":
            params.setdefault("provenance", "owner")  # a person at the CLI: the owner told it
        return args.method, params
    if c == "kg":
        return _kg_request(args)
    raise ValidationError(f"unknown command {c}")


def _int_arg(text: str, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValidationError(f"expected a whole number, got {text!r}", field=field) from None


def _kg_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    k = args.kg_command
    if k == "invalidate":
        return "kg.invalidate", {"id": args.id, "at": _int_arg(args.at, "at")}
    subject = {"kind": args.subject_kind, "id": args.subject_id}
    if k == "assert":
        try:
            obj = json.loads(args.object)
        except json.JSONDecodeError:
            obj = args.object  # a plain string object
        return "kg.assert", {"subject": subject, "predicate": args.predicate, "object": obj,
                             "valid_from": _int_arg(args.valid_from, "valid_from")}
    if k == "at":
        return "kg.at", {"subject": subject, "block": _int_arg(args.block, "block")}
    if k == "known-at":
        return "kg.known_at", {"subject": subject, "time": _int_arg(args.time, "time")}
    return "kg.neighbors", {"subject": subject, "block": _int_arg(args.block, "block"),
                            "max_hops": args.max_hops}


def _render(method: str, result: Any, raw: bool) -> None:
    """The owner's views print as text (PLAYBOOK.md, an entry's history); --json prints
    the data behind them; everything else prints as JSON."""
    if not raw and method == "playbook.get" and isinstance(result, dict):
        print(result.get("markdown", ""), end="")
        return
    if not raw and method == "entry.explain" and isinstance(result, dict) \
            and isinstance(result.get("text"), str):
        print(result["text"], end="" if result["text"].endswith("\n") else "\n")
        return
    _print(result, raw)


def _run(args: argparse.Namespace) -> int:
    from grimoire.logs import configure_logging
    from grimoire.service.daemon import run_daemon

    overrides = {"daemon.feed": args.feed, "daemon.scenario": args.scenario,
                 "daemon.speed": args.speed, "daemon.tick_seconds": args.tick_seconds,
                 "daemon.max_ticks": args.max_ticks, "log_level": args.log_level}
    config = _load(args, **overrides)
    configure_logging(config.log_level, json=True if args.json else None)
    return run_daemon(config)


def _report(args: argparse.Namespace) -> int:
    from grimoire.logs import configure_logging
    from grimoire.report.command import make_report

    configure_logging("warning")
    path, size = make_report(_load(args), Path(args.out))
    print(f"wrote {path} ({size:,} bytes)")
    return 0


def _playbook_from_disk(config: Config) -> int:
    path = config.playbook_path
    if not path.exists():
        print(f"grimoire: no daemon is running and {path} does not exist yet", file=sys.stderr)
        return 1
    print(path.read_text(encoding="utf-8"), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    # OpenBLAS worker threads spin after each call and starve the daemon's other threads
    # (measured: SQLite reads 0.7-4 ms alone, 15-20 ms next to BLAS). numpy is first
    # imported below this line (by the daemon), so the setting takes effect.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from grimoire.service.client import Client

    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        # -- knowledge that outlives one process (grimoire/portable, grimoire/mcp) --------
        from grimoire.portable.commands import COMMANDS, run_command

        if args.command in COMMANDS:
            return run_command(args, _load)
        # -----------------------------------------------------------------------------------
        if args.command == "config":
            config = _load(args)
            if args.json:
                _print({k: v for k, v, _ in config_items(config)}, True)
            else:
                for key, value, help_text in config_items(config):
                    print(f"{key} = {json.dumps(value)}\n    # {help_text}")
            return 0
        if args.command == "report":
            return _report(args)
        config = _load(args)
        method, params = _request(args)
        if args.command == "playbook" and not Path(config.socket).exists():
            return _playbook_from_disk(config)
        with Client(config.socket) as client:
            result = client.call(method, params)
        _render(method, result, args.json)
        return 0
    except ConfigError as exc:
        print(f"grimoire: configuration error: {exc}", file=sys.stderr)
        return 2
    except GrimoireError as exc:
        print(f"grimoire: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`grimoire status | head`): stop quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
