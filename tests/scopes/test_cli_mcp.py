"""``--scope`` on the CLI's method commands and on ``grimoire mcp``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grimoire.cli.app import main
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import ValidationError
from grimoire.grimoire import Grimoire
from grimoire.mcp.server import DirectoryCaller, in_scope


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A directory whose default scope and scope alpha each hold one episode (the model is
    the configured one: the CLI opens the directory with it)."""
    with Grimoire.open(tmp_path / "d", clock=FrozenClock()) as g:
        g.episode_write(text="gas spiked on the default pool")
        g.episode_write(text="gas spiked on the alpha pool", scope="alpha")
        g.entry_add(category="warning", scope="alpha",
                    content="Avoid swaps when gas spikes because the fees eat the gain")
        g.curator_run(scope="alpha")
        g.curator_run()
    return tmp_path / "d"


def test_cli_reads_the_scope_it_is_given(data: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    assert main(["retrieve", "gas spiked pool", "--data", str(data), "--scope", "alpha",
                 "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["scope"] == "alpha"
    assert "gas spiked on the alpha pool" in {i["content"] for i in answer["items"]}
    assert "gas spiked on the default pool" not in {i["content"] for i in answer["items"]}
    assert main(["playbook", "--data", str(data), "--scope", "alpha"]) == 0
    assert "fees eat the gain" in capsys.readouterr().out
    assert main(["playbook", "--data", str(data), "--raw"]) == 0
    assert "fees eat the gain" not in capsys.readouterr().out
    assert main(["status", "--data", str(data), "--scope", "never", "--json"]) == 1
    assert "scope 'never' holds nothing yet" in capsys.readouterr().err


def test_cli_refuses_scope_where_a_command_acts_on_the_whole_directory(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backup", "--data", str(data), str(tmp_path / "b"), "--scope", "alpha"]) == 1
    assert "acts on the whole data directory" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    with pytest.raises(SystemExit):  # a command without --scope: an unknown argument
        main(["restore", str(tmp_path / "b"), str(tmp_path / "r"), "--scope", "x"])
    assert main(["clade", "pull", str(tmp_path / "c"), "--data", str(data),
                 "--scope", "alpha"]) == 1
    assert "acts on the whole data directory" in capsys.readouterr().err
    assert main(["retrieve", "gas", "--data", str(data), "--scope", "../x"]) == 1
    assert "bad scope" in capsys.readouterr().err


def test_mcp_with_a_scope_calls_every_tool_in_it(data: Path) -> None:
    caller = DirectoryCaller(Config().replace(data_dir=str(data)))
    try:
        answer = in_scope(caller, "alpha")("retrieve", {"query": "gas spiked pool"})
        assert answer["scope"] == "alpha"
        assert {i["content"] for i in answer["items"]} >= {"gas spiked on the alpha pool"}
        assert in_scope(caller, None)("retrieve", {"query": "gas"})["scope"] == "default"
    finally:
        caller.close()
    with pytest.raises(ValidationError, match="bad scope"):
        in_scope(caller, "a/b")


def test_a_restore_applies_each_scopes_forgets_since_the_backup(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backup", "--data", str(data), str(tmp_path / "bak"), "--json"]) == 0
    capsys.readouterr()
    with Grimoire.open(data, clock=FrozenClock()) as g:
        gone = g.forget(matching="alpha pool", scope="alpha")
        assert gone["scope"] == "alpha"
    assert main(["restore", str(tmp_path / "bak"), str(tmp_path / "r"), "--json"]) == 0
    restored = json.loads(capsys.readouterr().out)
    assert restored["forgotten"]["scopes"]["alpha"]["applied"] == 1
    with Grimoire.open(tmp_path / "r", clock=FrozenClock(), read_only=True) as g:
        found = g.retrieve(query="gas spiked on the alpha pool", scope="alpha")
        assert "alpha pool" not in json.dumps(found["items"])
        assert g.retrieve(query="gas spiked on the default pool")["items"]
