"""``grimoire forget``: erase one episode, an actor, a thread, an entity or a phrase.

Through the daemon when one listens (it is the writer); without one, the command opens
the data directory itself as the writer (``--dry-run`` only reads it). Prints what was
removed, or with ``--dry-run`` what would be.
"""

from __future__ import annotations

import argparse
from typing import Any

from grimoire.cli.common import common, emit, load, scoped

__all__ = ["register_forget"]


def _render(result: dict[str, Any]) -> str:
    counts = result.get("would_remove") or result.get("removed") or {}
    head = "would remove" if result.get("dry_run") else "removed"
    parts = [f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v]
    lines = [f"forget ({result.get('kind')}): {head} " + (", ".join(parts) or "nothing")]
    if result.get("dry_run"):
        for ep in result.get("episodes", []):
            lines.append(f"  episode {ep['id']}  {ep['text']}")
        for entry in result.get("entries", []):
            lines.append(f"  entry {entry['id']} ({entry['category']})  {entry['content']}")
    else:
        lines.append(f"  tombstone {result.get('tombstone')} (TOMBSTONES.jsonl: kind, "
                     "counts and ids, no text); PLAYBOOK.md rebuilt")
    return "\n".join(lines)


def register_forget(sub: Any) -> None:
    p = sub.add_parser(
        "forget", help="erase an episode, actor, thread, entity or phrase from every store",
        description="Erase every trace: the episodes (LanceDB with its old versions, the "
        "journal, the in-memory indexes), their mentions, causal edges, KG triples about the "
        "entity, log rows and summaries that quote them; entries that cited them are "
        "recounted (removed when nothing supports them) and PLAYBOOK.md is rebuilt. A "
        "tombstone (kind, counts, ids; no text) is written first, so a crash is finished "
        "at the next open. Backups are not rewritten: `grimoire restore` applies the "
        "tombstones written since the backup.")
    common(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--episode", metavar="ID", help="one episode by id")
    what.add_argument("--actor", metavar="NAME", help="every episode by this actor (and "
                      "everything that names it)")
    what.add_argument("--thread", metavar="ID", help="every episode of this thread")
    what.add_argument("--entity", metavar="NAME", help="an entity, kind:id (token:WETH) or a "
                      "bare name: every episode, entry and KG triple that names it")
    what.add_argument("--matching", metavar="TEXT", help="every episode whose text quotes "
                      "TEXT (case-insensitive), and everything else that quotes it")
    p.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")

    @scoped
    def handler(args: argparse.Namespace) -> int:
        from grimoire.cli.access import call, daemon_listening
        from grimoire.cli.render import dumps

        config = load(args)
        params: dict[str, Any] = {k: getattr(args, k) for k in
                                  ("episode", "actor", "thread", "entity", "matching")
                                  if getattr(args, k) is not None}
        params["dry_run"] = bool(args.dry_run)
        if args.scope is not None:
            params["scope"] = args.scope
        if args.dry_run or daemon_listening(config.socket):
            result = call(config, "forget", params)
        else:  # no daemon: this process is the one writer of the directory for a moment
            from grimoire.grimoire import Grimoire
            from grimoire.service.api import dispatch

            with Grimoire.open(config=config) as g:
                result = dispatch(g, "forget", params)
        emit(dumps(result) if args.json else _render(result))
        return 0

    p.set_defaults(handler=handler)
