"""Newer facts first: a later restatement with a changed value ranks above what it updates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grimoire.clock import FrozenClock
from grimoire.retrieval.stages.terms import terms_of
from grimoire.retrieval.supersede import restates
from tests.retrieval.retrieve_support import HOUR, ids, open_grimoire

OLD = "Maren: My flat is in Porto, right by the river."
NEW = "Maren: My flat is in Lisbon, right by the river."
OTHERS = ("Maren: My job is at Adyen, in the data team.",
          "Maren: I need more coffee before this meeting.",
          "Tobias: My flat is in Leeds, right by the river.")


def _store(tmp_path: Path, **overrides: Any) -> tuple[Any, dict[str, str], int]:
    clock = FrozenClock()
    t = clock.now - 30 * 24 * HOUR
    g = open_grimoire(tmp_path, clock, **overrides)
    named = {}
    for when, (key, text) in enumerate((("old", OLD), ("new", NEW))):
        clock.set(t + when * 10 * 24 * HOUR)
        named[key] = g.episode_write(text=text, actor="Maren", thread="chat",
                                     timestamp=clock.now)["id"]
    for i, text in enumerate(OTHERS):
        clock.set(t + (i + 1) * HOUR)
        g.episode_write(text=text, actor=text.split(":")[0], thread="chat", timestamp=clock.now)
    clock.set(t + 20 * 24 * HOUR)
    return g, named, t + 5 * 24 * HOUR


def _ask(g: Any, **params: Any) -> list[str]:
    return ids(g.retrieve(query="Maren flat Porto river", kinds=["episode"], k=5,
                          mode="browse", **params))


def test_the_update_ranks_above_the_statement_it_supersedes(tmp_path: Path) -> None:
    g, named, _ = _store(tmp_path)
    with g:
        ranking = _ask(g)
        assert ranking.index(named["new"]) < ranking.index(named["old"])
        item = next(i for i in g.retrieve(query="Maren flat Porto river", kinds=["episode"],
                                          k=5, mode="browse")["items"]
                    if i["id"] == named["old"])
        assert "superseded" in item["factors"]


def test_without_the_stage_the_better_worded_old_statement_leads(tmp_path: Path) -> None:
    # The query names the old value: on its own it ranks first (the test above can fail).
    g, named, _ = _store(tmp_path, **{"retrieval.supersede": False})
    with g:
        ranking = _ask(g)
        assert ranking.index(named["old"]) < ranking.index(named["new"])


def test_at_still_shows_the_past(tmp_path: Path) -> None:
    g, named, between = _store(tmp_path)
    with g:
        ranking = _ask(g, at=between)
        assert named["old"] in ranking and named["new"] not in ranking


def test_restates_needs_a_substituted_value_and_most_words_shared() -> None:
    assert restates(terms_of(OLD), terms_of(NEW)) is not None
    # Adding words changes no value.
    assert restates(terms_of(OLD), terms_of(OLD + " I love it there.")) is None
    # Identical statements: nothing changed.
    assert restates(terms_of(OLD), terms_of(OLD)) is None
    # Another statement by the same speaker shares only small words and the name.
    common = {"maren", "my", "is", "in", "the"}
    weight = lambda t: 0.1 if t in common else 1.0  # noqa: E731 (an IDF stand-in)
    assert restates(terms_of(OLD), terms_of(OTHERS[0]), weight) is None


def _naive(cands: list[Any], tiers: dict[str, int], weight: Any) -> dict[str, float]:
    """Every earlier/later pair through ``restates``: what ``supersede`` must equal."""
    scores = {c.id: 1.0 for c in cands}
    states = sorted((c for c in cands if tiers[c.id] >= 1), key=lambda c: (c.timestamp, c.id))
    for n, new in enumerate(states):
        for old in states[:n]:
            if (old.timestamp != new.timestamp
                    and old.provenance.get("actor") == new.provenance.get("actor")
                    and restates(terms_of(old.content), terms_of(new.content), weight)
                    is not None and scores[new.id] <= scores[old.id]):
                scores[new.id] = scores[old.id] + 1e-6
    return scores


def test_the_pruned_pair_search_finds_what_every_pair_would() -> None:
    # supersede groups by actor, weighs each term once and skips pairs whose weights are too
    # far apart: the lifts must be those of testing every pair with ``restates``.
    import random

    import numpy as np

    from grimoire.retrieval.candidates import Candidate
    from grimoire.retrieval.supersede import supersede

    rng = random.Random(3)
    words = ["flat", "porto", "lisbon", "river", "job", "team", "coffee", "is", "my", "in"]
    cands = [Candidate(id=f"e{i:03d}", kind="episode",
                       content=" ".join(rng.sample(words, rng.randint(0, 6))),
                       vector=np.ones(2, dtype=np.float32) / np.sqrt(2),
                       timestamp=rng.randint(0, 30), provenance={"actor": rng.choice("ab")})
             for i in range(120)]
    tiers = {c.id: rng.choice((0, 1, 1)) for c in cands}

    def weight(term: str) -> float:
        return 1.0 + len(term) / 3

    boosted, _, factors = supersede(cands, {c.id: 1.0 for c in cands}, tiers, {}, terms_of,
                                    weight)
    expected = _naive(cands, tiers, weight)
    assert boosted == expected
    assert sum("supersedes" in f for f in factors.values()) > 10  # the test has pairs to find


def test_with_the_reranker_ordering_the_update_still_leads(tmp_path: Path) -> None:
    # The shipped reranker reads the query's words, and the query names the old value: the
    # lift on its probabilities puts the update first (off, the old statement leads).
    for on in (True, False):
        g, named, _ = _store(tmp_path / str(on), **{"retrieval.reranker": "on",
                                                    "retrieval.supersede": on})
        with g:
            ranking = _ask(g)
            new_first = ranking.index(named["new"]) < ranking.index(named["old"])
            assert new_first is on


def test_a_query_repeating_the_old_statement_gets_it_first(tmp_path: Path) -> None:
    # Issue 24: an episode whose text the query repeats ranks first; the lift is for
    # questions about the current state, which do not repeat one statement in full.
    g, named, _ = _store(tmp_path)
    with g:
        ranking = ids(g.retrieve(query=OLD, kinds=["episode"], k=5, mode="browse"))
        assert ranking[0] == named["old"]
        assert ranking[1] == named["new"]
        ranking = ids(g.retrieve(query=NEW, kinds=["episode"], k=5, mode="browse"))
        assert ranking[0] == named["new"]
