"""One agent of the fleet (``benches.fleet``): ``python fleet_child.py INDEX WORK URI SPEC``.

Opens its own Grimoire in ``WORK/agentNN`` (hash embedder, a frozen clock advanced one hour
per cycle: the data's own time) with ``clade.uri`` = URI, waits for ``WORK/go``, then runs
``cycles`` curator cycles, writing ``per_cycle`` new warnings of its own before each; every
cycle ends with the Clade exchange (publish, then pull). Then it drains: once its own items
are all published it says so (``WORK/published-NN``, holding the keys the Clade acknowledged)
and runs exchange cycles until a cycle begun after every agent had said so finds nothing new
to pull and every other agent's acknowledged key is imported: on a shared S3 table a pull
may read a version older than another agent's last commit, so an empty pull alone does not
mean there is nothing left. SPEC is a JSON object: ``agents``,
``cycles``, ``per_cycle``, ``drain`` (the most drain cycles) and ``config`` (overrides).

It writes ``WORK/agentNN.json``: each cycle's Clade summary and wall times, the keys it
offered and the ones the Clade acknowledged (its publish ledger), and for every foreign
row of the table at the end whether it was pulled, with its alert episodes and entries
counted per key (more than one of either is a duplicate).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from grimoire import Grimoire
from grimoire.clock import MS_PER_HOUR, FrozenClock
from grimoire.config import Config
from grimoire.models.embedders import HashEmbedder

ACTIONS = ["swap", "bridge", "lend", "borrow", "stake", "provide liquidity", "rebalance"]
PAIRS = ["WETH/USDC", "WBTC/ETH", "ARB/USDC", "OP/ETH", "LINK/USDC", "SOL/USDT", "DAI/USDC"]
METRICS = ["gas_gwei", "funding_rate", "spread_bps", "oracle_lag_s", "pool_depth_drop"]
REASONS = ["fees eat the gain", "slippage doubles", "the oracle lags the market",
           "withdrawals stall", "liquidations cascade", "the spread widens past the edge"]


def warning(rng: random.Random, name: str, cycle: int, item: int) -> str:
    return (f"{name} saw at cycle {cycle} ({item}): avoid to {rng.choice(ACTIONS)} on "
            f"{rng.choice(PAIRS)} when {rng.choice(METRICS)} is above {rng.randint(2, 400)} "
            f"because {rng.choice(REASONS)}")


def _wait(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def _cycle(g: Grimoire, clock: FrozenClock, label: str) -> dict[str, Any]:
    clock.advance(MS_PER_HOUR)
    started = time.time()
    phase = dict(g.curator_run()["phases"].get("clade", {}))
    return {"cycle": label, "start": started, "end": time.time(), **phase}


def main(argv: list[str]) -> int:
    index, work, uri, spec = int(argv[0]), Path(argv[1]), argv[2], json.loads(argv[3])
    name = f"agent{index:02d}"
    rng = random.Random(index)
    clock = FrozenClock()
    config = Config().replace(**{"curator.every_ticks": 1_000_000, "clade.uri": uri,
                                 "clade.agent": name, **spec.get("config", {})})
    log: list[dict[str, Any]] = []
    with Grimoire.open(work / name, config=config, clock=clock,
                       embedder=HashEmbedder(dim=384)) as g:
        (work / f"ready-{index:02d}").touch()
        _wait(work / "go", 600)
        for cycle in range(spec["cycles"]):
            for item in range(spec["per_cycle"]):
                g.entry_add(category="warning", content=warning(rng, name, cycle, item),
                            confidence=0.9)
            log.append(_cycle(g, clock, str(cycle)))
        said = False
        everyone = [work / f"published-{i:02d}" for i in range(spec["agents"])]
        others = [p for i, p in enumerate(everyone) if i != index]
        last_after_all = False  # the last cycle began once every agent had said so
        settled = False  # the drain ended because nothing was left, not out of cycles
        for _ in range(spec["drain"]):
            last = log[-1]
            if not said and "error" not in last and last.get("publish_waiting") == 0:
                _say_published(work / f"published-{index:02d}", _acked(g, name))
                said = True
            if last_after_all and "error" not in last \
                    and last.get("pulled") == 0 and last.get("pull_waiting") == 0 \
                    and _all_imported(g, others):
                settled = True
                break
            last_after_all = said and all(p.exists() for p in everyone)
            log.append(_cycle(g, clock, "drain"))
        report = _report(g, name, uri, others)
    report.update({"agent": name, "cycles": log, "drained": said, "settled": settled})
    (work / f"{name}.json").write_text(json.dumps(report))
    return 0


def _acked(g: Grimoire, name: str) -> list[str]:
    """The keys of this agent's rows the Clade acknowledged (its publish ledger)."""
    from grimoire.portable import clade

    ctx = g.context
    return [r["key"] for r in clade._offer(ctx, name)
            if ctx.semantic.get_meta(clade._PUBLISHED + r["key"]) is not None]


def _say_published(path: Path, keys: list[str]) -> None:
    """Write ``keys`` to ``path`` whole or not at all (another agent may read it any time)."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(keys))
    part.replace(path)


def _all_imported(g: Grimoire, said: list[Path]) -> bool:
    """Whether every key the other agents said the Clade acknowledged is imported here."""
    from grimoire.portable.transfer import imported_as

    return all(imported_as(g.context, f"clade:{k}") is not None
               for path in said for k in json.loads(path.read_text()))


def _report(g: Grimoire, name: str, uri: str, others: list[Path]) -> dict[str, Any]:
    """What this agent holds. ``imported`` lists every foreign key it has imported, of the
    keys the table showed it and the keys the other agents said the Clade acknowledged: the
    summary judges it against the table as it stands once every agent is done (this agent's
    own read of the table may be a version older than another agent's last commit)."""
    import lancedb

    from grimoire.portable import clade
    from grimoire.portable.transfer import imported_as

    ctx = g.context
    offered = [r["key"] for r in clade._offer(ctx, name)]
    acked = _acked(g, name)
    heads = (lancedb.connect(uri).open_table(clade.TABLE).search()
             .select(["key", "origin"]).limit(None).to_arrow().to_pylist())
    known = {h["key"] for h in heads if h["origin"] != name}
    known |= {k for path in others if path.exists() for k in json.loads(path.read_text())}
    alerts = Counter(e.ref for e in ctx.episodes.recent(1_000_000, types=["clade_alert"]))
    return {
        "offered": offered, "acked": acked,
        "imported": sorted(k for k in known if imported_as(ctx, f"clade:{k}") is not None),
        "alert_dups": {r: n for r, n in alerts.items() if n > 1},
        "alerts": sum(alerts.values()),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
