"""The Clade by itself (issue 25 part 5): with ``clade.uri`` set, every curator cycle
publishes this agent's new warnings, active heuristics and validated insights and pulls
the siblings' through the gate, each incoming item a ``clade_alert`` episode; rate-limited
and idempotent across restarts. Two agents in one process, two daemons in two processes,
on a local directory and on the S3-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from tests.curator.test_curator_support import open_grimoire, put
from tests.portable.test_clade import s3_server  # noqa: F401 - the fixture
from tests.service.daemon_support import REPO, daemon_env, short_dir

ALPHA_WARNING = "Avoid swaps on WETH/USDC when gas_gwei is above 80 because fees eat the gain"
BETA_WARNING = "Never bridge funds to base while the sequencer is down: withdrawals stall"


def _clade(g: Grimoire) -> dict[str, Any]:
    return dict(g.curator_run()["phases"]["clade"])


def _pulled(g: Grimoire) -> list[dict[str, Any]]:
    return [e for e in g.entry_list(limit=100)["entries"] if e["provenance"] == "clade"]


def test_each_cycle_exchanges_once_and_restarts_change_nothing(
        tmp_path: Path, clock: FrozenClock) -> None:
    uri = str(tmp_path / "clade")
    with open_grimoire(tmp_path / "alpha", clock, **{"clade.uri": uri}) as a:
        a.entry_add(category="warning", content=ALPHA_WARNING, confidence=0.9)
        # an insight is shared only once this agent's outcomes confirmed it
        put(a, content="Gas averages 6 gwei between 02:00 and 04:00 UTC (vs 24 gwei)")
        put(a, content="Slippage on WETH/USDC stays under 5 bps below 10 ETH per swap",
            validated_count=3)
        first = _clade(a)
        assert first["published"] == 2 and first["pulled"] == 0
        assert _clade(a)["published"] == 0  # nothing new the next cycle
    with open_grimoire(tmp_path / "beta", clock, **{"clade.uri": uri}) as b:
        b.entry_add(category="warning", content=BETA_WARNING, confidence=0.9)
        got = _clade(b)
        assert got["published"] == 1 and got["pulled"] == 2 and got["alerts"] == 2
        pulled = {e["content"]: e for e in _pulled(b)}
        assert ALPHA_WARNING in pulled and pulled[ALPHA_WARNING]["status"] == "candidate"
        alerts = {e.id: e for e in b.context.episodes.recent(10, types=["clade_alert"])}
        assert len(alerts) == 2
        alert = alerts[pulled[ALPHA_WARNING]["parent_episode_ids"][0]]
        assert alert.text.startswith("Clade alert from alpha: warning: Avoid swaps")
        assert alert.importance.value == "notable"
        # a sibling's warning, like any warning, is listed at the next cycle's promotion
        assert _clade(b)["pulled"] == 0
        assert b.entry_get(pulled[ALPHA_WARNING]["id"])["status"] == "active"
    with open_grimoire(tmp_path / "alpha", clock, **{"clade.uri": uri}) as a:  # a restart
        back = _clade(a)
        assert back["published"] == 0 and back["pulled"] == 1  # beta's own, never its echo
        assert [e["content"] for e in _pulled(a)] == [BETA_WARNING]
        again = _clade(a)
        assert again["published"] == again["pulled"] == again["alerts"] == 0
        assert len(a.context.episodes.recent(10, types=["clade_alert"])) == 1


def test_rate_limited_by_cycles_and_items(tmp_path: Path, clock: FrozenClock) -> None:
    uri = str(tmp_path / "clade")
    limits = {"clade.uri": uri, "clade.every_cycles": 2, "clade.max_publish": 1}
    with open_grimoire(tmp_path / "alpha", clock, **limits) as a:
        a.entry_add(category="warning", content=ALPHA_WARNING, confidence=0.9)
        a.entry_add(category="warning", content=BETA_WARNING, confidence=0.9)
        assert "skipped" in _clade(a)  # cycle 1: not an exchange cycle
        second = _clade(a)
        assert second["published"] == 1 and second["publish_waiting"] == 1
        assert "skipped" in _clade(a)
        assert _clade(a)["published"] == 1  # cycle 4: the one that waited


def test_an_unreachable_clade_does_not_stop_the_cycle(tmp_path: Path,
                                                      clock: FrozenClock) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the table should be")
    with open_grimoire(tmp_path / "alpha", clock, **{"clade.uri": str(blocker / "x")}) as a:
        a.entry_add(category="warning", content=ALPHA_WARNING, confidence=0.9)
        summary = a.curator_run()
        assert "error" in summary["phases"]["clade"]
        assert summary["phases"]["promote"]["promoted"] >= 1  # the cycle's own work stands
        assert a.entry_list(category="warning")["entries"][0]["status"] == "active"


# -- two daemons, two processes, one table ------------------------------------------------

def _seed(data: Path, warning: str) -> None:
    from grimoire.models.embedders import HashEmbedder

    with Grimoire.open(data, embedder=HashEmbedder()) as g:
        g.entry_add(category="warning", content=warning, confidence=0.9)


def _run(data: Path, uri: str, ticks: int) -> subprocess.Popen[str]:
    env = daemon_env(GRIMOIRE_CLADE__URI=uri, GRIMOIRE_CURATOR__EVERY_TICKS="2")
    return subprocess.Popen(
        [sys.executable, "-m", "grimoire", "run", "--data", str(data), "--tick-seconds", "0.2",
         "--max-ticks", str(ticks), "--log-level", "warning"],
        env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> None:
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err


def _state(data: Path) -> tuple[list[str], int]:
    from grimoire.models.embedders import HashEmbedder

    with Grimoire.open(data, embedder=HashEmbedder(), read_only=True) as g:
        pulled = sorted(e["content"] for e in _pulled(g))
        return pulled, len(g.context.episodes.recent(100, types=["clade_alert"]))


def _rows(uri: str) -> dict[str, int]:
    import lancedb

    rows = lancedb.connect(uri).open_table("clade").to_arrow().to_pylist()
    out: dict[str, int] = {}
    for row in rows:
        out[row["origin"]] = out.get(row["origin"], 0) + 1
    return out


@pytest.fixture
def short() -> Iterator[Path]:
    with short_dir("cl") as path:
        yield path


def _two_daemons(short: Path, uri: str) -> None:
    alpha, beta = short / "alpha", short / "beta"
    _seed(alpha, ALPHA_WARNING)
    _seed(beta, BETA_WARNING)
    # Both at once: each publishes at its first cycle and pulls what the other has by then.
    procs = [_run(alpha, uri, 20), _run(beta, uri, 20)]
    for proc in procs:
        _finish(proc)
    # Restarted one after the other: whatever one missed while the other was starting
    # comes now; nothing is sent or pulled twice.
    for data in (alpha, beta):
        _finish(_run(data, uri, 4))
    assert _state(alpha) == ([BETA_WARNING], 1)
    assert _state(beta) == ([ALPHA_WARNING], 1)
    assert _rows(uri) == {"alpha": 1, "beta": 1}
    for data in (alpha, beta):  # once more: idempotent across restarts
        _finish(_run(data, uri, 4))
    assert _state(alpha) == ([BETA_WARNING], 1) and _state(beta) == ([ALPHA_WARNING], 1)
    assert _rows(uri) == {"alpha": 1, "beta": 1}
    print(json.dumps({"uri": uri.split(":")[0], "rows": _rows(uri)}))


@pytest.mark.slow
def test_two_daemons_share_through_a_local_table(short: Path) -> None:
    _two_daemons(short, str(short / "clade"))


@pytest.mark.slow
def test_two_daemons_share_through_an_s3_compatible_server(
        short: Path, s3_server: str) -> None:  # noqa: F811 - the fixture
    _two_daemons(short, s3_server)

