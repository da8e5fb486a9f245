"""``grimoire advise``, run as the installed console script in a subprocess: the rules that
apply to a situation given as flags, read from the data directory (no daemon running)."""

from __future__ import annotations

import json
from pathlib import Path

from grimoire.clock import FrozenClock
from tests.curator.test_curator_support import open_grimoire
from tests.methods.advise_support import Rules, fill_rules
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
    assert lines[1].startswith(f"1. warning {rules.slippage_warning[:13]} · applies · ")
    assert lines[2].strip().startswith("Avoid swap when the regime is high_vol")
    assert lines[3].startswith(f"2. warning {rules.swap_warning[:13]} · may apply, needs "
                               "strategy")

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
