"""Generated retrieval data: simulator episodes, questions whose answers are known, and
off-topic queries. Used by ``bench_recall.py`` (haystacks, off-topic rows) and
``train_reranker.py`` (the project's own training data); not run on its own.

- ``episodes(n, seed, start, end)``: ``n`` episodes of the built-in market simulator
  (default scenario), their timestamps spread evenly over ``[start, end]`` ms: a haystack
  unrelated to any conversation.
- ``questions(params, n, seed)``: for simulator action episodes, a question built from
  templates over the episode's own fields (strategy, action, size, pair, venue, result);
  the answer is that episode's ``ref``. Sizes are unique enough that one episode answers.
- ``off_topic(n, seed)``: queries about other domains (templates over vocabularies of
  astronomy, chemistry, tax, plumbing, software, sport, cooking chemistry…) and nonsense
  (random syllables), drawn with a seed; none is written with any conversation in view.
"""

from __future__ import annotations

import random
from typing import Any

from grimoire.feeds.sim.feed import SimFeed
from grimoire.feeds.sim.scenario import load_scenario

__all__ = ["episodes", "off_topic", "questions"]


def episodes(n: int, seed: int, start: int, end: int, scenario: str = "default"
             ) -> list[dict[str, Any]]:
    feed = SimFeed(load_scenario(scenario), seed)
    out: list[dict[str, Any]] = []
    tick = 0
    while len(out) < n:
        tick += 1
        out.extend(feed.poll(tick, 1_700_000_000_000 + tick * 40_000))
    out = out[:n]
    step = (end - start) / max(1, n - 1)
    keep = ("text", "type", "ref", "strategy", "tool", "token_pair", "importance", "outcome")
    return [{**{k: p[k] for k in keep if k in p}, "timestamp": int(start + i * step),
             "ref": f"{p['ref']}:{i}"} for i, p in enumerate(out)]


_ASK = (
    "How did the {strategy} {action} of {size} on {pair} turn out?",
    "What was the result of {strategy}'s {size} {action} via {tool}?",
    "Did the {action} of {size} on {pair} make or lose money?",
    "Which {strategy} trade was {size} on {pair}?",
    "What fees did the {size} {action} pay?",
    "How much slippage did {strategy} get on the {size} {action}?",
)


def questions(params: list[dict[str, Any]], n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    actions = [p for p in params if p.get("type") == "action" and p.get("strategy")]
    rng.shuffle(actions)
    out: list[tuple[str, str]] = []
    for p in actions[:n]:
        words = p["text"].split()
        # "<strategy> <action> $<size> on <pair> via <tool>: …"
        fields = {"strategy": p["strategy"], "action": words[1].replace("_", " "),
                  "size": words[2], "pair": p.get("token_pair", words[4]),
                  "tool": p.get("tool", "")}
        out.append((rng.choice(_ASK).format_map(fields), p["ref"]))
    return out


_DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "astronomy": (("redshift", "parallax", "luminosity", "orbital period", "albedo",
                   "spectral class"),
                  ("a Cepheid variable", "Betelgeuse", "the Crab pulsar", "Europa",
                   "a brown dwarf", "the Andromeda galaxy")),
    "chemistry": (("molar mass", "pKa", "boiling point", "oxidation state", "enthalpy of "
                   "formation", "solubility product"),
                  ("potassium permanganate", "benzaldehyde", "sulfuric acid", "xenon "
                   "difluoride", "ammonium nitrate", "cyclohexane")),
    "tax": (("depreciation schedule", "withholding rate", "filing deadline", "deduction "
             "limit", "capital gains treatment", "VAT threshold"),
            ("a sole proprietorship", "a municipal bond", "a foreign trust",
             "an S corporation", "a rental duplex", "a 401(k) rollover")),
    "plumbing": (("thread pitch", "pressure rating", "torque spec", "flow rate",
                  "gasket size", "venting requirement"),
                 ("a PEX manifold", "a backflow preventer", "a tankless heater",
                  "a sump pump check valve", "a copper sweat fitting", "a P-trap")),
    "software": (("memory layout", "garbage collector", "linker flag", "race condition",
                  "exit code", "default timeout"),
                 ("a Rust borrow checker error", "the Linux OOM killer", "a Kubernetes "
                  "readiness probe", "a PostgreSQL vacuum", "a TCP keepalive",
                  "a WebAssembly module")),
    "sport": (("batting average", "offside rule", "scrum formation", "lap record",
               "penalty count", "draft pick"),
              ("the 1998 Tour de France", "a cricket test match", "curling",
               "Formula 1 qualifying", "water polo", "the NHL trade deadline")),
}
_TEMPLATES = (
    "What is the {prop} of {thing}?",
    "How do I find the {prop} for {thing}?",
    "Explain the {prop} of {thing} in simple terms.",
    "Why does {thing} have such a high {prop}?",
    "Compare the {prop} of {thing} and {other}.",
)
_SYLLABLES = ("ka", "zu", "mir", "tol", "vex", "qua", "dro", "plin", "snor", "gri", "yop",
              "thax", "lum", "bre", "osk", "fen")


def off_topic(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    domains = sorted(_DOMAINS)
    out: list[str] = []
    for i in range(n):
        if i % 4 == 3:  # nonsense: 3-6 random words of 2-3 syllables
            words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
                     for _ in range(rng.randint(3, 6))]
            out.append(" ".join(words).capitalize() + "?")
            continue
        props, things = _DOMAINS[rng.choice(domains)]
        thing, other = rng.sample(things, 2)
        out.append(rng.choice(_TEMPLATES).format(prop=rng.choice(props), thing=thing,
                                                 other=other))
    return out
