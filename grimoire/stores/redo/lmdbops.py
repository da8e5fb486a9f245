"""The graph store's redo: every put and delete of a committed LMDB write, replayable.

``GraphEnv.write`` hands ``LmdbRedo.recording(txn)`` to its action instead of the bare
transaction: a stand-in that records each ``put`` and ``delete`` (database name, key,
value, flags) before doing it, and refuses the other mutators (``replace``, ``pop``,
``drop``), so nothing changes the file unrecorded. Before the commit ``before_commit``
puts the record's number under ``redo_seq`` in ``meta`` (same transaction) and appends
the record (one fdatasync); a commit that fails takes it back. An action that runs again
(a full map) records again from scratch. At open, records past the file's mark are
dropped (appended, never committed).

``replay`` applies the records past a copy's mark, each in one write transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb

from grimoire.errors import StoreError
from grimoire.stores.graph.codec import read_u64
from grimoire.stores.redo.log import FORGET, RedoLog
from grimoire.stores.redo.recorder import Recorder

__all__ = ["LmdbRedo", "replay"]

MARK_KEY = b"redo_seq"


class _Recording:
    """A write transaction that records its puts and deletes into ``ops``."""

    def __init__(self, txn: Any, names: dict[int, str], ops: list[Any]) -> None:
        self._txn, self._names, self._ops = txn, names, ops

    def _name(self, db: Any) -> str:
        try:
            return self._names[id(db)]
        except KeyError:
            raise StoreError("graph redo: a write to a database the store did not open"
                             ) from None

    def put(self, key: bytes, value: bytes, *, dupdata: bool = True, overwrite: bool = True,
            append: bool = False, db: Any = None) -> bool:
        self._ops.append(["p", self._name(db), bytes(key), bytes(value),
                          [dupdata, overwrite]])
        return bool(self._txn.put(key, value, dupdata=dupdata, overwrite=overwrite,
                                  append=append, db=db))

    def delete(self, key: bytes, value: bytes = b"", *, db: Any = None) -> bool:
        self._ops.append(["d", self._name(db), bytes(key), bytes(value)])
        return bool(self._txn.delete(key, value, db=db))

    def _unrecorded(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError("graph redo: only put and delete may change the store")

    replace = pop = drop = _unrecorded

    def __getattr__(self, name: str) -> Any:  # reads: get, cursor, stat, ...
        return getattr(self._txn, name)


class LmdbRedo(Recorder):
    """See the module doc. Used by ``GraphEnv.write`` under its writer lock."""

    def __init__(self, env: Any, log: RedoLog,
                 covered: Callable[[], int | None] = lambda: None) -> None:
        self._env = env
        with env.txn() as txn:
            mark = read_u64(txn.get(MARK_KEY, db=env.db["meta"]))
        super().__init__(log, mark, covered)
        self._ops: list[Any] = []

    def recording(self, txn: Any) -> _Recording:
        self._ops = []
        names = {id(handle): name for name, handle in self._env.db.items()}
        return _Recording(txn, names, self._ops)

    def before_commit(self, txn: Any) -> int | None:
        """Mark the write and append its record (None if it changed nothing); first drops
        the records a backup covers (``covered()``) if there are new ones."""
        ops, self._ops = self._ops, []
        meta = self._env.db["meta"]
        return self._record(ops, lambda seq: txn.put(MARK_KEY, seq.to_bytes(8, "big"),
                                                     db=meta))

    def abort(self, seq: int | None) -> None:
        """The transaction rolled back: stop recording, take back its record if appended."""
        self._ops = []
        self._take_back(seq)


def replay(path: Path, records: list[tuple[int, list[Any]]]) -> dict[str, Any]:
    """Apply to the LMDB environment at ``path`` the ``records`` past its mark."""
    from grimoire.stores.graph.env import DEFAULT_MAX_MAP_SIZE, GraphEnv

    size = (path / "data.mdb").stat().st_size if (path / "data.mdb").exists() else 0
    need = sum(len(op[2]) + len(op[3]) for _, ops in records for op in ops)
    env = GraphEnv.open(path, clock=lambda: 0, max_map_size=DEFAULT_MAX_MAP_SIZE,
                        map_size=min(DEFAULT_MAX_MAP_SIZE, max(1 << 30, 4 * (size + need))))
    try:
        with env.txn() as txn:
            mark = read_u64(txn.get(MARK_KEY, db=env.db["meta"]))
        todo = [(seq, ops) for seq, ops in records if seq > mark]
        if todo and todo[0][0] != mark + 1:
            raise StoreError(f"{path.name}: the redo log starts at record {todo[0][0]} but "
                             f"this copy ends at {mark}: the writes between are only in a "
                             "newer backup")
        for seq, ops in todo:
            with env.txn(write=True) as txn:
                for op in ops:
                    if op[0] == FORGET:
                        continue
                    db = env.db[op[1]]
                    if op[0] == "p":
                        dupdata, overwrite = op[4]
                        txn.put(op[2], op[3], dupdata=dupdata, overwrite=overwrite, db=db)
                    else:
                        txn.delete(op[2], op[3], db=db)
                txn.put(MARK_KEY, seq.to_bytes(8, "big"), db=env.db["meta"])
    except lmdb.Error as exc:
        raise StoreError(f"graph redo replay failed: {exc}") from exc
    finally:
        env.close()
    return {"records": len(todo), "from_mark": mark}
