"""The library prints nothing unless logging is configured: LanceDB's Rust core, which logs
to stderr outside Python's logging, is silenced when Grimoire is imported first (and heard
when the host asks for it with LANCEDB_LOG)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import sys
    import grimoire  # first, as any host of the library imports it
    import lancedb
    import pyarrow as pa
    table = lancedb.connect(sys.argv[1]).create_table(
        "t", data=pa.table({"text": ["swap fee spiked", "pool drained", "gas high"] * 20,
                            "seq": list(range(60))}))
    from lancedb.index import FTS
    table.create_index("text", config=FTS())
    # Selecting columns without _score makes lance's scanner log a deprecation warning.
    print(table.search("swap", query_type="fts").select(["seq"]).limit(3).to_arrow().num_rows)
""")


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    return subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                          text=True, check=True, env={**base, **env},
                          cwd=Path(__file__).resolve().parents[1])


def test_lancedb_rust_logs_are_off_unless_asked(tmp_path: Path) -> None:
    quiet = run(tmp_path / "a")
    assert quiet.stdout.strip() == "3" and quiet.stderr == ""
    asked = run(tmp_path / "b", LANCEDB_LOG="warn")
    assert "WARN" in asked.stderr  # the host that asks sees them: the test can fail
