"""What a data directory shows from outside, without opening its stores or loading a model.

``grimoire health`` answers whether a daemon serves the directory (exit codes below);
with none listening it says so, and what is on disk: whether the directory holds a
Grimoire, simulated or real memory (``FEED.json``), the tick and last curator cycle
recorded, whether PLAYBOOK.md was written, and a process that holds the directory's lock.
``demo_hint`` is the owner's commands' diagnosis when the default directory holds nothing
and the README's demo directory does.

``grimoire health`` exit codes (LSB ``status`` style, so a monitoring probe can act on
them): 0 the daemon answered; 1 something answers on the socket but not as a daemon
should (an error, a timeout); 2 bad configuration or arguments; 3 no daemon is running
(the socket is absent, or stale: nothing accepts on it).
"""

from __future__ import annotations

import fcntl
import json
import socket
from pathlib import Path
from typing import Any

from grimoire.config import Config
from grimoire.errors import ConfigError

__all__ = ["NOT_RUNNING", "demo_hint", "health", "no_playbook", "on_disk"]

NOT_RUNNING = 3
#: The README's demo writes here (``grimoire run --feed sim --data data/demo``).
DEMO_DIR = Path("data/demo")


def _meta(path: Path) -> dict[str, Any] | None:
    """``tick`` and ``last_curator_cycle`` from the semantic store's meta table (read-only)."""
    import apsw

    try:
        conn = apsw.Connection(f"file:{path}?mode=ro",
                               flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error:
        return None
    try:
        conn.set_busy_timeout(2000)
        rows: dict[str, Any] = {str(r[0]): r[1] for r in conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('tick', 'last_curator_cycle')")}
    except apsw.Error:
        return None
    finally:
        conn.close()
    out: dict[str, Any] = {}
    for key, value in rows.items():
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            continue
    return out


def _lock_holder(root: Path) -> int | None:
    """The pid written in ``LOCK`` while its flock is held (a daemon starting or stopping,
    or another writer), else None."""
    try:
        with open(root / "LOCK", encoding="utf-8") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = fh.read().strip()
                return int(text) if text.isdigit() else -1
            return None
    except OSError:
        return None


def on_disk(config: Config) -> dict[str, Any]:
    """What ``config.data_dir`` holds, read without opening a store."""
    root = Path(config.data_dir)
    found: dict[str, Any] = {"data_dir": str(root), "exists": root.is_dir(),
                             "grimoire": (root / "semantic.sqlite").is_file(),
                             "socket": str(config.socket),
                             "socket_file": config.socket.exists()}
    if not found["exists"]:
        return found
    try:
        from grimoire.stores.marker import read_marker

        marker = read_marker(root)
        found["memory"] = marker["kind"] if marker else None
    except ConfigError as exc:
        found["memory"] = f"unknown ({exc})"
    if found["grimoire"]:
        meta = _meta(root / "semantic.sqlite")
        if meta is None:
            found["readable"] = False
        else:
            found["tick"] = int(meta.get("tick", 0) or 0)
            cycle = meta.get("last_curator_cycle")
            found["last_curator_cycle"] = cycle.get("cycle") if isinstance(cycle, dict) else None
    found["playbook"] = config.playbook_path.is_file()
    found["locked_by"] = _lock_holder(root)
    return found


def describe(found: dict[str, Any]) -> str:
    """One paragraph: what ``on_disk`` found."""
    root = found["data_dir"]
    if not found["exists"]:
        return f"{root} does not exist"
    if not found["grimoire"]:
        return f"{root} holds no Grimoire data"
    memory = found.get("memory")
    parts = [f"{root} holds {memory} memory" if memory else
             f"{root} holds a store not marked simulated or real (no FEED.json)"]
    if found.get("readable") is False:
        parts.append("its semantic store could not be read")
    else:
        cycle = found.get("last_curator_cycle")
        parts.append(f"tick {found.get('tick', 0)}, "
                     + (f"last curator cycle {cycle}" if cycle else "no curator cycle yet"))
    parts.append("PLAYBOOK.md written" if found.get("playbook") else "no PLAYBOOK.md")
    holder = found.get("locked_by")
    if holder is not None:
        who = f"process {holder}" if holder > 0 else "another process"
        parts.append(f"locked by {who} (a daemon starting or stopping, or another writer)")
    return "; ".join(parts)


def daemon_listening(path: Path) -> bool:
    """True when something accepts connections on the socket (a stale file is not enough)."""
    if not path.exists():
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(str(path))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def health(config: Config, as_json: bool) -> int:
    """``grimoire health``: the daemon's answer (exit 0), or why there is none (exit 3)."""
    from grimoire.cli.common import emit
    from grimoire.cli.render import dumps, render

    if daemon_listening(config.socket):
        from grimoire.service.client import Client

        with Client(config.socket) as client:
            result = client.call("health", {})
        emit(render("health", {**result, "running": True}, as_json))
        return 0
    found = on_disk(config)
    feed = " --feed sim" if found.get("memory") == "simulated" else ""
    start = f"start it with: grimoire run{feed} --data {config.data_dir}"
    if as_json:
        emit(dumps({"ok": False, "running": False, "reason": "no daemon is running",
                    "on_disk": found, "hint": start}))
    else:
        stale = " (a stale socket file is there)" if found["socket_file"] else ""
        emit(f"not running: no daemon answers on {config.socket}{stale}.\n"
             f"on disk: {describe(found)}.\n{start}")
    return NOT_RUNNING


def demo_hint(config: Config, default_dir: str) -> str | None:
    """When ``config.data_dir`` is the default and holds no memory while the README's demo
    directory holds some, the sentence that says so (None otherwise)."""
    root = Path(config.data_dir)
    if Path(default_dir).resolve() != root.resolve() or DEMO_DIR.resolve() == root.resolve():
        return None
    if not (DEMO_DIR / "semantic.sqlite").is_file():
        return None
    here = on_disk(config)
    if here["grimoire"] and (here.get("tick") or here.get("playbook")):
        return None  # the default directory holds memory of its own
    state = "does not exist" if not here["exists"] else (
        "holds no Grimoire data" if not here["grimoire"] else
        "holds a store no daemon has run on (tick 0, no PLAYBOOK.md)")
    return (f"the default data directory {root} {state}, but {DEMO_DIR} holds the demo's "
            f"memory: pass --data {DEMO_DIR} (e.g. grimoire playbook --data {DEMO_DIR})")


def no_playbook(config: Config) -> str:
    """Why there is no PLAYBOOK.md to print, with no daemon running: the demo's directory
    was meant, the directory holds no Grimoire, or no curator cycle has run yet."""
    hint = demo_hint(config, Config().data_dir)
    if hint is not None:
        return f"no daemon is running and {hint}"
    found = on_disk(config)
    if not found["grimoire"]:
        return (f"no daemon is running and {describe(found)}: check --data DIR (the "
                "directory `grimoire run --data DIR` uses)")
    return (f"no daemon is running and {config.playbook_path} does not exist yet; the "
            "curator writes it on its first cycle")
