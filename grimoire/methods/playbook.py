"""``playbook.get``: PLAYBOOK.md as the last curator cycle wrote it.

Which entries the file lists and how it is written are the curator's
(``curator.views.playbook``); this method reads the file back, or, before any cycle
wrote one, compiles it from the current state without saving it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from curator.cycle.state import store_time
from curator.views.playbook import render_playbook
from grimoire.context import Context
from grimoire.errors import StoreError

__all__ = ["playbook_get"]

_TICK = re.compile(r"^tick: (\d+)$", re.MULTILINE)
_GENERATED = re.compile(r'^generated_at: "([0-9T:\-]+Z)"$', re.MULTILINE)


def _iso_ms(text: str) -> int:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000


def playbook_get(ctx: Context) -> dict[str, Any]:
    """``playbook.get``: the file as last written; if no cycle wrote one yet, the playbook
    compiled from the current state (not saved), and ``exists: false`` says so."""
    path = ctx.config.playbook_path
    try:
        markdown = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        now = store_time(ctx)
        return {
            "markdown": render_playbook(ctx, now=now, tick=ctx.tick), "tick": ctx.tick,
            "generated_at": now, "path": str(path), "exists": False,
            "note": "no curator cycle has written PLAYBOOK.md yet: this is compiled from the "
                    "current state and was not saved (run curator.run to write it)",
        }
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    tick = _TICK.search(markdown)
    generated = _GENERATED.search(markdown)
    return {"markdown": markdown, "tick": int(tick.group(1)) if tick else None,
            "generated_at": _iso_ms(generated.group(1)) if generated else None,
            "path": str(path), "exists": True}
