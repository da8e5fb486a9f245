"""``grimoire advise`` and ``grimoire entry list --kind``, run as the installed console
script in a subprocess, reading the data directory (no daemon running): the rules that
apply to a situation given as flags; summaries listed only when asked for."""

from __future__ import annotations

import json
from pathlib import Path

from grimoire.clock import FrozenClock
from grimoire.records import EntryStatus
from tests.curator.test_curator_support import open_grimoire, put
from tests.methods.advise_support import Rules, fill_rules, same_advice_warning
from tests.service.test_cli_owner import cli, no_traceback


def _store(path: Path) -> Rules:
    with open_grimoire(path, FrozenClock()) as g:
        return fill_rules(g)


def test_advise_lists_the_warnings_for_a_swap_in_high_vol(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rules = _store(data)
    d = ["--data", str(data)]
    p = cli("advise", "--action", "swap", "--pair", "WETH/USDC", "--regime", "high_vol", *d)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == ("1 rule(s) apply and 2 may apply to: swap · on WETH/USDC · "
                        "regime high_vol")
    # each rule's shortest prefix unique in the store, never under 8 characters (issue 27)
    first, third = lines[1].split(" · ")[0].split(), lines[3].split(" · ")[0].split()
    assert first[:2] == ["1.", "warning"] and rules.slippage_warning.startswith(first[2])
    assert len(first[2]) >= 8 and lines[1].split(" · ")[1] == "applies"
    assert lines[2].strip().startswith("Avoid swap when the regime is high_vol")
    assert third[:2] == ["2.", "warning"] and rules.swap_warning.startswith(third[2])
    assert lines[3].split(" · ")[1] == "may apply, needs strategy"

    p = cli("advise", "--action", "swap", "--pair", "WETH/USDC", "--regime", "high_vol",
            "--strategy", "eth-dca", "--applies-only", "--json", *d)
    out = json.loads(p.stdout)
    assert {r["id"] for r in out["rules"]} == {rules.slippage_warning, rules.swap_warning}
    assert all(r["match"] == "applies" for r in out["rules"])

    p = cli("advise", "--action", "lp_add", "--regime", "sideways", "--time", "1767268800000",
            *d)
    assert p.returncode == 0 and "0 rule(s) apply and 0 may apply" in p.stdout


def test_advise_names_a_bad_field(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    for args, field in ((["--regime", "stormy"], "situation.regime"),
                        (["--metric", "gas_gwei=high"], "metric"),
                        (["--time", "noon"], "time"), ([], "situation")):
        p = cli("advise", *args, "--data", str(data))
        no_traceback(p)
        assert p.returncode == 1 and f"ValidationError: {field}: " in p.stderr, (args, p.stderr)


def test_entry_list_shows_summaries_only_when_asked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_grimoire(data, FrozenClock()) as g:
        fill_rules(g)
        put(g, tags=("summary", "summary:l1"), status=EntryStatus.CANDIDATE,
            content="14 episodes, 2026-01-01 02:04–04:25 UTC: regime high_vol")
    d = ["--data", str(data)]
    p = cli("entry", "list", *d)
    assert p.returncode == 0, p.stderr
    assert "(L1/L2 summaries: --kind summary)" in p.stdout.splitlines()[0]
    assert "14 episodes" not in p.stdout and "Avoid swap" in p.stdout
    # each entry's ✓ / ✗, as PLAYBOOK.md and explain print them
    assert "votes" in p.stdout.splitlines()[1] and " ✓0 ✗0 " in p.stdout
    p = cli("entry", "list", "--kind", "summary", *d)
    assert p.stdout.splitlines()[0] == "1 entry of kind summary" and "14 episodes" in p.stdout


def test_advise_prints_a_rule_of_the_same_advice_under_the_one_it_is_folded_into(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_grimoire(data, FrozenClock()) as g:
        rules = fill_rules(g)
        other = same_advice_warning(g)
    p = cli("advise", "--action", "swap", "--pair", "WETH/USDC", "--regime", "high_vol",
            "--data", str(data))
    no_traceback(p)
    lines = p.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("2. warning"))
    assert rules.swap_warning.startswith(lines[at].split(" · ")[0].split()[2])
    also = lines[at + 2].split()
    assert also[0] == "also" and other.startswith(also[1]) and len(also[1]) < len(other)
    assert lines[at + 2].endswith("(25% vs 30% for swap overall).")
