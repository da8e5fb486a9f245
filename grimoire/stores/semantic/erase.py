"""Erasing from the semantic store (``forget``): every row that holds a forgotten item.

Owns the look-ups that find what refers to forgotten episodes or entries, or quotes a
forgotten name (``needles``), and the one transaction that deletes them:

- entries (by id; the triggers take their vec0 vector and FTS5 postings with them),
  their quarantine records, evidence rows, PLAYBOOK.md listing rows;
- entity mentions, episode bookkeeping and causal edges of every forgotten item;
- evidence rows that counted a forgotten episode for any entry;
- retrieval-log rows whose items name a forgotten item or whose query quotes a needle;
- admission-log rows of a removed entry or whose candidate quotes a needle;
- curator audit rows of a removed entry or whose before / after quotes a needle.

Deleted FTS5 terms stay in the index's segments until they are merged, so the index is
rebuilt from the entries that remain ('rebuild'); the file itself is then rewritten
(``sqlite.scrub``). Ids travel as one JSON array parameter (``json_each``), so a
thousand ids are one statement each, not a thousand. Needles are matched
case-insensitively (ASCII case, as SQLite's ``lower``). Must not decide what to forget:
``grimoire.forget`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import apsw

__all__ = ["entries_citing", "entries_quoting", "erase_rows", "rows_referencing"]

_IDS = "(SELECT value FROM json_each(?))"


def _json(ids: Iterable[str]) -> str:
    return json.dumps(sorted(set(ids)))


def _quotes(column: str, needles: Sequence[str]) -> tuple[str, list[str]]:
    if not needles:
        return "0", []
    return (" OR ".join(f"instr(lower({column}), ?) > 0" for _ in needles),
            [n.lower() for n in needles])


def entries_quoting(conn: apsw.Connection, needles: Sequence[str]) -> list[str]:
    """Ids of the entries whose content, tags, source or claim quote a needle."""
    if not needles:
        return []
    parts, params = [], []
    for column in ("content", "tags", "source", "coalesce(claim, '')"):
        sql, args = _quotes(column, needles)
        parts.append(sql)
        params.extend(args)
    rows = conn.execute(f"SELECT id FROM grimoire_entries WHERE {' OR '.join(parts)}",
                        params).fetchall()
    return sorted(str(r[0]) for r in rows)


def entries_citing(conn: apsw.Connection, episode_ids: Iterable[str]) -> list[str]:
    """Ids of the entries that cite a forgotten episode (as a parent or as evidence)."""
    ids = _json(episode_ids)
    rows = conn.execute(
        f"SELECT e.id FROM grimoire_entries e WHERE EXISTS (SELECT 1 FROM "
        f"json_each(e.parent_episode_ids) j WHERE j.value IN {_IDS}) "
        f"UNION SELECT entry_id FROM entry_evidence WHERE episode_id IN {_IDS}",
        [ids, ids]).fetchall()
    return sorted(str(r[0]) for r in rows)


def rows_referencing(conn: apsw.Connection, item_ids: Iterable[str], entry_ids: Iterable[str],
                     needles: Sequence[str]) -> dict[str, list[Any]]:
    """The log rows to erase: ``retrieval`` ids, ``admission`` and ``delta`` row ids."""
    items, removed = _json(item_ids), _json(entry_ids)
    q_sql, q_args = _quotes("query", needles)
    i_sql, i_args = _quotes("items", needles)
    retrieval = conn.execute(
        f"SELECT retrieval_id FROM retrieval_log r WHERE EXISTS (SELECT 1 FROM "
        f"json_each(r.items) j WHERE json_extract(j.value, '$.id') IN {_IDS}) "
        f"OR {q_sql} OR {i_sql}", [items, *q_args, *i_args]).fetchall()
    c_sql, c_args = _quotes("candidate", needles)
    admission = conn.execute(
        f"SELECT id FROM admission_log WHERE entry_id IN {_IDS} OR {c_sql}",
        [removed, *c_args]).fetchall()
    b_sql, b_args = _quotes("coalesce(before_json, '')", needles)
    a_sql, a_args = _quotes("coalesce(after_json, '')", needles)
    deltas = conn.execute(
        f"SELECT id FROM curator_deltas WHERE entry_id IN {_IDS} OR {b_sql} OR {a_sql}",
        [removed, *b_args, *a_args]).fetchall()
    return {"retrieval": sorted(str(r[0]) for r in retrieval),
            "admission": sorted(int(str(r[0])) for r in admission),
            "delta": sorted(int(str(r[0])) for r in deltas)}


def erase_rows(conn: apsw.Connection, *, episode_ids: Iterable[str], entry_ids: Iterable[str],
               retrieval_ids: Iterable[str], admission_ids: Iterable[int],
               delta_ids: Iterable[int], mention_keys: Iterable[str] = ()) -> dict[str, int]:
    """Delete every row listed or referring to a forgotten item (inside the caller's
    transaction); returns rows deleted per table. Idempotent: a second call deletes 0."""
    episodes, entries = _json(episode_ids), _json(entry_ids)
    items = _json([*json.loads(episodes), *json.loads(entries)])
    out: dict[str, int] = {}

    def run(name: str, sql: str, params: Sequence[Any]) -> None:
        conn.execute(sql, params)
        out[name] = conn.changes()  # this statement's rows, not its triggers' (FTS, vec0)

    run("quarantined_entries", f"DELETE FROM quarantined_entries WHERE entry_id IN {_IDS}",
        [entries])
    run("playbook_history", f"DELETE FROM playbook_history WHERE entry_id IN {_IDS}",
        [entries])
    run("entry_evidence", f"DELETE FROM entry_evidence WHERE entry_id IN {_IDS} "
        f"OR episode_id IN {_IDS}", [entries, episodes])
    run("entity_mentions", f"DELETE FROM entity_mentions WHERE item_id IN {_IDS} "
        f"OR entity IN {_IDS}", [items, _json(mention_keys)])
    run("episode_state", f"DELETE FROM episode_state WHERE episode_id IN {_IDS}", [episodes])
    run("causal_edges", f"DELETE FROM causal_edges WHERE cause_id IN {_IDS} "
        f"OR effect_id IN {_IDS}", [items, items])
    run("retrieval_log", f"DELETE FROM retrieval_log WHERE retrieval_id IN {_IDS}",
        [_json(retrieval_ids)])
    run("admission_log", f"DELETE FROM admission_log WHERE id IN {_IDS}",
        [json.dumps(sorted(set(admission_ids)))])
    run("curator_deltas", f"DELETE FROM curator_deltas WHERE id IN {_IDS}",
        [json.dumps(sorted(set(delta_ids)))])
    run("grimoire_entries", f"DELETE FROM grimoire_entries WHERE id IN {_IDS}", [entries])
    # Deleted terms linger in FTS5's segments until a merge: rebuild from what remains.
    conn.execute("INSERT INTO entries_fts (entries_fts) VALUES ('rebuild')")
    return out
