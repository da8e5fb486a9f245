"""The redo log file on its own: its codec, its frames, and ``scrub``'s redaction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grimoire.errors import StoreError
from grimoire.stores.redo.log import (
    FORGET,
    Redactor,
    RedoLog,
    _frame,
    decode,
    encode,
    read_records,
)


def test_the_codec_round_trips_what_sqlite_and_lmdb_bind() -> None:
    value = [None, True, False, -(1 << 63), 1 << 70, 2.5, "Zorblax ✓", b"\x00\xffraw",
             {"k": [1, "v"]}, ("t", 1)]
    got = decode(encode(value))
    assert got[:9] == value[:9] and got[9] == ["t", 1]
    vector = np.arange(4, dtype="<f4")  # a blob bound as a buffer
    assert decode(encode([vector])) == [vector.tobytes()]
    assert b"Zorblax" in encode(["Zorblax"])  # text is stored as it is: a byte scan sees it


def test_a_torn_tail_ends_the_log_and_the_next_open_cuts_it(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    log = RedoLog(path, store="x", fresh=True)
    log.append(1, [["q", "INSERT INTO t VALUES(?)", [1]]])
    log.append(2, [["q", "INSERT INTO t VALUES(?)", [2]]])
    log.close()
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x40\x00\x00\x00\x00\x00\x00\x00half a frame")
    header, records = read_records(path)
    assert header == {"store": "x", "fresh": True} and [s for s, _ in records] == [1, 2]
    log = RedoLog(path, store="x", fresh=True)
    assert path.stat().st_size == whole and log.last_seq == 2
    log.append(3, [["q", "DELETE FROM t", None]])
    log.close()
    assert [s for s, _ in read_records(path)[1]] == [1, 2, 3]


def test_scrub_replaces_the_same_value_by_the_same_filler_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    log = RedoLog(path, store="x", fresh=True)
    doc = json.dumps({"episodes": ["ep-forgotten", "ep-kept"], "n": 2})
    log.append(1, [["q", "INSERT INTO e(id, text, doc) VALUES(?, ?, ?)",
                    ["ep-forgotten", "Zorblax swapped", doc]],
                   ["q", "INSERT INTO e(id, text) VALUES(?, ?)", ["ep-kept", "bob swapped"]],
                   ["q", "INSERT INTO n(note) VALUES(?)", ["ask ZORBLAX later"]]])
    log.append(2, [[FORGET, ""], ["q", "DELETE FROM e WHERE id = ?", ["ep-forgotten"]]])
    log.append(3, [["q", "UPDATE e SET n = ? WHERE id = ?", [1, "ep-forgotten"]]])
    assert log.scrub(Redactor([b"ep-forgotten"], [b"zorblax"])) > 0
    log.close()
    assert b"zorblax" not in path.read_bytes().lower()
    assert b"ep-forgotten" not in path.read_bytes()
    (_, first), (_, second), (_, third) = read_records(path)[1]
    insert, kept, note = first
    assert kept == ["q", "INSERT INTO e(id, text) VALUES(?, ?)", ["ep-kept", "bob swapped"]]
    assert insert[1] == "INSERT INTO e(id, text, doc) VALUES(?, ?, ?)"  # the SQL stays
    filler = insert[2][0]
    assert len(filler) == len("ep-forgotten") and third[0][2][1] == filler  # same filler
    assert json.loads(insert[2][2])["n"] == 2  # a JSON document stays one
    assert note[2][0].startswith("ask ") and note[2][0].endswith(" later")  # text in place
    assert second == [[FORGET, ""]]  # the forget's own erase: its tombstone redoes it


def test_scrub_replaces_a_later_delete_of_a_key_an_op_about_a_forgotten_id_wrote(
        tmp_path: Path) -> None:
    """The delete holds neither the id nor a forgotten text, only the key (a name the
    selector did not give): the first pass learns the key, the second replaces it, in a
    record of its own too; the same key under another database stays."""
    path = tmp_path / "g.log"
    log = RedoLog(path, store="graph", fresh=True)
    log.append(1, [["p", "heads", b"head:Vexmoor", b'{"triple": "tr-forgotten"}'],
                   ["p", "heads", b"head:Other", b'{"triple": "tr-kept"}']])
    log.append(2, [["p", "names", b"head:Vexmoor", b"1"]])
    log.append(3, [["d", "heads", b"head:Vexmoor", b""], ["d", "heads", b"head:Other", b""]])
    assert log.scrub(Redactor([b"tr-forgotten"], [])) == 2
    log.close()
    (_, first), (_, second), (_, third) = read_records(path)[1]
    put = first[0]
    assert put[2] != b"head:Vexmoor" and b"tr-forgotten" not in put[3]
    assert first[1] == ["p", "heads", b"head:Other", b'{"triple": "tr-kept"}']
    assert second == [["p", "names", b"head:Vexmoor", b"1"]]  # not a delete, another db
    assert third[0] == ["d", "heads", put[2], b""]  # the same filler as the put's key
    assert third[1] == ["d", "heads", b"head:Other", b""]


def test_scrub_refuses_a_log_whose_ops_are_not_encoded_one_by_one(tmp_path: Path) -> None:
    """A whole frame in another layout is not taken for a torn tail (nothing dropped)."""
    path = tmp_path / "x.log"
    log = RedoLog(path, store="x", fresh=True)
    log.append(1, [["q", "INSERT INTO e(id) VALUES(?)", ["ep-forgotten"]]])
    log.close()
    with open(path, "ab") as f:
        f.write(_frame([2, [["q", "INSERT INTO e(id) VALUES(?)", ["ep-forgotten"]]]]))
    before = path.read_bytes()
    log = RedoLog(path, store="x", fresh=True)
    with pytest.raises(StoreError, match="not scrubbed"):
        log.scrub(Redactor([b"ep-forgotten"], []))
    log.close()
    assert path.read_bytes() == before
