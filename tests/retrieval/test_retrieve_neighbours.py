"""The reranker's pool: deeper backend lists and the thread neighbours of the pool's best
(``stages.neighbours``), on real stores. The order without the reranker is untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grimoire.retrieval.stages.learned import FEATURE_SINK
from grimoire.retrieval.stages.neighbours import LIST, threads_of
from tests.retrieval.retrieve_support import open_grimoire

MINUTE = 60_000
START = 1_767_225_600_000
CHAT = ["Anna: When did you go to the lighthouse concert with the falcon band?",
        "Ben: Last Saturday!",
        "Anna: Nice, who played?",
        "Ben: Mostly covers, some originals.",
        "Anna: Sounds fun."]
OTHER = ["Carl: The kitchen cupboards are pale green now.",
         "Dora: My train to the coast left late on Sunday.",
         "Carl: I bought a new kettle for the office."]


def _store(g: Any) -> dict[str, str]:
    named = {}
    for i, text in enumerate(CHAT):
        named[text] = g.episode_write(text=text, thread="chat", actor=text.split(":")[0],
                                      timestamp=START + i * MINUTE)["id"]
    for i, text in enumerate(OTHER):
        named[text] = g.episode_write(text=text, thread=f"other-{i}",
                                      timestamp=START + (10 + i) * MINUTE)["id"]
    return named


def _pool(g: Any, query: str) -> list[str]:
    sink: list[Any] = []
    g.context.extras[FEATURE_SINK] = sink
    try:
        g.retrieve(query=query, k=3, kinds=["episode"], mode="browse")
    finally:
        g.context.extras.pop(FEATURE_SINK, None)
    return list(sink[-1][1])


QUERY = "lighthouse concert falcon band"
# One item per backend, the keyword match fused first (the hash embedder's vectors mean
# nothing): the pool is the query's match and what the mechanism under test adds.
BM25_FIRST: dict[str, Any] = {
    "retrieval.candidates": 1, "retrieval.rerank_candidates": 1,
    "retrieval.fusion_weights": {"vector": 0.0, "bm25": 1.0, "graph": 0.0, "temporal": 0.0,
                                 "entity": 0.0, "hop": 0.0}}


def test_the_turn_after_the_best_match_joins_the_reranker_pool(tmp_path: Path) -> None:
    # "Last Saturday!" shares no word with the query; it joins the pool as the neighbour of
    # the turn that matches it, and the turn two away from it does too (width 2), the
    # third does not.
    with open_grimoire(tmp_path, **BM25_FIRST, **{"retrieval.rerank_seeds": 1}) as g:
        named = _store(g)
        pool = _pool(g, QUERY)
        assert named[CHAT[0]] in pool
        assert named[CHAT[1]] in pool and named[CHAT[2]] in pool
        assert named[CHAT[3]] not in pool
        out = g.retrieve(query=QUERY, k=5, kinds=["episode"], mode="browse",
                         **{"explain": True})
        assert LIST not in out["trace"]["backends"]  # the reranker is off: today's pool


def test_without_neighbours_the_answer_turn_is_not_pooled(tmp_path: Path) -> None:
    with open_grimoire(tmp_path, **BM25_FIRST, **{"retrieval.rerank_neighbours": 0}) as g:
        named = _store(g)
        assert named[CHAT[1]] not in _pool(g, QUERY)


def test_turns_written_later_extend_the_thread_and_a_forget_resets_it(
        tmp_path: Path) -> None:
    with open_grimoire(tmp_path, **BM25_FIRST, **{"retrieval.rerank_seeds": 1,
                                                  "retrieval.rerank_neighbours": 1}) as g:
        named = _store(g)
        _pool(g, QUERY)
        held = threads_of(g.context).turns["chat"]
        assert held == [named[t] for t in CHAT]
        late = g.episode_write(text="Ben: See you at the next lighthouse falcon concert!",
                               thread="chat", actor="Ben", timestamp=START + 30 * MINUTE)["id"]
        _pool(g, "next lighthouse falcon concert")
        assert threads_of(g.context).turns["chat"][-1] == late
        g.forget(episode=named[CHAT[4]])
        pool = _pool(g, "next lighthouse falcon concert")
        assert named[CHAT[4]] not in threads_of(g.context).turns["chat"]
        assert named[CHAT[3]] in pool  # the turn before the forgotten one is now adjacent



def test_the_reranker_pool_takes_each_backend_deeper(tmp_path: Path) -> None:
    # Four turns match the query, each alone in its thread (no neighbour joins): the pool
    # holds each backend's top retrieval.rerank_candidates, not retrieval.candidates.
    texts = [f"Eve: the falcon concert number {i} at the lighthouse" for i in range(4)]
    for depth in (1, 4):
        with open_grimoire(tmp_path / str(depth), **{
                **BM25_FIRST, "retrieval.rerank_candidates": depth,
                "retrieval.rerank_neighbours": 0}) as g:
            ids = [g.episode_write(text=t, thread=f"t{i}", timestamp=START + i * MINUTE)["id"]
                   for i, t in enumerate(texts)]
            pool = _pool(g, QUERY)
            found = sum(i in pool for i in ids)
            assert found == 4 if depth == 4 else found < 4  # at 1: one a backend
