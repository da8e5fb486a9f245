"""Relevance first on a demo-like store: edges per episode and exact-text ranks (issue 24).

    .venv/bin/python scripts/bench_causal.py --part relevance           # 900 ticks, seed 7
    .venv/bin/python scripts/bench_causal.py --part relevance --quick   # 300 ticks

Drives the market simulator (the README demo's feed, default scenario) through the
facade tick by tick with the daemon's default config (curator every 50 ticks) and the
bundled model, FrozenClock advanced by the scenario's tick. Then prints:

- causal edges by kind, edges per episode, the largest and mean fan-in; the knowledge
  graph's triples (what the curator's graph phase wrote: nothing is asserted by hand);
- for up to ``--queries`` distinct event texts (not observations): the rank of the
  first item carrying that exact text when the text itself is the query (goal: 1), and
  whether the printed scores are non-increasing down the answer (goal: always).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import structlog
import yaml

from benches import apply_quick
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import FastEmbedEmbedder

T0 = 1_767_225_600_000
STEP_MS = 180_000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=900)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="300 ticks, 15 queries")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML",
                        help="a config setting, e.g. --set 'retrieval.auto_link_types=[action]' "
                        "(repeatable; for ablations)")
    args = parser.parse_args(argv)
    overrides = {}
    for text in args.set:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set wants KEY=YAML, got {text!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    if args.quick:
        apply_quick(parser, args, {"ticks": 300, "queries": 15})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    clock = FrozenClock(T0)
    with tempfile.TemporaryDirectory(prefix="bench-relevance-") as tmp, Grimoire.open(
            config=Config(data_dir=str(Path(tmp) / "g")).replace(**overrides), clock=clock,
            embedder=FastEmbedEmbedder()) as g:
        feed = SimFeed(load_scenario("default"), args.seed)
        for tick in range(1, args.ticks + 1):
            now = clock.advance(STEP_MS)
            g.tick(now=now, feed_episodes=feed.poll(tick, now))
        ctx = g.context
        episodes = ctx.episodes.recent(10**9)
        edges = ctx.semantic.list_edges()
        kinds: dict[str, int] = {}
        fan: dict[str, int] = {}
        for edge in edges:
            kinds[edge.kind.value] = kinds.get(edge.kind.value, 0) + 1
            fan[edge.effect_id] = fan.get(edge.effect_id, 0) + 1
        print(f"{args.ticks} ticks, seed {args.seed}: {len(episodes)} episodes, "
              f"{len(edges)} causal edges {kinds}, {len(edges) / max(1, len(episodes)):.2f} "
              f"per episode, fan-in max {max(fan.values(), default=0)}, mean "
              f"{sum(fan.values()) / max(1, len(fan)):.1f}")
        graph = ctx.graph.stats()
        print(f"knowledge graph: {graph['triples']} triples ({graph['open']} open, "
              f"{graph['closed']} closed) on {graph['subjects']} subjects, none asserted by hand")
        texts = sorted({e.text for e in episodes if e.type.value != "observation"})
        step = max(1, len(texts) // args.queries)
        firsts, ordered, asked = 0, 0, 0
        worst: list[tuple[int, str]] = []
        for text in texts[::step][:args.queries]:
            items = g.retrieve(query=text, k=10, mode="browse")["items"]
            rank = next((i["rank"] for i in items if i["content"] == text), 99)
            scores = [i["score"] for i in items]
            asked += 1
            firsts += rank == 1
            ordered += scores == sorted(scores, reverse=True)
            if rank != 1:
                worst.append((rank, text[:70]))
        print(f"exact-text queries: {asked}; ranked first {firsts}/{asked}; scores in rank "
              f"order {ordered}/{asked}")
        for rank, text in sorted(worst)[-5:]:
            print(f"  rank {rank}: {text}")
    return 0
