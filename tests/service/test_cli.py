"""The ``grimoire`` command line: help everywhere, config, and each command against a server."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from grimoire.cli import build_parser, main
from grimoire.clock import FrozenClock
from grimoire.config import Config, config_items
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.api import METHODS
from tests.service.daemon_support import ServerThread, short_dir


def _walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action,
                                                                       argparse.ArgumentParser]]:
    for action in parser._actions:
        yield path, action, parser
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")


def test_every_command_subcommand_and_argument_has_help() -> None:
    parser = build_parser()
    commands = 0
    for path, action, owner in _walk(parser, "grimoire"):
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest: choice.help for choice in action._choices_actions}
            assert set(helped) == set(action.choices), path
            for name, text in helped.items():
                assert text and len(text) > 5, f"{path} {name} has no help"
                assert action.choices[name].description, f"{path} {name} has no description"
                commands += 1
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            assert action.help and action.help != argparse.SUPPRESS, (
                f"{path}: argument {action.option_strings or action.dest} has no help")
        assert owner.description or owner is parser, path
    names = {path.split(" ", 1)[1] for path, _a, _o in _walk(parser, "grimoire") if " " in path}
    assert names >= {"run", "status", "health", "write", "retrieve", "playbook", "explain",
                     "curate", "call", "kg", "kg assert", "kg at", "kg known-at",
                     "kg neighbors", "kg invalidate", "config", "config show"}
    assert commands == len(names)


def test_top_level_help_lists_every_method(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in METHODS:
        assert name in out


def test_config_show_prints_every_setting_with_its_help(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    for key, _value, help_text in config_items(Config()):
        assert f"{key} = " in out and help_text in out


def test_config_show_merges_yaml_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "grimoire.yaml"
    cfg.write_text("daemon:\n  speed: 10\n  feed: none\nembedding:\n  model: hash-384\n")
    monkeypatch.setenv("GRIMOIRE_DAEMON__SPEED", "25")
    assert main(["config", "show", "--json", "--config", str(cfg), "--data", "/srv/g"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["daemon.speed"] == 25.0  # the environment overrides the file
    assert shown["daemon.feed"] == "none" and shown["embedding.model"] == "hash-384"
    assert shown["data_dir"] == "/srv/g"


def test_bad_config_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("daemon:\n  sped: 10\n")
    assert main(["config", "show", "--config", str(cfg)]) == 2
    assert "unknown config key(s) in [daemon]: sped" in capsys.readouterr().err


def test_commands_without_a_daemon_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    assert main(["status", "--data", str(tmp_path)]) == 1
    assert "is `grimoire run` running" in capsys.readouterr().err
    assert main(["playbook", "--data", str(tmp_path)]) == 1
    assert "holds no Grimoire data: check --data DIR" in capsys.readouterr().err
    (tmp_path / "PLAYBOOK.md").write_text("# Playbook\n")
    assert main(["playbook", "--data", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "# Playbook\n"


@pytest.fixture
def served() -> Iterator[tuple[ServerThread, Grimoire]]:
    # capture_logs keeps the server thread's log lines out of the CLI's captured stdout.
    with structlog.testing.capture_logs(), short_dir() as root, Grimoire.open(
            root / "data", clock=FrozenClock(), embedder=HashEmbedder()) as g:
        st = ServerThread(g, root / "data" / "grimoire.sock", data_dir=root / "data").start()
        yield st, g
        st.stop()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_commands_against_a_running_server(served: tuple[ServerThread, Grimoire],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    st, g = served
    sock = ["--socket", str(st.path)]
    code, out, _ = _run(capsys, "write", "gas hit 80 gwei", "--type", "observation",
                        "--metric", "gas_gwei=80", "--strategy", "s1", "--ref", "0xabc", "--json",
                        *sock)
    assert code == 0
    ep_id = json.loads(out)["id"]
    stored = g.episode_get(ep_id)
    assert stored["metrics"] == {"gas_gwei": 80.0} and stored["ref"] == "0xabc"

    code, out, _ = _run(capsys, "call", "episode.get", json.dumps({"id": ep_id}), "--json",
                        *sock)
    assert code == 0 and json.loads(out)["text"] == "gas hit 80 gwei"
    code, out, _ = _run(capsys, "health", "--json", *sock)
    assert json.loads(out)["ok"] is True
    code, out, _ = _run(capsys, "status", "--json", *sock)
    assert json.loads(out)["episodes"]["rows"] == 1

    code, out, _ = _run(capsys, "kg", "assert", "pool", "0xp", "oracle_dependency",
                        '{"kind": "oracle", "id": "chainlink"}', "100", "--json", *sock)
    assert code == 0
    triple = json.loads(out)["id"]
    code, out, _ = _run(capsys, "kg", "at", "pool", "0xp", "150", "--json", *sock)
    assert [t["id"] for t in json.loads(out)["triples"]] == [triple]
    code, out, _ = _run(capsys, "kg", "known-at", "pool", "0xp", str(2**41), "--json", *sock)
    assert [t["id"] for t in json.loads(out)["triples"]] == [triple]
    code, out, _ = _run(capsys, "kg", "neighbors", "pool", "0xp", "150", "--max-hops", "1",
                        "--json", *sock)
    assert json.loads(out)["neighbors"][0]["entity"]["id"] == "chainlink"
    code, out, _ = _run(capsys, "kg", "invalidate", triple, "200", "--json", *sock)
    assert code == 0 and json.loads(out)["triple"]["valid_to"] == 200

    added = g.entry_add(category="warning", content="Avoid swaps on WETH/USDC when gas "
                        "is above 80 gwei: 7 of 9 reverted")
    code, out, _ = _run(capsys, "explain", added["id"][:8], *sock)
    assert code == 0 and added["id"] in out and "Avoid swaps on WETH/USDC" in out
    assert "admitted" in out and not out.lstrip().startswith("{")  # the owner's text
    code, out, _ = _run(capsys, "explain", added["id"][:8], "--json", *sock)
    assert code == 0 and json.loads(out)["entry"]["id"] == added["id"]


def test_cli_errors_are_messages_and_exit_codes(served: tuple[ServerThread, Grimoire],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    st, g = served
    sock = ["--socket", str(st.path)]
    code, _, err = _run(capsys, "write", "x", "--metric", "gas", *sock)
    assert code == 1 and "metric: expected NAME=NUMBER" in err
    code, _, err = _run(capsys, "call", "episode.get", "{not json", *sock)
    assert code == 1 and "params: not valid JSON" in err
    code, _, err = _run(capsys, "call", "episode.get", "[1]", *sock)
    assert code == 1 and "must be a JSON object" in err
    code, _, err = _run(capsys, "call", "episode.get", '{"id": "nope"}', *sock)
    assert code == 1 and "NotFoundError: no episode with id nope" in err
    code, _, err = _run(capsys, "call", "no.such", *sock)
    assert code == 1 and "method not found" in err
    code, _, err = _run(capsys, "write", "", *sock)
    assert code == 1 and "ValidationError" in err and "text" in err
    assert g.context.episodes.count() == 0
    code, _, err = _run(capsys, "explain", "x", *sock)
    assert code == 1 and "ValidationError" in err and "at least 4 characters" in err
    code, _, err = _run(capsys, "explain", "0123abcd", *sock)
    assert code == 1 and "NotFoundError" in err
    for argv in (["retrieve", "gas"], ["curate"], ["playbook"]):
        code, out, err = _run(capsys, *argv, *sock)
        assert code == 0 and out, (argv, err)


def test_a_warning_typed_at_the_cli_is_the_owners_and_ok_is_refused(
        served: tuple[ServerThread, Grimoire], capsys: pytest.CaptureFixture[str]) -> None:
    st, g = served
    sock = ["--socket", str(st.path)]
    code, _, err = _run(capsys, "call", "entry.add",
                        '{"category": "warning", "content": "ok"}', *sock)
    assert code == 1 and "states no claim" in err
    code, out, _ = _run(capsys, "call", "entry.add", json.dumps(
        {"category": "warning", "content": "Never bridge more than 5 ETH on a Friday"}), *sock)
    assert code == 0
    entry_id = json.loads(out)["id"]
    assert g.entry_get(entry_id)["provenance"] == "owner"
    g.curator_run()
    markdown = g.context.config.playbook_path.read_text(encoding="utf-8")
    (line,) = [x for x in markdown.splitlines() if "Never bridge" in x]
    assert "· told by you · warning ·" in line
    told = markdown.index("### Told or inherited, not yet confirmed by outcomes (1)")
    assert markdown.index(line) > told and "### Warnings: avoid these" not in markdown
