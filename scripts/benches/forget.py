"""``bench_privacy.py --part forget``: forgetting one actor's episodes in a large store.

Fills a store with ``--episodes`` episodes (hash embedder, 1,000 a batch), every
``--every``-th by the actor to forget, a told entry naming the actor, a KG triple about it
and a few retrievals; then times ``forget(actor=…)`` end to end (plan, tombstone, LanceDB
rewritten and old versions removed, journal and semantic.sqlite rewritten, LMDB copied,
recount, PLAYBOOK.md), and its dry run. One row each.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benches import apply_quick
from grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder

ACTOR = "Quintessa Marlowe"
WORDS = ["gas", "spiked", "pool", "swap", "fee", "liquidity", "whale", "oracle", "bridge",
         "volume", "funding", "slippage", "vault", "router"]


def fill(g: Grimoire, episodes: int, every: int) -> int:
    mine = 0
    for lo in range(0, episodes, 1000):
        batch = []
        for i in range(lo, min(episodes, lo + 1000)):
            words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(10))
            by_actor = i % every == 0
            mine += by_actor
            batch.append({"text": f"{words} #{i}", "actor": ACTOR if by_actor else f"a{i % 50}",
                          "timestamp": 1_767_225_600_000 + i * 1000})
        g.episode_write_batch(batch)
    g.entry_add(category="warning", content=f"Avoid swaps {ACTOR} suggests when gas_gwei > 80 "
                "because fees eat the gain")
    g.kg_assert(subject={"kind": "address_cluster", "id": ACTOR}, predicate="custom:trades",
                object={"kind": "token", "id": "WETH"}, valid_from=1)
    for q in ("gas spiked", "what did Quintessa say", "swap fee"):
        g.retrieve(query=q)
    g.context.episodes.flush()
    return mine


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=100, help="one episode in N is the actor's")
    parser.add_argument("--quick", action="store_true", help="10k episodes")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"episodes": 10_000})
    base = Path(tempfile.mkdtemp(prefix="bench-forget-"))
    try:
        with Grimoire.open(base / "data", embedder=HashEmbedder()) as g:
            started = time.perf_counter()
            mine = fill(g, args.episodes, args.every)
            filled = time.perf_counter() - started
            started = time.perf_counter()
            dry = g.forget(actor=ACTOR, dry_run=True)
            dry_s = time.perf_counter() - started
            started = time.perf_counter()
            done = g.forget(actor=ACTOR)
            took = time.perf_counter() - started
            left = g.context.episodes.count()
        print(f"store: {args.episodes:,} episodes ({mine:,} by the actor), filled in "
              f"{filled:.1f} s (hash embedder)")
        print("| row | value | goal |\n|---|---|---|")
        print(f"| forget --dry-run (plan only) | {dry_s:.2f} s, would remove "
              f"{dry['would_remove']['episodes']:,} episodes | - |")
        print(f"| forget --actor (end to end) | {took:.2f} s, removed "
              f"{done['removed']['episodes']:,} episodes, {left:,} left | <= 10 s |")
    finally:
        shutil.rmtree(base, ignore_errors=True)
