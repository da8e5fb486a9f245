"""Knowledge updates: does the newer fact rank above the one it superseded?

    .venv/bin/python scripts/bench_recall.py --part updates           # 3 seeds
    .venv/bin/python scripts/bench_recall.py --part updates --quick   # 1 seed, fewer people

The set is generated here, from templates, seeded; no public data. Each person (an
``actor``) states attributes of their own life in the first person, one turn each
("Maren: I live in Porto these days."): where they live, work, what they drive, which
team they follow, what they study, their phone, their gym, their diet... Some attributes
change later: a second turn, days or weeks afterwards, states the new value in *other*
words ("Maren: We finally moved, Lisbon is home now."). Around them: the same people's
other attributes (same actor, different subject), other people's values of the same
attribute (same subject, different actor), and small talk. Every turn is an episode with
its actor, thread and own past timestamp.

Questions ask for the current state ("Where does Maren live?"). Columns:

- ``restated`` / ``reworded``: questions whose attribute changed, the update saying it in
  the first statement's words with the new value, or in other words; success when the
  update ranks above the superseded statement in ``retrieve``'s top 10 (the update
  present, the old one below it or absent). Goal ≥ 0.9.
- ``unchanged``: questions whose attribute never changed; hit@1 of the one statement,
  so a mechanism that reorders by recency without cause shows up here.
- ``past``: the updated attributes asked ``at`` a time between the two statements;
  success when the old statement ranks above the update (or the update is absent: ``at``
  shows the past).

Rows: ``retrieve`` as configured, and ``supersede off`` (``retrieval.supersede`` false,
the ablation). Through the public facade, with the configured (real) embedder. Two
similarity-only
mechanisms were measured here and dropped: lifting the later of two same-actor statements
that are each other's nearest (centred cosine), and lifting a later statement whose cosine
to the actor's best answer is an outlier (z >= 2) among the actor's other statements.
Both cut ``unchanged`` hit@1 (0.68 to 0.32 and 0.14): a stored vector carries the
previous turn of its thread (``retrieval.neighbour_context_chars``), so one speaker's
consecutive statements are each other's nearest whatever they are about ("I need more
coffee" at 0.76 to "my diet has been Mediterranean"). The mechanism kept
(``grimoire/retrieval/supersede.py``) catches restatements with a changed value; telling
which attribute a reworded statement is about needs the attribute itself (a KG triple,
or an LLM's extraction).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from benches import apply_quick, json_settings
from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config

DAY = 86_400_000

NAMES = ("Maren", "Tobias", "Ines", "Kofi", "Yuki", "Leandro", "Priya", "Sven", "Amara",
         "Dmitri", "Lucia", "Oskar", "Hana", "Rafael", "Noor", "Elias", "Zofia", "Mateo",
         "Ayla", "Jonas", "Freya", "Idris", "Carmen", "Henrik")


@dataclass(frozen=True)
class Attribute:
    question: str              # "{name}" is replaced
    first: tuple[str, ...]     # statements of a value ("{v}")
    update: tuple[str, ...]    # statements of a changed value, in other words
    values: tuple[str, ...]


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("Where does {name} live?",
              ("I live in {v} these days.", "My flat is in {v}, right by the river."),
              ("We finally moved, {v} is home now.", "I just relocated to {v} for good."),
              ("Porto", "Lisbon", "Utrecht", "Leeds", "Gdansk", "Valencia", "Tartu",
               "Bergen", "Lyon", "Graz")),
    Attribute("Where does {name} work?",
              ("I work as an engineer at {v}.", "My job is at {v}, in the data team."),
              ("I handed in my notice and started at {v} this week.",
               "New job! I joined {v} on Monday."),
              ("Siemens", "Spotify", "Zalando", "Philips", "Maersk", "Nokia", "Bosch",
               "Ericsson", "Adyen", "Ocado")),
    Attribute("What car does {name} drive?",
              ("I drive a {v} to work.", "My car is a {v}, old but reliable."),
              ("I sold the old car and bought a {v}.", "Traded in my car for a {v} yesterday."),
              ("Volvo V60", "Toyota Corolla", "Skoda Octavia", "Renault Zoe", "Kia Niro",
               "Ford Focus", "Fiat Panda", "Tesla Model 3")),
    Attribute("Which football team does {name} support?",
              ("I have supported {v} since I was a kid.", "{v} is my team, every match."),
              ("Honestly I switched allegiance, I cheer for {v} now.",
               "After this season I'm a {v} fan instead."),
              ("Ajax", "Benfica", "Celtic", "Napoli", "Porto FC", "Dortmund", "Sevilla",
               "Galatasaray")),
    Attribute("What is {name} studying?",
              ("I'm studying {v} in evening classes.", "My course is {v}, two nights a week."),
              ("I dropped that course and enrolled in {v} instead.",
               "Switched programmes, it's {v} for me from now on."),
              ("accounting", "marine biology", "Japanese", "carpentry", "statistics",
               "architecture", "nursing", "photography")),
    Attribute("Which gym does {name} go to?",
              ("I train at {v} most mornings.", "My gym is {v}, near the station."),
              ("I cancelled my membership and signed up at {v}.",
               "Changed gyms, I go to {v} now."),
              ("Iron Temple", "FitZone", "Basecamp Gym", "PulseWorks", "Core Club",
               "Anytime Fitness", "Urban Lift")),
    Attribute("What diet does {name} follow?",
              ("I eat a {v} diet.", "For years my diet has been {v}."),
              ("The doctor changed my plan, I'm on a {v} diet now.",
               "I gave that up and went {v} last month."),
              ("vegetarian", "vegan", "pescatarian", "low-carb", "Mediterranean",
               "gluten-free")),
    Attribute("What instrument does {name} play?",
              ("I play the {v} in a small band.", "My instrument is the {v}."),
              ("I sold my old instrument and took up the {v}.",
               "These days I only practise the {v}."),
              ("cello", "trumpet", "bass guitar", "piano", "violin", "drums", "saxophone")),
)

SMALL_TALK = ("The weather was awful on the way in today.", "Did anyone watch the film last night?",
              "I need more coffee before this meeting.", "The train was late again this morning.",
              "My neighbour's dog kept barking all night.", "We should book the restaurant early.",
              "I finally finished that long novel.", "The market had great tomatoes today.")


@dataclass(frozen=True)
class Question:
    text: str
    actor: str
    first: str            # the first statement's id
    update: str | None    # the update's id (None: unchanged)
    between: int | None   # an instant between the two statements
    kind: str             # "unchanged", "restated" (same words, new value), "reworded"


def build(g: Grimoire, clock: FrozenClock, people: int, rng: random.Random) -> list[Question]:
    """Write the generated turns in time order, each when it happened (the clock set to
    its timestamp, so ``at`` sees what was known then), and return the questions."""
    end = clock.now
    start = end - 400 * DAY
    turns: list[tuple[int, str, str, str]] = []  # (time, key, actor, text)
    plans: list[tuple[str, str, str, str | None, int | None, str]] = []
    for name in rng.sample(NAMES, people):
        attrs = rng.sample(ATTRIBUTES, rng.randint(4, len(ATTRIBUTES)))
        for n, attr in enumerate(attrs):
            values = rng.sample(attr.values, 2)
            t1 = start + rng.randint(0, 200) * DAY + rng.randint(0, DAY)
            key = f"{name}/{n}"
            template = rng.choice(attr.first)
            turns.append((t1, key + "/first", name, f"{name}: " + template.format(v=values[0])))
            update, between, kind = None, None, "unchanged"
            if rng.random() < 0.5:
                t2 = t1 + rng.randint(3, 150) * DAY
                # Half restate the first statement with the new value, half say it in
                # other words.
                kind = rng.choice(("restated", "reworded"))
                said = template if kind == "restated" else rng.choice(attr.update)
                turns.append((t2, key + "/update", name, f"{name}: " + said.format(v=values[1])))
                update, between = key + "/update", (t1 + t2) // 2
            plans.append((attr.question.format(name=name), name, key + "/first", update,
                          between, kind))
        for i in range(rng.randint(3, 8)):
            turns.append((start + rng.randint(0, 380) * DAY, f"{name}/talk{i}", name,
                          f"{name}: " + rng.choice(SMALL_TALK)))
    ids: dict[str, str] = {}
    for t, key, actor, text in sorted(turns):
        clock.set(t)
        ids[key] = g.episode_write(text=text, actor=actor, thread=f"chat-{actor.lower()}",
                                   timestamp=t)["id"]
    clock.set(end)
    return [Question(text, actor, ids[first], None if update is None else ids[update], between,
                     kind) for text, actor, first, update, between, kind in plans]


def _ranking(g: Grimoire, q: Question, at: int | None = None) -> list[str]:
    params = {"query": q.text, "kinds": ["episode"], "k": 10, "mode": "browse"}
    if at is not None:
        params["at"] = at
    return [item["id"] for item in g.retrieve(**params)["items"]]


def _above(ranking: list[str], upper: str, lower: str) -> bool:
    if upper not in ranking:
        return False
    return lower not in ranking or ranking.index(upper) < ranking.index(lower)


def run(seed: int, people: int, config: Config) -> dict[str, list[float]]:
    rng = random.Random(seed)
    clock = FrozenClock()
    rows: dict[str, list[float]] = {"restated": [], "reworded": [], "unchanged": [],
                                    "past": []}
    with tempfile.TemporaryDirectory(prefix="bench-updates-") as tmp, \
            Grimoire.open(Path(tmp) / "data", config=config, clock=clock) as g:
        questions = build(g, clock, people, rng)
        for q in questions:
            ranking = _ranking(g, q)
            if q.update is None:
                rows["unchanged"].append(float(bool(ranking) and ranking[0] == q.first))
                continue
            rows[q.kind].append(float(_above(ranking, q.update, q.first)))
            past = _ranking(g, q, at=q.between)
            rows["past"].append(float(_above(past, q.first, q.update)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a dotted config override, e.g. retrieval.supersede=false")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--people", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="1 seed, 8 people")
    args = parser.parse_args(argv)
    if args.quick:
        apply_quick(parser, args, {"seeds": 1, "people": 8})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    started = time.perf_counter()
    table: dict[str, dict[str, list[float]]] = {}
    overrides = json_settings(args.set)
    variants = {"retrieve": Config().replace(**overrides)}
    if hasattr(Config().retrieval, "supersede") and "retrieval.supersede" not in overrides:
        variants["supersede off"] = variants["retrieve"].replace(
            **{"retrieval.supersede": False})
    for label, config in variants.items():
        for seed in range(args.seeds):
            for row, values in run(seed, args.people, config).items():
                table.setdefault(label, {}).setdefault(row, []).extend(values)
    print(f"knowledge updates: {args.seeds} seed(s) x {args.people} people, "
          f"{time.perf_counter() - started:.0f} s\n")
    names = ("restated", "reworded", "unchanged", "past")
    print(f"{'row':<16}" + "".join(f" {n:>10}" for n in names))
    for label, rows in table.items():
        print(f"{label:<16}" + "".join(
            f" {sum(rows[n]) / len(rows[n]) if rows[n] else float('nan'):>10.3f}"
            for n in names))
    print(" " * 16 + "".join(f" {'n=' + str(len(next(iter(table.values()))[n])):>10}"
                             for n in names))
    return 0
