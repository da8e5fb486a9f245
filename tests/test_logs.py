"""A library prints nothing unless its host configures logging; the daemon configures it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import logging, sys
from grimoire import Grimoire
if sys.argv[2] == "configured":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(message)s")
with Grimoire.open(sys.argv[1]) as g:
    g.episode_write(text="swap 2 ETH", type="action", outcome="positive")
    g.retrieve(query="gas is cheap", k=5)
    g.curator_run()
"""


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / mode), mode],
                          capture_output=True, text=True, timeout=300, check=True)


def test_a_program_that_opens_grimoire_sees_no_output(tmp_path: Path) -> None:
    proc = _run(tmp_path, "silent")
    assert (proc.stdout, proc.stderr) == ("", "")


def test_a_host_that_configures_logging_gets_grimoires_records(tmp_path: Path) -> None:
    lines = _run(tmp_path, "configured").stderr.splitlines()
    names = {line.split("|", 1)[0] for line in lines}
    assert {"grimoire.grimoire", "curator.cycle.run"} <= names, names
