"""``bench_privacy.py --part redact``: what ``privacy.redact`` catches and what it wrongly takes.

Two measures with every kind on (``privacy.redact: [all]``):

- recall on a generated set of planted secrets (``tests/guard/planted.py``: e-mail
  addresses, phone numbers of ten regions, API keys and tokens of six shapes, private keys
  as hex, WIF and PEM, BIP-39 seed phrases, IBANs of six countries, each in a sentence): a
  secret counts as removed when no piece of it (6+ characters, or its digits) is left;
- false positives on the simulator's own texts (every shipped scenario, ``--ticks`` each):
  the share of episode texts the redactor changed at all (none holds a secret); goal <= 1 %.

Also the cost per text (p50 over the simulator's texts).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Sequence

from benches import apply_quick
from benches.planted import left, planted
from grimoire.feeds import SimFeed, load_scenario
from grimoire.feeds.sim.scenario import shipped_scenarios
from grimoire.guard.instructions import instructs
from grimoire.guard.redact import redactor


def sim_texts(ticks: int) -> list[str]:
    texts = []
    for name in shipped_scenarios():
        feed = SimFeed(load_scenario(name), seed=1)
        for tick in range(ticks):
            texts.extend(e["text"] for e in feed.poll(tick, 1_767_225_600_000 + tick * 180_000))
        feed.close()
    return texts


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-kind", type=int, default=500, help="planted secrets per kind")
    parser.add_argument("--ticks", type=int, default=400, help="simulator ticks per scenario")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"per_kind": 100, "ticks": 100})
    found = redactor(["all"])
    assert found is not None
    total: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    for kind, secret, sentence in planted(args.per_kind, seed=2028):
        total[kind] += 1
        missed[kind] += bool(left(secret, found.redact(sentence)))
    texts = sim_texts(args.ticks)
    changed, costs = 0, []
    for text in texts:
        started = time.perf_counter()
        changed += found.redact(text) != text
        costs.append(time.perf_counter() - started)
    print("| row | value | goal |\n|---|---|---|")
    for kind in total:
        print(f"| planted {kind} removed | {total[kind] - missed[kind]} / {total[kind]} | all |")
    print(f"| simulator texts changed (false positives) | {changed} / {len(texts)} = "
          f"{100 * changed / max(1, len(texts)):.2f} % | <= 1 % |")
    marked = sum(bool(instructs(text)) for text in texts)
    print(f"| simulator texts marked as instructing a model | {marked} / {len(texts)} | 0 |")
    print(f"| redact cost per simulator text, p50 | "
          f"{1000 * statistics.median(costs):.2f} ms | - |")
