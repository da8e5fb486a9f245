"""Redo logs: a second durable copy of every acknowledged write until a backup covers it.

A corrupted store file must not take with it the writes acknowledged since the last
backup. Each store keeps them twice:

- episodes: the journal (``episodes_journal.sqlite``) keeps each row after its flush to
  LanceDB, in its ``kept`` table, moved there in the flush's own commit (no extra fsync);
- the semantic store (SQLite): ``redo/semantic.log``, the write statements of each
  committed transaction (``statements``);
- the graph (LMDB): ``redo/graph.log``, the puts and deletes of each committed write
  (``lmdbops``); what both recorders share (sequence, pruning, the forget marker) is
  ``recorder``.

A record is appended and fdatasync'd before its transaction commits (a failed commit
takes it back; one the process died before is dropped at the next open), and each store
file records the number of the last record it holds, so a copy of it (a backup) says which
records come after it. ``grimoire backup`` writes, once the backup is complete, the marks
of its copies into ``redo/covered.json``; the writers then drop what it covers (the
journal's ``kept`` rows at the next flush, the logs at the next write). With no backup yet
nothing is dropped: a log that began with its store (its header says ``fresh``) rebuilds
that store alone. ``grimoire repair`` restores the backup, then replays the logs
(``replay``). ``forget`` removes forgotten ids and texts from the logs (``RedoLog.scrub``)
and the journal's rows.

``attach`` wires the logs to a writable open (``Grimoire.open``); read-only opens have
none. Must not know what an entry or a triple is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grimoire.stores.redo.lmdbops import LmdbRedo
from grimoire.stores.redo.log import Redactor, RedoLog
from grimoire.stores.redo.marks import REDO_DIR, covered
from grimoire.stores.redo.statements import StatementRedo

__all__ = ["REDO_DIR", "Redo", "attach", "covered", "fresh_stores"]

_FILES = {"semantic": "semantic.sqlite", "graph": "graph.lmdb/data.mdb"}


def fresh_stores(root: Path) -> dict[str, bool]:
    """Which stores do not exist yet (called before they are opened: a log that starts
    with its store covers all of it)."""
    return {name: not (root / file).exists() for name, file in _FILES.items()}


@dataclass
class Redo:
    semantic: StatementRedo
    graph: LmdbRedo

    def logs(self) -> dict[str, RedoLog]:
        return {"semantic": self.semantic.log, "graph": self.graph.log}

    def scrub(self, ids: list[bytes], texts: list[bytes]) -> dict[str, int]:
        """Forgotten ids and texts out of both logs (``forget``, ``log.Redactor``); ops
        changed per log."""
        redact = Redactor(ids, texts)
        return {name: log.scrub(redact) for name, log in self.logs().items()}

    @contextmanager
    def forgetting(self) -> Iterator[None]:
        """The writes inside are a forget's erase: their records are marked, and ``scrub``
        keeps only the mark (one writer job: nothing else writes meanwhile)."""
        self.semantic.forgetting = self.graph.forgetting = True
        try:
            yield
        finally:
            self.semantic.forgetting = self.graph.forgetting = False

    def close(self) -> None:
        self.semantic.close()
        self.graph.close()


def attach(root: Path, connections: Any, env: Any, fresh: dict[str, bool]) -> Redo:
    """Open the logs of the data directory ``root`` and hand them to the semantic store's
    ``Connections`` and the graph's ``GraphEnv`` (their ``redo`` attribute)."""
    logs = root / REDO_DIR
    semantic = StatementRedo(connections.writer, RedoLog(
        logs / "semantic.log", store="semantic", fresh=fresh.get("semantic", False)),
        lambda: covered(root).get("semantic"))
    try:
        graph = LmdbRedo(env, RedoLog(logs / "graph.log", store="graph",
                                      fresh=fresh.get("graph", False)),
                         lambda: covered(root).get("graph"))
    except BaseException:
        semantic.close()
        raise
    connections.redo = semantic
    env.redo = graph
    return Redo(semantic, graph)
