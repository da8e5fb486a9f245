"""Every ``grimoire`` subcommand, registered in one place (``COMMANDS``).

A command is one function ``register(sub)`` that adds its parser and sets
``handler`` (a function ``(args) -> int``) with ``set_defaults``. To add one,
write its module with such a function and append it to ``COMMANDS``. Most
commands stand for one API method: ``method_command`` builds the handler
from a function mapping the parsed arguments to ``(method, params)``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grimoire.cli.common import common, emit, load, on_scope_dir, scoped
from grimoire.cli.forget import register_forget
from grimoire.config import config_items
from grimoire.errors import ValidationError
from grimoire.service.api import METHODS, suggest_method

__all__ = ["COMMANDS", "method_command", "methods_epilog"]

Sub = Any  # argparse's _SubParsersAction
Request = Callable[[argparse.Namespace], tuple[str, dict[str, Any]]]


def method_command(request: Request) -> Callable[[argparse.Namespace], int]:
    """A handler that calls one API method (daemon or read-only open) and prints its view."""

    @scoped
    def handler(args: argparse.Namespace) -> int:
        from grimoire.cli.access import call
        from grimoire.cli.render import render

        config = load(args)
        method, params = request(args)
        emit(render(method, call(config, method, params, args.scope), args.json))
        return 0

    return handler


def _number(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValidationError(f"expected a whole number, got {text!r}", field=what) from None


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not valid JSON: {exc}", field=what) from None


def _looks_like_id(text: str) -> bool:
    """A Grimoire id (a UUID: 8-4-4-4-12 hex), not words."""
    import re

    return re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                        text.strip().lower()) is not None


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


# -- the commands ---------------------------------------------------------------------------


def register_run(sub: Sub) -> None:
    run = sub.add_parser("run", help="run the daemon in the foreground (systemd-friendly)",
                         description="Run the daemon: socket server plus heartbeat. SIGTERM or "
                         "SIGINT drains and exits 0; a second signal exits at once.")
    common(run, json_help="JSON log lines even on a terminal (the default when stdout is "
                          "not one, e.g. under systemd)")
    run.add_argument("--feed", help="tick feed: none | sim | jsonl:PATH (default: none; sim "
                     "is the simulated demo market, for a demo data directory only)")
    run.add_argument("--scenario", metavar="FILE", help="simulator scenario YAML")
    run.add_argument("--speed", type=float, help="time acceleration for demos (e.g. 600)")
    run.add_argument("--tick-seconds", type=float, help="heartbeat tick length in seconds")
    run.add_argument("--max-ticks", type=int, help="stop after this many ticks")
    run.add_argument("--log-level", help="debug | info | warning | error")
    run.add_argument("--inherit", metavar="TESTAMENT",
                     help="start as the successor of the agent that wrote TESTAMENT (grimoire "
                     "testament): into an empty data directory, at its generation + 1; its "
                     "knowledge enters discounted and must be re-validated here, its lessons' "
                     "warnings as bloodstains. Given again on a restart: nothing happens")

    def handler(args: argparse.Namespace) -> int:
        from grimoire.logs import configure_logging
        from grimoire.service.daemon import run_daemon

        overrides = {"daemon.feed": args.feed, "daemon.scenario": args.scenario,
                     "daemon.speed": args.speed, "daemon.tick_seconds": args.tick_seconds,
                     "daemon.max_ticks": args.max_ticks, "log_level": args.log_level}
        # A relative data_dir is resolved once, by run_daemon (under systemd the working
        # directory is /), which logs both the path given and the absolute one it uses.
        config = load(args, **overrides)
        configure_logging(config.log_level, json=True if args.json else None)
        return run_daemon(config, inherit=args.inherit)

    run.set_defaults(handler=handler)


def register_status(sub: Sub) -> None:
    p = sub.add_parser("status", help="counts, health metrics, the last curator cycle",
                       description="counts, health metrics, the last curator cycle")
    common(p)
    p.set_defaults(handler=method_command(lambda a: (a.command, {})))
    p = sub.add_parser(
        "health", help="is the daemon alive (exit 0 yes, 3 no daemon running)",
        description="Ask the daemon serving the data directory whether it is alive. With "
        "no daemon running it says so, and what the directory holds on disk.",
        epilog="exit codes: 0 the daemon answered; 1 something answers on the socket but "
        "not as a daemon should (an error, a timeout); 2 bad configuration or arguments; "
        "3 no daemon is running (no socket, or a stale one)")
    common(p)

    def health(args: argparse.Namespace) -> int:
        from grimoire.cli.probe import health

        return health(load(args), args.json)

    p.set_defaults(handler=health)


def register_write(sub: Sub) -> None:
    write = sub.add_parser("write", help="write one episode", description="Write one episode.")
    common(write)
    write.add_argument("text", help="what happened, in words")
    write.add_argument("--type", default="observation", help="episode type")
    write.add_argument("--outcome", help="positive | negative | neutral | descriptive")
    write.add_argument("--strategy", help="strategy name")
    write.add_argument("--regime", help="market regime")
    write.add_argument("--ref", help="your own id for it (message id, tx hash)")
    write.add_argument("--metric", action="append", default=[], metavar="NAME=NUMBER",
                       help="a metric, repeatable (gas_gwei=12.5)")

    def request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"text": args.text, "type": args.type}
        for key in ("outcome", "strategy", "regime", "ref"):
            if getattr(args, key):
                params[key] = getattr(args, key)
        if args.metric:
            params["metrics"] = _metrics(args.metric)
        return "episode.write", params

    write.set_defaults(handler=method_command(request))


def register_retrieve(sub: Sub) -> None:
    retrieve = sub.add_parser("retrieve", help="ranked context for a query",
                              description="Ranked context with why each item ranks there.")
    common(retrieve)
    retrieve.add_argument("query", help="what the agent is about to decide")
    retrieve.add_argument("-k", type=int, default=10, help="items at most")
    retrieve.add_argument("--max-tokens", type=int, help="token budget")
    retrieve.add_argument("--mode", default="browse", help="deciding | browse | auto")

    def request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"query": args.query, "k": args.k, "mode": args.mode}
        if args.json:  # the machine form carries why each item ranks there (opt-in)
            params["explain"] = True
        if args.max_tokens:
            params["max_tokens"] = args.max_tokens
        return "retrieve", params

    retrieve.set_defaults(handler=method_command(request))


def register_advise(sub: Sub) -> None:
    adv = sub.add_parser(
        "advise", help="the rules that apply to a situation, warnings first",
        description="The active rules whose conditions hold for the situation described by "
        "these fields (those of an action episode), warnings first, then by confidence x "
        "effect size; a rule that needs a field not given is listed as 'may apply'. "
        "API method rules.applicable.")
    common(adv)
    adv.add_argument("--action", action="append", default=[], metavar="NAME",
                     help="what the agent is about to do (swap), repeatable")
    adv.add_argument("--tool", help="the tool it would use (uniswap_v3)")
    adv.add_argument("--pair", dest="token_pair", metavar="PAIR", help="token pair (WETH/USDC)")
    adv.add_argument("--chain", help="chain (ethereum)")
    adv.add_argument("--regime", help="market regime (high_vol)")
    adv.add_argument("--strategy", help="strategy name")
    adv.add_argument("--metric", action="append", default=[], metavar="NAME=NUMBER",
                     help="a metric as it is now, repeatable (gas_gwei=31)")
    adv.add_argument("--time", dest="timestamp", metavar="MS",
                     help="the situation's time, unix ms (for hour-of-day rules)")
    adv.add_argument("--category", action="append", default=[],
                     help="warning | heuristic | insight, repeatable (default: warning and "
                     "heuristic)")
    adv.add_argument("--limit", type=int, default=10, help="rules at most (1-100)")
    adv.add_argument("--applies-only", action="store_true",
                     help="leave out the rules that only may apply")

    def request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        situation: dict[str, Any] = {k: getattr(args, k) for k in
                                     ("tool", "token_pair", "chain", "regime", "strategy")
                                     if getattr(args, k)}
        if args.action:
            situation["actions"] = args.action
        if args.metric:
            situation["metrics"] = _metrics(args.metric)
        if args.timestamp is not None:
            situation["timestamp"] = _number(args.timestamp, "time")
        params: dict[str, Any] = {"situation": situation, "limit": args.limit}
        if args.category:
            params["categories"] = args.category
        if args.applies_only:
            params["may_apply"] = False
        return "rules.applicable", params

    adv.set_defaults(handler=method_command(request))


def register_owner(sub: Sub) -> None:
    pb = sub.add_parser("playbook", help="print PLAYBOOK.md",
                        description="Print PLAYBOOK.md (from the daemon, else from disk) "
                        "without its YAML front matter (the counts a program reads: --raw "
                        "keeps it, --json prints playbook.get's answer).")
    common(pb)
    pb.add_argument("--raw", action="store_true", help="the file as it is, front matter too")

    @scoped
    def playbook(args: argparse.Namespace) -> int:
        from grimoire.cli.access import daemon_listening
        from grimoire.cli.probe import no_playbook
        from grimoire.cli.render import without_front_matter

        config = load(args)
        if not args.json and args.scope is None and not daemon_listening(config.socket):
            path = config.playbook_path
            if not path.exists():
                raise ValidationError(no_playbook(config))
            text = path.read_text(encoding="utf-8").rstrip("\n")
            emit(text if args.raw else without_front_matter(text))
            return 0
        if args.raw and not args.json:
            from grimoire.cli.access import call

            emit(str(call(config, "playbook.get", {}, args.scope).get("markdown", "")
                     ).rstrip("\n"))
            return 0
        return method_command(lambda a: ("playbook.get", {}))(args)

    pb.set_defaults(handler=playbook)
    ex = sub.add_parser("explain", help="an entry's history and provenance",
                        description="Votes, decay, promotions and provenance of an entry "
                        "(its id or the short id PLAYBOOK.md prints).")
    common(ex)
    ex.add_argument("id", help="entry id, or a unique prefix of it (PLAYBOOK.md's short id)")
    ex.set_defaults(handler=method_command(lambda a: ("entry.explain", {"id": a.id})))
    fwd = sub.add_parser("consequences", help="what followed from an event (causal, forward)",
                         description="The predicted consequences of an event: its effects "
                         "forward along the causal edges, nearest first (the backward chain "
                         "is `grimoire call causal.chain`).")
    common(fwd)
    fwd.add_argument("event", help="an episode or entry id, or words naming the event "
                     "(the most similar item is the start)")
    fwd.add_argument("--depth", type=lambda t: _number(t, "--depth"), default=3,
                     help="edges to follow forward (1-8, default 3)")
    fwd.add_argument("--limit", type=lambda t: _number(t, "--limit"), default=20,
                     help="consequences at most (1-100)")

    def _consequences(a: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        start = {"id": a.event} if _looks_like_id(a.event) else {"query": a.event}
        return "causal.consequences", {**start, "depth": a.depth, "limit": a.limit}

    fwd.set_defaults(handler=method_command(_consequences))
    cur = sub.add_parser("curate", help="run a curator cycle now",
                         description="Force a curator cycle and print its summary.")
    common(cur)
    cur.set_defaults(handler=method_command(lambda a: ("curator.run", {})))


def register_entry(sub: Sub) -> None:
    entry = sub.add_parser("entry", help="knowledge entries: list, show",
                           description="List or show knowledge entries.")
    entry_sub = entry.add_subparsers(dest="entry_command", required=True,
                                     metavar="ENTRY_COMMAND")
    ls = entry_sub.add_parser("list", help="entries by category / status / strategy",
                              description="Entries by category / status / strategy.")
    common(ls)
    ls.add_argument("--category", help="warning | heuristic | insight | …")
    ls.add_argument("--status", help="candidate | active | demoted | archived | quarantined")
    ls.add_argument("--strategy", help="strategy name")
    ls.add_argument("--limit", type=int, default=100, help="entries at most (1-1000)")
    ls.add_argument("--kind", help="knowledge (default: rules, insights, causal links) | "
                    "summary (the curator's L1/L2 summaries) | summary:l1 | summary:l2 | all")

    def list_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        params = {k: getattr(args, k) for k in ("category", "status", "strategy", "kind")
                  if getattr(args, k)}
        return "entry.list", {**params, "limit": args.limit}

    ls.set_defaults(handler=method_command(list_request))
    show = entry_sub.add_parser("show", help="one entry (id or short id)",
                                description="One entry, by id or a unique prefix of it.")
    common(show)
    show.add_argument("id", help="entry id or a unique prefix of it")
    show.set_defaults(handler=method_command(lambda a: ("entry.get", {"id": a.id})))


def _kg_words() -> str:
    from grimoire.records.graph import CUSTOM_PREFIX, EntityKind, Predicate

    return (f"Predicates: {', '.join(p.value for p in Predicate)}, or {CUSTOM_PREFIX}<name> "
            f"for any other. Entity kinds: {', '.join(k.value for k in EntityKind)}. Each "
            "subject holds one open object per predicate: asserting another object closes "
            "the open fact at the new valid_from (the answer lists it under 'closed'); "
            "asserting the same object again reinforces it.")


def register_kg(sub: Sub) -> None:
    kg = sub.add_parser("kg", help="knowledge graph queries and assertions",
                        description="Query or change the bi-temporal knowledge graph. "
                        + _kg_words())
    kg_sub = kg.add_subparsers(dest="kg_command", required=True, metavar="KG_COMMAND")
    for name, help_text, args in [
        ("assert", "assert a fact", ["subject_kind", "subject_id", "predicate", "object",
                                     "valid_from"]),
        ("at", "facts valid at a block", ["subject_kind", "subject_id", "block"]),
        ("known-at", "facts as known at a time (unix ms); API kg.known_at",
         ["subject_kind", "subject_id", "time"]),
        ("known_at", "the same as known-at (the API's spelling)",
         ["subject_kind", "subject_id", "time"]),
        ("neighbors", "entities within k hops", ["subject_kind", "subject_id", "block"]),
        ("invalidate", "close a fact at a block", ["id", "at"]),
    ]:
        p = kg_sub.add_parser(name, help=help_text,
                              description=help_text + (". " + _kg_words() if name == "assert"
                                                       else ""))
        common(p)
        for arg in args:
            p.add_argument(arg, help=arg.replace("_", " ")
                           + (" (JSON for an entity or a number)" if arg == "object" else "")
                           + (" (see the list above)" if arg == "predicate" else ""))
        if name == "neighbors":
            p.add_argument("--max-hops", type=int, default=3, help="hops at most")
        p.set_defaults(handler=method_command(_kg_request))


def _kg_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    k = args.kg_command
    if k == "invalidate":
        return "kg.invalidate", {"id": args.id, "at": _number(args.at, "at")}
    subject = {"kind": args.subject_kind, "id": args.subject_id}
    if k == "assert":
        try:
            obj = json.loads(args.object)
        except json.JSONDecodeError:
            obj = args.object  # a plain string object
        return "kg.assert", {"subject": subject, "predicate": args.predicate, "object": obj,
                             "valid_from": _number(args.valid_from, "valid_from")}
    if k == "at":
        return "kg.at", {"subject": subject, "block": _number(args.block, "block")}
    if k in ("known-at", "known_at"):
        return "kg.known_at", {"subject": subject, "time": _number(args.time, "time")}
    return "kg.neighbors", {"subject": subject, "block": _number(args.block, "block"),
                            "max_hops": args.max_hops}


def methods_epilog(with_params: bool = False) -> str:
    """The method table (api.METHODS, which the server validates against) as help text."""
    lines = ["methods (grimoire call METHOD JSON):"]
    for spec in METHODS.values():
        lines.append(f"  {spec.name:<20} {spec.summary}")
        if with_params:
            lines.append(f"  {'':<20}   params {spec.params}")
    lines.append("every method also takes scope (default: the default scope; README: Scopes)")
    return "\n".join(lines)


def register_call(sub: Sub) -> None:
    call = sub.add_parser("call", help="call any API method with JSON params",
                          description="Call any method of the API. Parameters marked ? are "
                          "optional; the server checks them against this same table.",
                          epilog=methods_epilog(with_params=True),
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    common(call)
    call.add_argument("method", help="method name, e.g. episode.write")
    call.add_argument("params", nargs="?", default="{}", help="JSON object of params")

    def request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
        if args.method not in METHODS:
            raise ValidationError(f"method not found: {args.method}"
                                  f"{suggest_method(args.method)}; grimoire call --help "
                                  "lists them")
        params = _json_arg(args.params, "params")
        if not isinstance(params, dict):
            raise ValidationError("must be a JSON object", field="params")
        if args.method == "entry.add":
            params.setdefault("provenance", "owner")  # a person at the CLI: the owner told it
        return args.method, params

    call.set_defaults(handler=method_command(request))


def register_config(sub: Sub) -> None:
    cfg = sub.add_parser("config", help="configuration", description="Configuration.")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, metavar="CONFIG_COMMAND")
    show = cfg_sub.add_parser("show", help="every setting with its value and help",
                              description="Print every setting, its value and its help.")
    common(show)

    def handler(args: argparse.Namespace) -> int:
        from grimoire.cli.render import dumps

        config = load(args)
        if args.json:
            emit(dumps({k: v for k, v, _ in config_items(config)}))
        else:
            emit("\n".join(f"{key} = {json.dumps(value, ensure_ascii=False)}\n    # {text}"
                           for key, value, text in config_items(config)))
        return 0

    show.set_defaults(handler=handler)


def register_report(sub: Sub) -> None:
    rep = sub.add_parser(
        "report", help="write an HTML report of what the memory holds and learned",
        description="Write one self-contained HTML file (charts drawn at build time, no "
        "script, no network): rules' confidence and ✓/✗ per curator cycle and when they "
        "entered and left PLAYBOOK.md, episodes per day, retrieval latency and hit rate, the "
        "knowledge graph's size, causal links with their lags. Reads the data directory "
        "itself (read-only), beside a running daemon or without one.")
    common(rep)
    rep.add_argument("-o", "--out", metavar="FILE.html", default="grimoire-report.html",
                     help="the file to write (default: grimoire-report.html)")
    on_scope_dir(rep)

    def handler(args: argparse.Namespace) -> int:
        from grimoire.report.command import make_report

        config = load(args)
        path, size = make_report(config, Path(args.out))
        emit(f"wrote {path} ({size:,} bytes)")
        return 0

    rep.set_defaults(handler=handler)


def register_portable(sub: Sub) -> None:
    """mcp, backup, restore, export, import, clade: grimoire/portable and grimoire/mcp."""
    from grimoire.portable.commands import COMMANDS as PORTABLE
    from grimoire.portable.commands import add_commands, run_command

    add_commands(sub, common)

    def handler(args: argparse.Namespace) -> int:
        return run_command(args, load)

    for name in PORTABLE:
        sub.choices[name].set_defaults(handler=handler)
    for name in ("check", "repair", "export", "import", "testament"):
        on_scope_dir(sub.choices[name])  # --scope NAME: DATA/scopes/NAME's stores


# The one list of subcommands, in --help order.
COMMANDS: list[Callable[[Sub], None]] = [
    register_run, register_status, register_write, register_retrieve, register_advise,
    register_owner,
    register_entry, register_kg, register_call, register_report, register_forget,
    register_portable, register_config,
]
