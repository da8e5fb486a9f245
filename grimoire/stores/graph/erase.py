"""Erasing triples from the graph (``forget``): found by what they are about, deleted whole.

Owns the scan that finds the triples about a forgotten subject (an entity, a name quoted
in an entity id or a string object, or a forgotten source episode) and their removal in
one write transaction: the current record, every superseded version in ``history``, the
index entries of the current version (superseded versions have none) and the
(subject, predicate) head. Unlike ``invalidate``, nothing of the triple is kept: the
bi-temporal history of a forgotten subject is forgotten too. The file still holds the
freed pages' bytes until ``GraphEnv.rewrite``. Must not decide what to forget.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from grimoire.records.graph import EntityRef
from grimoire.stores.graph import codec
from grimoire.stores.graph.versions import EdgeChange

__all__ = ["erase_triples", "triples_about"]

# by_subject values: valid_from (8) | valid_to (8) | id (16) | len (1) | predicate | target
_SPAN = 32


def _quotes(text: str, needles: Sequence[str]) -> bool:
    low = text.lower()
    return any(n in low for n in needles)


def triples_about(txn: Any, dbs: dict[str, Any], *, entities: Collection[EntityRef],
                  needles: Sequence[str], source_episodes: Collection[str]) -> list[str]:
    """Ids of the triples whose subject or object is one of ``entities``, whose subject id,
    object entity id or string object quotes a needle (case-insensitive), or whose source
    episode is forgotten. One pass over the current records."""
    keys = {codec.entity_key(e) for e in entities}
    low = [n.lower() for n in needles if n]
    found: list[str] = []
    for _raw_id, raw in txn.cursor(dbs["triples"]):
        triple = codec.decode_record(raw).triple
        target = triple.object.as_entity
        value = triple.object.value
        if (codec.entity_key(triple.subject) in keys
                or (target is not None and codec.entity_key(target) in keys)
                or (low and (_quotes(triple.subject.id, low)
                             or (target is not None and _quotes(target.id, low))
                             or (isinstance(value, str) and _quotes(value, low))))
                or (triple.source_episode is not None
                    and triple.source_episode in source_episodes)):
            found.append(triple.id)
    return found


def _predicates_left(txn: Any, dbs: dict[str, Any], subject: bytes) -> set[bytes]:
    cursor = txn.cursor(dbs["by_subject"])
    out: set[bytes] = set()
    if cursor.set_key(subject):
        for value in cursor.iternext_dup(keys=False, values=True):
            size = value[_SPAN]
            out.add(bytes(value[_SPAN + 1:_SPAN + 1 + size]))
    return out


def erase_triples(txn: Any, dbs: dict[str, Any], triple_ids: Iterable[str],
                  queue: Callable[[EdgeChange], None]) -> int:
    """Delete every version and index entry of these triples (absent ones are skipped);
    returns how many were there."""
    erased = 0
    heads: dict[bytes, set[bytes]] = {}
    for triple_id in triple_ids:
        raw_id = codec.id_bytes(triple_id)
        raw = txn.get(raw_id, db=dbs["triples"])
        if raw is None:
            continue
        stored = codec.decode_record(raw)
        triple = stored.triple
        for seq in range(stored.seq):
            txn.delete(codec.history_key(raw_id, seq), db=dbs["history"])
        for entry in codec.index_entries(triple):
            if txn.delete(entry.key, entry.value, db=dbs[entry.db]) and entry.db == "by_object":
                queue(EdgeChange(False, entry.key, entry.value))
        txn.delete(raw_id, db=dbs["triples"])
        subject = codec.entity_key(triple.subject)
        heads.setdefault(subject, set()).add(triple.predicate.encode())
        erased += 1
    for subject, predicates in heads.items():
        left = _predicates_left(txn, dbs, subject)
        for predicate in predicates:
            key = subject + b"\x00" + predicate
            raw_head = txn.get(key, db=dbs["heads"])
            if raw_head is None:
                continue
            if predicate not in left:
                txn.delete(key, db=dbs["heads"])
                continue
            active, frontier = codec.decode_head(raw_head)
            if active is not None and txn.get(active, db=dbs["triples"]) is None:
                txn.put(key, codec.encode_head(None, frontier), db=dbs["heads"])
    return erased
