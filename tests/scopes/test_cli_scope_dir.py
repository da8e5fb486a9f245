"""``--scope NAME`` on the commands that act on one data directory's stores (``check``,
``repair``, ``export``, ``import``, ``report``, ``testament``): they act on
``DATA/scopes/NAME``, through the installed ``grimoire`` as an operator runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire

ALPHA = "Avoid swaps when gas spikes because the fees eat the gain"
DEFAULT = "Prefer limit orders when the book is thin because slippage grows"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """The default scope and scope alpha, each with one entry of its own (the configured
    model: the CLI opens the directory with it)."""
    with Grimoire.open(tmp_path / "d", clock=FrozenClock()) as g:
        g.episode_write(text="gas spiked on the alpha pool", scope="alpha")
        g.entry_add(category="warning", scope="alpha", content=ALPHA)
        g.entry_add(category="heuristic", content=DEFAULT)
    return tmp_path / "d"


def grimoire(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "grimoire"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300,
                          check=False)


def _text(root: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace")
                   for p in sorted(root.rglob("*")) if p.is_file())


def test_each_command_acts_on_the_scope_it_is_given(data: Path, tmp_path: Path) -> None:
    got = grimoire("check", "--data", str(data), "--scope", "alpha", "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["data"] == str(data / "scopes" / "alpha")

    got = grimoire("export", "--data", str(data), "--scope", "alpha", str(tmp_path / "x"),
                   "--min-confidence", "0")
    assert got.returncode == 0, got.stderr
    assert ALPHA in _text(tmp_path / "x") and DEFAULT not in _text(tmp_path / "x")
    got = grimoire("export", "--data", str(data), str(tmp_path / "y"), "--min-confidence", "0")
    assert got.returncode == 0, got.stderr
    assert DEFAULT in _text(tmp_path / "y") and ALPHA not in _text(tmp_path / "y")

    got = grimoire("import", "--data", str(data), "--scope", "alpha", str(tmp_path / "y"),
                   "--provenance", "predecessor", "--json")
    assert got.returncode == 0, got.stderr
    with Grimoire.open(data, clock=FrozenClock(), read_only=True) as g:
        alpha = {e["content"] for e in g.entry_list(scope="alpha", limit=50)["entries"]}
        mine = {e["content"] for e in g.entry_list(limit=50)["entries"]}
    assert DEFAULT in alpha and ALPHA in alpha and ALPHA not in mine

    report = tmp_path / "r.html"
    got = grimoire("report", "--data", str(data), "--scope", "alpha", "--out", str(report))
    assert got.returncode == 0, got.stderr and report.is_file()

    got = grimoire("repair", "--data", str(data), "--scope", "alpha", "--into",
                   str(tmp_path / "fixed"), "--json")
    assert got.returncode == 0, got.stderr
    assert ALPHA in (tmp_path / "fixed" / "semantic.sqlite").read_bytes().decode("latin-1")

    got = grimoire("testament", "--data", str(data), "--scope", "alpha",
                   str(tmp_path / "t"), "--json")
    assert got.returncode == 0, got.stderr
    assert '"origin": "alpha"' in _text(tmp_path / "t")  # the scope's directory's name


def test_an_unknown_or_bad_scope_is_a_clear_error(data: Path, tmp_path: Path) -> None:
    got = grimoire("check", "--data", str(data), "--scope", "never")
    assert got.returncode == 1 and "Traceback" not in got.stderr
    assert "scope 'never' holds nothing yet" in got.stderr and "default, alpha" in got.stderr
    assert not (data / "scopes" / "never").exists()
    got = grimoire("export", "--data", str(data), "--scope", "../alpha", str(tmp_path / "x"))
    assert got.returncode == 1 and "bad scope" in got.stderr and not (tmp_path / "x").exists()
    got = grimoire("repair", "--data", str(data), "--scope", "alpha", "--backup",
                   str(tmp_path / "b"), "--into", str(tmp_path / "fixed"))
    assert got.returncode == 1 and "--scope with --backup" in got.stderr
    assert not (tmp_path / "fixed").exists()
