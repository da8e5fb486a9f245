"""``Recorder``: what the SQLite and the LMDB redo recorders share.

Each store's recorder (``statements.StatementRedo``, ``lmdbops.LmdbRedo``) collects one
write transaction's operations its own way; this owns the rest, the same for both: the
log's sequence resumed from the store's mark at open (a record past the mark never
committed and is dropped), pruning what a backup covers, the forget marker, writing the
mark inside the transaction before the record is appended, and taking a record back when
the transaction rolls back. Must not know how a store writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grimoire.stores.redo.log import FORGET, RedoLog

__all__ = ["Recorder"]


class Recorder:
    """The log side of a redo recorder (see the module doc)."""

    def __init__(self, log: RedoLog, mark: int,
                 covered: Callable[[], int | None] = lambda: None) -> None:
        self.log = log
        self._covered = covered
        if log.last_seq > mark:
            log.drop_after(mark)
        self._next = max(mark, log.last_seq) + 1
        self._pruned = 0
        self.forgetting = False  # set around a forget's erase (``Redo.forgetting``)

    def _record(self, ops: list[Any] | None, set_mark: Callable[[int], Any]) -> int | None:
        """Mark the transaction and append its record (None if it wrote nothing); first
        drops the records a backup covers (``covered()``: its mark) if there are new ones.
        ``set_mark(seq)`` writes the mark inside the transaction being committed."""
        covered = self._covered()
        if covered is not None and covered > self._pruned:
            self.log.prune(covered)
            self._pruned = covered
        if not ops:
            return None
        if self.forgetting:
            ops = [[FORGET, ""], *ops]
        seq = self._next
        set_mark(seq)
        self.log.append(seq, ops)
        self._next = seq + 1
        return seq

    def _take_back(self, seq: int | None) -> None:
        """The transaction rolled back: its record, if appended, is taken back."""
        if seq is not None:
            self.log.undo(seq)
            self._next = seq

    def close(self) -> None:
        self.log.close()
