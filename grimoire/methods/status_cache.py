"""What ``status`` shows of the episodes, saved by the writer so an offline status need not
open them (issue 27 item 5).

With no daemon running, ``grimoire status`` opens the directory read-only; reading the
episodes means importing LanceDB (1.1-3.5 s here) and loading the table, which alone is
past the owner commands' 1 s goal. Of the episodes, status shows the store's figures
(``EpisodeStore.stats``: rows, fragments, files, bytes) and the two health metrics that
read action episodes (``pnl_trend``, ``prediction_accuracy``: each action's time, gain and
realised-vs-predicted return). The writer saves these in the semantic store's meta table
(``KEY``) when it closes, after its last flush, with a fingerprint of the episode store
on disk: the newest LanceDB manifest (every change to the table, a compaction or a
forget included, writes a new one; its sha256) and the journal's pending rows (count and
largest seq). An offline status uses them only when the fingerprint matches the files as
they are now, so the figures are the store's own; otherwise (a crash, a write since, a
restored or repaired copy) it opens the episodes as before. Bytes on disk are counted from
the files at read time; the in-memory figures of a process that never loaded the episodes
(``index_bytes``, the ANN index, compaction counters) are left out.

The action rows are those of the 30 days before the earlier of the save's time and the
wall clock at the save (an offline status reads the metrics at the wall clock's time, and
a simulated store's time runs ahead of it), as many as the metrics read (``SCAN_LIMIT``);
a status at a later time filters them to its own window, which they cover. A save that hit
the limit, or a status whose window starts before the rows do, reads the episodes instead.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grimoire.clock import MS_PER_DAY, SystemClock
from grimoire.context import Context
from grimoire.errors import GrimoireError
from grimoire.logs import get_logger

__all__ = ["KEY", "SCAN_LIMIT", "WINDOW_MS", "ActionRow", "action_rows", "collect", "episode_stats",
           "fingerprint", "keep_at_close", "load", "save", "take_at_close"]

log = get_logger(__name__)

KEY = "status.episodes"
_FORMAT = 2
WINDOW_MS = 30 * MS_PER_DAY  # the longest window a health metric reads actions in
SCAN_LIMIT = 20_000  # episodes read at most for an episode-based metric
_EXTRA = "status.saved"  # ctx.extras: the saved figures a status call is using
# (timestamp, gain or None, realised - predicted return in bps or None)
ActionRow = tuple[int, float | None, float | None]
_U64 = (1 << 64) - 1
# Figures of the process that holds the episodes in memory: none for an offline status.
_IN_MEMORY = ("index_bytes", "ann", "flushes_since_compact", "last_compact")


def _newest_manifest(table: Path) -> Path | None:
    """The manifest of the table's newest version (LanceDB names them ``N.manifest``, or
    ``u64::MAX - N`` zero-padded to 20 digits in its newer naming)."""
    best: tuple[int, Path] | None = None
    try:
        names = os.listdir(table / "_versions")
    except FileNotFoundError:
        return None
    for name in names:
        stem, dot, ext = name.partition(".")
        if ext != "manifest" or not dot or not stem.isdigit():
            continue
        version = _U64 - int(stem) if len(stem) == 20 else int(stem)
        if best is None or version > best[0]:
            best = (version, table / "_versions" / name)
    return None if best is None else best[1]


def fingerprint(episodes_dir: Path) -> str | None:
    """What changes whenever the episode store's content does (module doc); None when it
    cannot be read."""
    from grimoire.stores.episodes.journal import JOURNAL_FILE, read_pending
    from grimoire.stores.episodes.lance import TABLE_DIR

    # The journal first: a row written after this read either is still pending there or
    # was flushed into a newer manifest than the one read next, so a fingerprint that
    # matches the saved one was read from the store as it was saved (no torn read).
    pending = read_pending(episodes_dir / JOURNAL_FILE)
    if pending is None:
        return None
    manifest = _newest_manifest(episodes_dir / TABLE_DIR)
    try:
        digest = hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest else "-"
    except OSError:
        return None
    name = manifest.name if manifest else "-"
    return f"{name}:{digest}:{pending[0]}:{pending[1]}"


def _disk(episodes_dir: Path) -> dict[str, int]:
    """Data files, versions and bytes of the table, and the journal's bytes, from the files."""
    from grimoire.stores.episodes.journal import JOURNAL_FILE
    from grimoire.stores.episodes.lance import TABLE_DIR, table_files

    data_files, versions, size = table_files(episodes_dir / TABLE_DIR)
    journal = sum(p.stat().st_size for p in (episodes_dir / f"{JOURNAL_FILE}{suffix}"
                                             for suffix in ("", "-wal", "-shm")) if p.exists())
    return {"data_files": data_files, "versions": versions, "lance_bytes": size,
            "journal_bytes": journal, "disk_bytes": size + journal}


