"""The Clade table records whether each row was published from simulated or real memory,
and ``clade pull`` never mixes the two unless asked (--allow-mixed); rows without a record
(an old table) are of unknown kind and refused the same way. Through the installed
``grimoire``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import lancedb
import pyarrow as pa

from grimoire.portable.clade import TABLE
from tests.portable.test_marker_carried import WARNING, _kind, _ok, _store


def test_pull_refuses_rows_of_the_other_kind_unless_asked(tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    _store(tmp_path / "demo", "sim")
    sent = _ok("clade", "publish", "--json", "--data", str(tmp_path / "demo"), uri)
    assert sent["published"] == 1
    rows = lancedb.connect(uri).open_table(TABLE).to_arrow().to_pylist()
    assert [r["memory"] for r in rows] == ["simulated"]

    live = tmp_path / "live"
    _store(live, "none", warning=None)
    refused = _ok("clade", "pull", "--json", "--data", str(live), uri)
    assert refused["foreign"] == 0 and refused["refused_mixed"] == 1
    assert "--allow-mixed" in str(refused["note"])
    assert "mixed_in" not in _kind(live)
    # another simulated agent takes it: same kind, nothing refused
    _store(tmp_path / "twin", "sim", warning=None)
    same = _ok("clade", "pull", "--json", "--data", str(tmp_path / "twin"), uri)
    assert same["foreign"] == 1 and same["refused_mixed"] == 0

    asked = _ok("clade", "pull", "--json", "--allow-mixed", "--data", str(live), uri)
    assert asked["foreign"] == 1 and asked["refused_mixed"] == 0
    mixed = _kind(live)["mixed_in"]
    assert isinstance(mixed, list) and [m["kind"] for m in mixed] == ["simulated"]


def test_rows_of_an_old_table_without_the_marker_are_refused_unless_asked(
        tmp_path: Path) -> None:
    uri = str(tmp_path / "clade")
    old = pa.schema([
        ("key", pa.string()), ("origin", pa.string()), ("content_hash", pa.string()),
        ("category", pa.string()), ("content", pa.string()), ("confidence", pa.float64()),
        ("decay_class", pa.string()), ("tags", pa.list_(pa.string())),
        ("strategy", pa.string()), ("regime", pa.string()), ("is_bloodstain", pa.bool_()),
        ("validated", pa.int64()), ("contradicted", pa.int64()), ("episodes", pa.int64()),
        ("published_at", pa.int64()),
    ])
    row = {"key": hashlib.sha256(b"elder\n1").hexdigest(), "origin": "elder",
           "content_hash": hashlib.sha256(f"warning\n{WARNING}".encode()).hexdigest(),
           "category": "warning", "content": WARNING, "confidence": 0.9,
           "decay_class": "tactical", "tags": [], "strategy": None, "regime": None,
           "is_bloodstain": False, "validated": 0, "contradicted": 0, "episodes": 1,
           "published_at": 1}
    lancedb.connect(uri).create_table(TABLE, data=pa.Table.from_pylist([row], schema=old))

    live = tmp_path / "live"
    _store(live, "none", warning=None)
    refused = _ok("clade", "pull", "--json", "--data", str(live), uri)
    assert refused["foreign"] == 0 and refused["refused_mixed"] == 1
    # the table now has the column: this agent's own rows say their kind
    _store(tmp_path / "other", "none")
    assert _ok("clade", "publish", "--json", "--data", str(tmp_path / "other"),
               uri)["published"] == 1
    kinds = {r["origin"]: r["memory"] for r in
             lancedb.connect(uri).open_table(TABLE).to_arrow().to_pylist()}
    assert kinds == {"elder": None, "other": "real"}
    assert _ok("clade", "pull", "--json", "--data", str(live), uri)["foreign"] == 1
    asked = _ok("clade", "pull", "--json", "--allow-mixed", "--data", str(live), uri)
    assert asked["foreign"] == 1
    mixed = _kind(live)["mixed_in"]
    assert isinstance(mixed, list) and [m["kind"] for m in mixed] == ["unmarked"]
