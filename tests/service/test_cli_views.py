"""Issue 27: every command prints for a person on a terminal and JSON with ``--json``; the ids
a table prints are unique in the store and taken back by ``entry show`` (the installed
``grimoire`` in a subprocess, as the owner runs it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from curator.views.explain import explain_entry, render_text
from grimoire.clock import FrozenClock
from grimoire.records import Category
from tests.curator.test_curator_support import open_grimoire, put
from tests.service.daemon_support import short_dir, start_daemon, stop_daemon, wait_ready
from tests.service.test_cli_owner import cli, no_traceback

T0 = 1_767_225_600_000


def _store(data: Path, n: int = 30) -> list[str]:
    """``n`` entries made in one millisecond (a curator cycle's batch): their UUIDv7 ids
    share the first 13 characters, the width the tables used to print."""
    with open_grimoire(data, FrozenClock(T0)) as g:
        ids = [put(g, category=Category.INSIGHT if i % 3 else Category.WARNING,
                   content=f"Finding {i}: gas averages {10 + i} gwei at night").id
               for i in range(n)]
        g.episode_write(text="swap 2 ETH at 3 gwei", type="action", outcome="positive",
                        timestamp=T0)
        g.curator_run()  # PLAYBOOK.md
    assert n < 2 or len({i[:13] for i in ids}) < n  # the collision the issue saw
    return ids


def _column(table: str, name: str) -> list[str]:
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] in (["id"], ["#"]))
    start = lines[head].index(name)
    return [line[start:].split()[0] for line in lines[head + 2:] if line.strip()]


def test_entry_list_prints_store_unique_ids_that_entry_show_takes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = _store(data)
    d = ["--data", str(data)]
    p = cli("entry", "list", "--limit", "1000", *d)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    printed = _column(p.stdout, "id")
    assert len(printed) == len(ids)
    for short in printed:
        assert len(short) >= 8  # never shorter than PLAYBOOK.md's / explain's short id
        assert [i for i in ids if i.startswith(short)] != [], short
        assert len([i for i in ids if i.startswith(short)]) == 1, short
    for short in printed[:4]:
        shown = cli("entry", "show", short, "--json", *d)
        assert shown.returncode == 0, shown.stderr
        got = json.loads(shown.stdout)
        assert got["id"].startswith(short) and got["short_id"] == short
    listed = json.loads(cli("entry", "list", "--json", *d).stdout)["entries"]
    assert {e["short_id"] for e in listed} == set(printed)

    p = cli("retrieve", "gas at night", "-k", "5", *d)
    assert p.returncode == 0, p.stderr
    for short in _column(p.stdout, "id"):
        if len(short) < 36:  # an entry's short id (episodes print their whole id)
            assert cli("explain", short, *d).returncode == 0, short


def test_entry_show_and_playbook_print_for_a_person(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = _store(data, n=3)
    d = ["--data", str(data)]
    p = cli("entry", "show", ids[0], *d)
    no_traceback(p)
    assert p.returncode == 0 and not p.stdout.lstrip().startswith("{"), p.stdout
    assert "Finding 0: gas averages 10 gwei at night" in p.stdout
    assert f"grimoire explain {ids[0][:8]}" in p.stdout
    assert json.loads(cli("entry", "show", ids[0], "--json", *d).stdout)["id"] == ids[0]
    p = cli("playbook", *d)
    assert p.returncode == 0 and p.stdout.startswith("# PLAYBOOK"), p.stdout[:200]
    assert "playbook_format" not in p.stdout
    assert cli("playbook", "--raw", *d).stdout.startswith("---\nplaybook_format: 1")


def test_kg_commands_print_for_a_person_and_say_what_a_second_assert_closed() -> None:
    with short_dir() as root:
        data = root / "d"
        proc = start_daemon(data, "--feed", "none", "--tick-seconds", "3600")
        try:
            wait_ready(proc, data / "grimoire.sock")
            d = ["--data", str(data)]
            usdc = '{"kind": "entity", "value": {"kind": "token", "id": "USDC"}}'
            p = cli("kg", "assert", "pool", "0xabc", "oracle_dependency", usdc, "100", *d)
            no_traceback(p)
            assert p.returncode == 0 and p.stdout.startswith("asserted fact "), p.stdout
            first = p.stdout.split()[2]
            dai = '{"kind": "entity", "value": {"kind": "token", "id": "DAI"}}'
            p = cli("kg", "assert", "pool", "0xabc", "oracle_dependency", dai, "200", "--json", *d)
            assert json.loads(p.stdout)["closed"] == [first]
            p = cli("kg", "at", "pool", "0xabc", "150", *d)
            assert "token:USDC" in p.stdout and "None" not in p.stdout, p.stdout
            assert first in p.stdout  # the whole id: kg invalidate takes it
            p = cli("kg", "neighbors", "pool", "0xabc", "250", *d)
            assert p.returncode == 0 and "token:DAI" in p.stdout, p.stdout
            assert not p.stdout.lstrip().startswith("{")
            assert json.loads(cli("kg", "neighbors", "pool", "0xabc", "250", "--json",
                                  *d).stdout)["neighbors"]
            p = cli("kg", "at", "pool", "0xnothing", "150", *d)
            assert p.returncode == 0 and "no facts" in p.stdout
        finally:
            assert stop_daemon(proc) == 0


def test_backup_restore_export_print_for_a_person(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data, n=3)
    d = ["--data", str(data)]
    p = cli("backup", *d, str(tmp_path / "bk"))
    no_traceback(p)
    assert p.returncode == 0 and p.stdout.startswith(f"backed up to {tmp_path / 'bk'}: ")
    assert "3 entries" in p.stdout
    p = cli("restore", str(tmp_path / "bk"), str(tmp_path / "back"))
    assert p.returncode == 0 and p.stdout.startswith("restored into "), p.stdout
    p = cli("export", *d, str(tmp_path / "bundle"))
    assert p.returncode == 0 and p.stdout.startswith(f"exported to {tmp_path / 'bundle'}")
    p = cli("restore", str(tmp_path / "bk"), str(tmp_path / "again"), "--json")
    assert json.loads(p.stdout)["files"] >= 1


def test_explain_states_changes_in_words(tmp_path: Path) -> None:
    """A curator step records whole fields; explain shows what moved, not Python reprs of
    claims, and a sentence change as the words that changed."""
    with open_grimoire(tmp_path / "data", FrozenClock(T0)) as g:
        entry = put(g, content="When the regime is sideways, volume averages 2.48M (vs 3.53M "
                               "otherwise; 132 episodes).")
        data = explain_entry(g.context, entry.id)
    claim = {"condition": {"regime": "sideways"}, "target": "metric:volume"}
    data["history"] = [
        {"cycle": 10, "at": T0, "op": "validate",
         "before": {"confidence": 0.5, "validated_count": 0, "claim": claim},
         "after": {"confidence": 0.833, "validated_count": 20, "claim": {**claim, "n": 2}}},
        {"cycle": 11, "at": T0, "op": "sentence",
         "before": {"content": "When the regime is sideways, volume averages 2.48M (vs 3.53M "
                               "otherwise; 132 episodes)."},
         "after": {"content": "When the regime is sideways, volume averages 2.5M (vs 3.53M "
                              "otherwise; 152 episodes)."}}]
    text = render_text(data)
    assert "{'" not in text and "golem local" not in text
    assert "confidence 0.500 → 0.833, validated count 0 → 20, claim updated" in text
    assert re.search(r"“… averages 2\.48M .*” → “… averages 2\.5M ", text), text


def test_kg_help_lists_the_vocabulary_and_known_at_takes_the_apis_spelling(
        tmp_path: Path) -> None:
    from grimoire.records.graph import Predicate

    p = cli("kg", "assert", "--help")
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert all(pred.value in text for pred in Predicate) and "custom:<name>" in text
    assert "closes the open fact" in text
    data = tmp_path / "data"
    _store(data, n=1)
    for spelling in ("known-at", "known_at"):
        p = cli("kg", spelling, "pool", "0xabc",
                "99999999999999", "--data", str(data))
        assert p.returncode == 0 and "no facts" in p.stdout, (spelling, p.stderr)
