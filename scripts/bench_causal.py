"""Causal retrieval in the shape of seed 000, generated and seeded, through the facade.

    .venv/bin/python scripts/bench_causal.py                  # 120 scenarios
    .venv/bin/python scripts/bench_causal.py --quick          # 20 scenarios
    .venv/bin/python scripts/bench_causal.py --part relevance # the demo's causal edges, ranks

Each scenario is a chain of events of depth 2-5 (the crisis and 1-4 causal ancestors,
linked cause → effect with ``causal.link``) in a town of its own; every ancestor has a
*witness*: a memory of someone who saw it happen, written in the words of the ancestor,
not of the crisis (semantically far from it); the crisis has three *loud distractors*
(memories that talk about the crisis itself); and the store holds noise (everyday
observations). All scenarios share one store, with the real embedder.

Measures (per scenario, averaged):

- ``recall@5``: the query is the crisis text with ``event_id`` = the crisis; of the top
  five *memories* (items that are not chain events), the fraction that are the scenario's
  witnesses (at most four, so 1.0 is reachable);
- ``root MRR``: the query asks why ("Why did <crisis>?") with the same ``event_id``; the
  reciprocal rank of the chain's root cause among all items;
- ``anchored``: root MRR for the recall@5 question itself (the crisis text, no "why"
  wording, anchored on the crisis by ``event_id``): an agent that passes the event asks
  about its causes however it words the question.

Rows: ``similarity`` (cosine alone over every episode), then ``retrieve`` under each
``retrieval.causal_fusion`` (``multiplicative``: seed 000's score × (1 + λ·boost) on the
pooled candidates; ``additive``: the causal stream as its own additive term, and the
witnesses it finds pooled). No LLM anywhere.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from benches import apply_quick, dispatch

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.models.embedders import embed_one

HOUR = 3_600_000
DAY = 24 * HOUR

# (event text, witness text) per step, root first; the last step is the crisis.
CHAINS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("A severe drought dried the reservoirs of {town}",
      "{who} saw that the wells of {town} held almost no water any more"),
     ("The council of {town} imposed strict water and grain rationing",
      "{who} queued for hours to collect a small ration card at the {town} hall"),
     ("A black market for grain spread through {town}",
      "{who} was offered flour at triple the price by a stranger behind the {town} mill"),
     ("Protests against merchants broke out in the {town} market square",
      "{who} watched people shouting at traders near the {town} fountain"),
     ("Food riots engulfed {town} and shops were looted",
      "")),
    (("The {town} senate cut the public health budget by half",
      "{who} read that the clinics of {town} would lose their funding next season"),
     ("The proposal to build quarantine wards in {town} was rejected",
      "{who} heard the mayor of {town} refuse the doctors' plan for isolation rooms"),
     ("Sailors arrived in {town} harbour with a high fever",
      "{who} helped carry a shivering sailor off a ship at the {town} docks"),
     ("Sick patients overwhelmed the {town} infirmary",
      "{who} saw beds lined up in the corridors of the {town} infirmary"),
     ("A plague outbreak spread across {town} and killed hundreds",
      "")),
    (("The {town} bridge inspection was postponed to save money",
      "{who} noticed that the yearly inspectors never came to the {town} bridge"),
     ("Cracks appeared in the pillars of the {town} bridge",
      "{who} photographed long cracks in the stone under the {town} bridge"),
     ("Heavy spring floods raised the river at {town}",
      "{who} moved the family's belongings upstairs as the river at {town} rose"),
     ("Traffic over the {town} bridge was not stopped despite warnings",
      "{who} saw carts still crossing the {town} bridge after the warning bell"),
     ("The {town} bridge collapsed and cut the town off from supplies",
      "")),
    (("The {town} forge owners cut wages to pay their debts",
      "{who} got a smaller pay packet than last month at the {town} forge"),
     ("Skilled smiths left {town} for better paid work in the capital",
      "{who} said goodbye to a friend who moved from {town} to find work"),
     ("Weapon production in {town} fell far behind orders",
      "{who} saw the {town} armoury shelves standing half empty"),
     ("The {town} garrison marched with old and broken equipment",
      "{who} watched soldiers of {town} repair their rusty shields by hand"),
     ("The {town} garrison lost the border fort to raiders",
      "")),
    (("A fungus blighted the potato fields around {town}",
      "{who} pulled up black, rotten potatoes from a field near {town}"),
     ("Farmers near {town} could not pay their rent",
      "{who} heard a farmer from {town} beg the landlord for another month"),
     ("Landlords evicted families from farms around {town}",
      "{who} saw a family's furniture piled on the road outside {town}"),
     ("Homeless families crowded into the slums of {town}",
      "{who} counted six families sleeping in one barn at the edge of {town}"),
     ("Cholera swept through the slums of {town}",
      "")),
)
DISTRACTORS = (
    "{who} talked all evening about how terrible it is that {crisis_lower}",
    "Everyone at the inn was discussing the news: {crisis_lower}",
    "{who} wrote a long letter describing how {crisis_lower}",
)
NOISE = (
    "{who} bought fresh bread and cheese at the bakery",
    "{who} spent the afternoon reading in the garden",
    "{who} fixed a squeaky door hinge at home",
    "{who} played cards with neighbours after dinner",
    "{who} walked the dog along the old stone wall",
    "{who} painted the fence a pale shade of blue",
    "{who} sang in the choir on Sunday morning",
    "{who} mended a torn coat by candlelight",
)
TOWNS = ("Ashford", "Brindle", "Corrin", "Dunmere", "Eastvale", "Fallow", "Greywick", "Harrow",
         "Ilsmere", "Juniper", "Kestrel", "Lowmoor", "Marrow", "Northcott", "Oakhaven",
         "Pellam", "Quarry", "Redwater", "Stonebury", "Thistle", "Umber", "Vantor", "Wexley",
         "Yarrow")
PEOPLE = ("Ada", "Bram", "Cora", "Dev", "Elin", "Finn", "Greta", "Hugo", "Iris", "Jonas",
          "Kira", "Lev", "Mira", "Nils", "Orla", "Pax", "Rhea", "Sven", "Tove", "Ulla")


@dataclass
class Scenario:
    crisis: str
    crisis_id: str = ""
    events: list[str] = field(default_factory=list)  # ids, root first, crisis last
    witnesses: set[str] = field(default_factory=set)


def build(g: Grimoire, clock: FrozenClock, n: int, seed: int) -> tuple[list[Scenario], set[str]]:
    rng = random.Random(seed)
    scenarios: list[Scenario] = []
    events_all: set[str] = set()
    t = clock.now - (n + 2) * 3 * DAY
    for i in range(n):
        chain = CHAINS[i % len(CHAINS)]
        depth = rng.randint(2, 5)
        steps = [*chain[len(chain) - depth:-1], chain[-1]]
        town = f"{rng.choice(TOWNS)}{i}"
        crisis = chain[-1][0].format(town=town)
        sc = Scenario(crisis)
        for text, witness in steps:
            event_text = text.format(town=town)
            event = g.episode_write(text=event_text, type="observation", importance="critical",
                                    timestamp=t)["id"]
            if sc.events:
                g.causal_link(cause_id=sc.events[-1], effect_id=event, weight=1.0)
            sc.events.append(event)
            if witness:
                w = g.episode_write(text=witness.format(town=town, who=rng.choice(PEOPLE)),
                                    timestamp=t + HOUR)["id"]
                sc.witnesses.add(w)
            t += 6 * HOUR
        sc.crisis_id = sc.events[-1]
        lower = crisis[0].lower() + crisis[1:]
        for template in DISTRACTORS:
            g.episode_write(text=template.format(who=rng.choice(PEOPLE), crisis_lower=lower),
                            timestamp=t)
        for _ in range(4):
            g.episode_write(text=rng.choice(NOISE).format(who=rng.choice(PEOPLE)),
                            timestamp=t + rng.randint(0, DAY))
        events_all.update(sc.events)
        scenarios.append(sc)
        t += 2 * DAY
    return scenarios, events_all


def _similarity(g: Grimoire, query: str) -> list[str]:
    q = embed_one(g.context.embedder, query)
    ids, matrix = g.context.episodes.all_vectors()
    return [ids[i] for i in np.argsort(-(matrix @ q), kind="stable")[:50].tolist()]


def _retrieve(g: Grimoire, query: str, event_id: str) -> list[str]:
    out = g.retrieve(query=query, event_id=event_id, kinds=["episode"], k=20, mode="browse",
                     max_tokens=100_000)
    return [item["id"] for item in out["items"]]


def score(rank_recall: list[str], rank_why: list[str], sc: Scenario,
          events: set[str]) -> tuple[float, float, float]:
    """(recall@5, root MRR of the why question, root MRR of the anchored question)."""
    memories = [i for i in rank_recall if i not in events][:5]
    recall = len(sc.witnesses & set(memories)) / len(sc.witnesses)
    return recall, _reciprocal(rank_why, sc.events[0]), _reciprocal(rank_recall, sc.events[0])


def _reciprocal(ranking: list[str], item: str) -> float:
    return next((1.0 / (p + 1) for p, i in enumerate(ranking) if i == item), 0.0)


def chains(argv: Sequence[str] | None = None) -> int:
    """The default part: seed 000's chains, witnesses' recall@5 and root-cause MRR."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="20 scenarios")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"scenarios": 20})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    started = time.perf_counter()
    rows: dict[str, list[tuple[float, float]]] = {}
    clock = FrozenClock()
    with tempfile.TemporaryDirectory(prefix="bench-causal-") as tmp, \
            Grimoire.open(Path(tmp) / "data", config=Config(), clock=clock) as g:
        scenarios, events = build(g, clock, args.scenarios, args.seed)
        built = time.perf_counter() - started
        base = g.context.config
        variants: dict[str, Any] = {
            "multiplicative": base.replace(**{"retrieval.causal_fusion": "multiplicative"}),
            "additive": base.replace(**{"retrieval.causal_fusion": "additive"}),
        } if hasattr(base.retrieval, "causal_fusion") else {"retrieve": base}
        for sc in scenarios:
            why = f"Why did this happen: {sc.crisis}?"
            sim = _similarity(g, sc.crisis)
            rows.setdefault("similarity", []).append(
                score(sim, _similarity(g, why), sc, events))
            for name, config in variants.items():
                g.context.config = config
                rows.setdefault(f"retrieve ({name})", []).append(score(
                    _retrieve(g, sc.crisis, sc.crisis_id), _retrieve(g, why, sc.crisis_id),
                    sc, events))
            g.context.config = base
    depths: dict[int, int] = {}
    for sc in scenarios:
        depths[len(sc.events)] = depths.get(len(sc.events), 0) + 1
    shape = dict(sorted(depths.items()))
    print(f"causal benchmark: {len(scenarios)} scenarios (chain length: {shape}),"
          f" seed {args.seed}, build {built:.0f} s, total {time.perf_counter() - started:.0f} s\n")
    print(f"{'row':<28} {'recall@5':>9} {'root MRR':>9} {'anchored':>9}")
    for name, values in rows.items():
        mean = np.mean(np.array(values), axis=0)
        print(f"{name:<28} {mean[0]:>9.3f} {mean[1]:>9.3f} {mean[2]:>9.3f}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch("bench_causal.py", {"chains": chains, "relevance": "benches.relevance"},
                    argv)


if __name__ == "__main__":
    sys.exit(main())
