"""No retrieve, KG or causal answer crosses a scope (a property test over real stores).

Every scope is written the same words, the same KG subjects and the same kinds of causal
links, so a query in one scope matches the others' rows as well as its own: an answer
that read another scope's store would return them. Each example adds to one open
Grimoire's three scopes and then asks every read method in each scope; every id and KG
object in an answer must have been written to that scope, never to another.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder

SCOPES = ("default", "alpha", "beta")
WORDS = ("gas", "spiked", "swap", "failed", "oracle", "lagged", "pool", "weth", "usdc",
         "slippage", "bridge", "delay", "vault", "drained", "price", "dropped")
SUBJECTS = [{"kind": "pool", "id": f"p{i}"} for i in range(3)]
FAR = 2**62  # a time after every record's recorded_at


class Written:
    """What each scope was given: every id its writes answered, its KG objects."""

    def __init__(self) -> None:
        self.ids: dict[str, set[str]] = {s: set() for s in SCOPES}
        self.episodes: dict[str, list[str]] = {s: [] for s in SCOPES}
        self.objects: dict[str, set[str]] = {s: set() for s in SCOPES}
        self.serial = itertools.count()

    def others(self, scope: str) -> set[str]:
        return set().union(*(self.ids[s] for s in SCOPES if s != scope))


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Grimoire, Written]]:
    root: Path = tmp_path_factory.mktemp("scopes")
    with Grimoire.open(root / "data", clock=FrozenClock(), embedder=HashEmbedder()) as g:
        yield g, Written()


def _ids(answer: Any) -> set[str]:
    """Every record id anywhere in an answer."""
    found: set[str] = set()
    if isinstance(answer, dict):
        if isinstance(answer.get("id"), str):
            found.add(answer["id"])
        for key, value in answer.items():
            if key in {"cause_id", "effect_id", "start_id", "source_episode"} and value:
                found.add(value)
            found |= _ids(value)
    elif isinstance(answer, list):
        for value in answer:
            found |= _ids(value)
    return found


def _no_crossing(answer: Any, scope: str, written: Written) -> None:
    leaked = _ids(answer) & written.others(scope)
    assert not leaked, (scope, leaked, answer)
    assert answer["scope"] == scope


texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=6).map(" ".join)
writes = st.lists(st.tuples(st.sampled_from(SCOPES), texts), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=writes, query=texts, subject=st.sampled_from(SUBJECTS),
       kinds=st.sampled_from([None, ["episode"], ["entry"], ["episode", "entry"]]))
def test_no_retrieve_kg_or_causal_answer_crosses_a_scope(
        memory: tuple[Grimoire, Written], writes: list[tuple[str, str]], query: str,
        subject: dict[str, str], kinds: list[str] | None) -> None:
    g, written = memory
    for scope, text in writes:
        n = next(written.serial)
        episode = g.episode_write(text=text, type="action", tool="uniswap",
                                  actions=["swap"], outcome="negative", scope=scope)["id"]
        if written.episodes[scope]:  # an explicit link from the scope's previous episode
            g.causal_link(cause_id=written.episodes[scope][-1], effect_id=episode,
                          scope=scope)
        written.episodes[scope].append(episode)
        written.ids[scope].add(episode)
        obj = f"o-{scope}-{n}"
        fact = g.kg_assert(subject=SUBJECTS[n % len(SUBJECTS)], predicate="custom:feed",
                           object={"kind": "oracle", "id": obj}, valid_from=n + 1,
                           source_episode=episode, scope=scope)
        written.ids[scope].add(fact["id"])
        written.objects[scope].add(obj)
        told = g.entry_add(category="warning", scope=scope,
                           content=f"Avoid swaps when {text} because fees eat the gain {n}")
        written.ids[scope] |= _ids(told)

    for scope in SCOPES:
        params: dict[str, Any] = {"query": query, "k": 20, "scope": scope}
        if kinds is not None:
            params["kinds"] = kinds
        _no_crossing(g.retrieve(**params), scope, written)
        _no_crossing(g.rules_applicable(situation={"actions": ["swap"], "tool": "uniswap"},
                                        scope=scope), scope, written)
        for answer in (g.kg_at(subject=subject, block=FAR, scope=scope),
                       g.kg_known_at(subject=subject, time=FAR, scope=scope)):
            _no_crossing(answer, scope, written)
            objects = {t["object"]["value"]["id"] for t in answer["triples"]}
            assert objects <= written.objects[scope], (scope, objects)
        near = g.kg_neighbors(subject=subject, block=FAR, max_hops=2, scope=scope)
        assert {n["entity"]["id"] for n in near["neighbors"]} <= written.objects[scope]
        _no_crossing(g.causal_chain(query=query, scope=scope), scope, written)
        _no_crossing(g.causal_consequences(query=query, scope=scope), scope, written)
        if written.episodes[scope]:
            last, first = written.episodes[scope][-1], written.episodes[scope][0]
            chain = g.causal_chain(id=last, scope=scope)
            _no_crossing(chain, scope, written)
            assert {c["id"] for c in chain["chain"]} <= written.ids[scope]
            _no_crossing(g.causal_consequences(id=first, scope=scope), scope, written)


def test_the_property_test_can_fail(memory: tuple[Grimoire, Written]) -> None:
    """The check above would see a crossing: the same query in two scopes each finds rows,
    and they are different rows (the words are shared, the stores are not)."""
    g, _ = memory
    for scope in ("alpha", "beta"):
        g.episode_write(text=f"gas spiked swap failed {scope}", scope=scope)
    alpha = _ids(g.retrieve(query="gas spiked swap failed", scope="alpha")["items"])
    beta = _ids(g.retrieve(query="gas spiked swap failed", scope="beta")["items"])
    assert alpha and beta and not alpha & beta