def _actions(ctx: Context, since: int, limit: int) -> list[ActionRow]:
    deviations = ctx.stats.get("prediction_deviations")
    out: list[ActionRow] = []
    for ep in ctx.episodes.recent(limit, types=["action"], since=since):
        dev = deviations(ep).get("return_bps") if deviations is not None else None
        out.append((ep.timestamp, ep.gain, dev))
    return out


def collect(ctx: Context, limit: int) -> dict[str, Any]:
    """The writer's figures, taken before its episode store closes (``save`` after)."""
    start = min(ctx.now(), SystemClock()()) - WINDOW_MS
    actions = _actions(ctx, start, limit)
    stats = {k: v for k, v in ctx.episodes.stats().items() if k not in _IN_MEMORY}
    return {"format": _FORMAT, "from": start, "stats": stats, "actions": actions,
            "complete": len(actions) < limit}


def save(ctx: Context, figures: Mapping[str, Any]) -> None:
    """Record ``figures`` with the fingerprint of the episode store as closed."""
    found = fingerprint(ctx.data_dir / "episodes")
    if found is None:
        return
    ctx.semantic.set_meta(KEY, {**figures, "fingerprint": found})


def take_at_close(ctx: Context) -> dict[str, Any] | None:
    """A closing writer's figures, taken after its last write (None if they cannot be: the
    close goes on, and an offline status then reads the store)."""
    try:
        ctx.episodes.flush()
        return collect(ctx, SCAN_LIMIT)
    except GrimoireError as exc:
        log.warning("grimoire.close.status_figures", error=str(exc))
        return None


def keep_at_close(ctx: Context, figures: Mapping[str, Any]) -> None:
    """``save`` once the episode store is closed; a failure is logged, never raised."""
    try:
        save(ctx, figures)
    except GrimoireError as exc:
        log.warning("grimoire.close.status_figures", error=str(exc))


def load(ctx: Context) -> dict[str, Any] | None:
    """The saved figures when this read-only open has not loaded the episodes and they are
    still the store's (the fingerprint matches), else None."""
    if not ctx.read_only or ctx.episode_store.peek() is not None:
        return None
    saved = ctx.semantic.get_meta(KEY, None)
    if not isinstance(saved, dict) or saved.get("format") != _FORMAT:
        return None
    if saved.get("fingerprint") != fingerprint(ctx.data_dir / "episodes"):
        return None
    return saved


def episode_stats(ctx: Context, saved: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status``'s episodes: the saved figures with today's bytes on disk, or the store's."""
    if saved is None:
        return ctx.episodes.stats()
    return {**saved["stats"], **_disk(ctx.data_dir / "episodes"), "read_only": True,
            "figures": "saved by the writer at its close; the store has not changed since"}


def using(ctx: Context, saved: Mapping[str, Any] | None) -> None:
    """Let the health metrics of this status call read ``saved`` (None: stop)."""
    if saved is None:
        ctx.extras.pop(_EXTRA, None)
    else:
        ctx.extras[_EXTRA] = saved


def action_rows(ctx: Context, since: int, limit: int) -> list[ActionRow]:
    """The action episodes at or after ``since`` (most recent ``limit``) as rows: from the
    saved figures when a status call is using them and they cover the window, else read."""
    saved = ctx.extras.get(_EXTRA)
    if isinstance(saved, Mapping) and saved.get("complete") and since >= int(saved["from"]):
        return [(int(t), g, d) for t, g, d in saved["actions"] if t >= since]
    return _actions(ctx, since, limit)
