"""Where retrieval's per-query work goes: off the caller's path, and not repeated.

Each test pins one mechanism of issue 15's retrieval work by its behaviour (never by
timing): the log write is deferred until the answer has gone (over the socket it is not
even handed to a thread before) but never makes a waiter wait; the log's rounding and
baseline are computed from the handed-over breakdowns; the keyword and graph backends run
as one job in the read pool, at the lowest priority, and the caller computes what the pool
has not started and waits for what it is running; a pooled episode's candidate (with its
vector) and the KG walk from a query's entities are computed once, until what they depend
on changes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.retrieval import pipeline
from grimoire.retrieval.stages import mentions, sources, writes
from grimoire.retrieval.stages.log import LogJob, logged
from grimoire.runtime.afterwards import answering, later
from tests.retrieval.retrieve_support import HOUR, open_grimoire, put_entry


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Grimoire]:
    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as grimoire:
        grimoire.episode_write(text="gas spiked to 90 gwei on base", type="observation")
        clock.advance(HOUR)
        grimoire.episode_write(text="swap WETH for USDC filled with 30 bps slippage",
                               type="action", outcome="negative")
        put_entry(grimoire, "Avoid swaps when gas is above 60 gwei on base")
        yield grimoire


def test_the_log_write_waits_for_the_answer_but_never_for_a_waiter(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an (absurdly) long deferral the row is not written when retrieve returns; a
    waiter (``outcome.report`` waits the same way) ends the deferral and finds it."""
    monkeypatch.setattr(writes, "DEFER_S", 3600.0)
    result = g.retrieve(query="gas on base", k=3)
    rid = result["retrieval_id"]
    assert g.context.semantic.get_retrieval(rid) is None  # deferred, not lost
    writes.wait(g.context, rid)
    logged_row = g.context.semantic.get_retrieval(rid)
    assert logged_row is not None and [i["id"] for i in logged_row.items] == [
        i["id"] for i in result["items"]]
    answer = g.outcome_report(retrieval_id=g.retrieve(query="swap slippage")["retrieval_id"],
                              outcome="positive")
    assert answer["updated"] >= 0  # found its row at once: the deferral was cut short


def test_the_log_rounds_the_handed_over_breakdowns_and_adds_the_pool_baseline() -> None:
    """The pipeline hands the breakdowns over as they are; the writer-side ``logged``
    rounds them and adds each factor's mean over the whole pool."""
    def breakdown(v: float) -> dict[str, dict[str, float]]:
        return {name: {"value": v, "weight": 0.2, "contribution": v * 0.2}
                for name in ("rrf", "confidence", "quality", "recency", "regime")}

    shown = breakdown(0.123456789)
    job = LogJob("r1", "q", "deciding", [{"id": "a", "kind": "episode", "rank": 1,
                                          "score": 0.5, "factors": shown,
                                          "context": {"regime": None, "strategy": None}}],
                 now=0, pool_factors=(shown, breakdown(0.5), breakdown(1.0)))
    (item,) = logged(job)
    assert item["factors"]["rrf"] == {"value": 0.123457, "weight": 0.2,
                                      "contribution": 0.024691}
    assert item["context"]["baseline"]["rrf"] == pytest.approx((0.123456789 + 1.5) / 3,
                                                               abs=1e-6)
    assert shown["rrf"]["value"] == 0.123456789  # the answer's breakdown is not touched


def test_keyword_and_graph_backends_are_one_job_in_the_read_pool(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """BM25 (entries, episodes) and the graph backend go to the read pool as one job, so
    one extra thread runs beside the query embedding instead of three."""
    submitted: list[Any] = []

    class Recorder:
        def submit(self, fn: Any, *args: Any) -> Future[Any]:
            submitted.append(fn)
            fn(*args)
            done: Future[Any] = Future()
            done.set_result(None)
            return done

    monkeypatch.setattr(sources, "_reads", lambda: Recorder())
    result = g.retrieve(query="swap WETH on base", k=5,
                        entities=[{"kind": "token", "id": "WETH"}])
    assert result["items"]
    assert len(submitted) == 1
    assert {"bm25.episode", "bm25.entry"} <= set(result["trace"]["backends"])


def test_close_lands_a_deferred_log_write(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing right after a retrieval still writes its (deferred) log row."""
    monkeypatch.setattr(writes, "DEFER_S", 3600.0)
    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as grimoire:
        grimoire.episode_write(text="gas spiked to 90 gwei on base")
        rid = grimoire.retrieve(query="gas")["retrieval_id"]
    with open_grimoire(tmp_path / "data", clock) as reopened:
        assert reopened.context.semantic.get_retrieval(rid) is not None


def test_over_the_socket_the_log_hand_off_waits_for_the_answer(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``answering()`` (the socket server's block around one request and its answer)
    the log write is registered at once but reaches the pool only when the block ends; a
    waiter inside the block (the same thread) starts it instead of deadlocking."""
    started: list[Any] = []
    real_pool = writes._pool()

    class Recorder:
        def submit(self, fn: Any, *args: Any) -> Future[Any]:
            started.append(fn)
            return real_pool.submit(fn, *args)

    monkeypatch.setattr(writes, "_pool", lambda: Recorder())
    with answering():
        rid = g.retrieve(query="gas on base", k=3)["retrieval_id"]
        assert started == []  # held: no thread woken while the answer is on its way
        assert rid in writes._pending(g.context)  # but a waiter already finds it
    assert len(started) == 1
    writes.wait(g.context, rid)
    assert g.context.semantic.get_retrieval(rid) is not None

    with answering():
        rid = g.retrieve(query="swap slippage", k=3)["retrieval_id"]
        writes.wait(g.context, rid)  # would block for ever if it waited for the block's end
        assert g.context.semantic.get_retrieval(rid) is not None
    assert len(started) == 2  # started once, by the waiter


def test_answering_runs_held_work_after_the_block_even_when_it_fails() -> None:
    ran: list[str] = []
    assert later(lambda: ran.append("x")) is False  # no request being answered: not held
    with pytest.raises(RuntimeError), answering():
        assert later(lambda: ran.append("a"))
        assert later(lambda: 1 / 0)  # logged, never raised: the next one still runs
        assert later(lambda: ran.append("b"))
        assert ran == []
        raise RuntimeError("the answer could not be sent")
    assert ran == ["a", "b"]
    assert later(lambda: None) is False


def test_a_pooled_episode_seen_before_has_its_vector_from_the_candidate_cache(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """The episode candidates are cached per id (an episode never changes): a second
    retrieve pooling the same episodes looks up no vector, and a new episode only its own."""
    asked: list[list[str]] = []
    store = g.context.episodes
    real = store.vectors_for
    monkeypatch.setattr(store, "vectors_for", lambda ids: asked.append(list(ids)) or real(ids))
    first = g.retrieve(query="gas on base swap slippage", k=5)
    assert asked and {i["id"] for i in first["items"] if i["kind"] == "episode"} <= {
        i for ids in asked for i in ids}
    asked.clear()
    again = g.retrieve(query="gas on base swap slippage", k=5)
    assert asked == []
    assert [i["id"] for i in again["items"]] == [i["id"] for i in first["items"]]
    new_id = g.episode_write(text="gas on base fell to 3 gwei", type="observation")["id"]
    asked.clear()  # the write's own look-up (auto-linking its causes) is not the retrieve's
    g.retrieve(query="gas on base swap slippage", k=5)
    # Besides the new candidate's own: the relevance background's evenly spaced sample,
    # taken again once the store's size changed (``relevance.background``), read by id.
    assert [new_id] in asked and len([ids for ids in asked if ids != [new_id]]) <= 1


def test_the_kg_walk_is_cached_until_the_graph_changes(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk from a query's entities to their nearest mentioned ones runs once per set
    of entities while the graph's triple count stays; a new fact walks again."""
    walks: list[tuple[str, ...]] = []
    real = mentions._walk_nearest
    monkeypatch.setattr(mentions, "_walk_nearest", lambda ctx, keys, hops, limit: (
        walks.append(tuple(keys)) or real(ctx, keys, hops, limit)))
    entities = [{"kind": "token", "id": "WETH"}]
    g.retrieve(query="swap", entities=entities)
    g.retrieve(query="swap again", entities=entities)
    assert walks == [("token:WETH",)]
    g.kg_assert(subject={"kind": "token", "id": "WETH"}, predicate="price_correlation",
                object={"kind": "oracle", "id": "chainlink-eth"}, valid_from=1)
    g.retrieve(query="swap", entities=entities)
    assert len(walks) == 2


def test_a_backend_the_read_pool_has_not_run_is_computed_by_the_caller(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool runs at the lowest priority, so the caller never waits for it: whatever it
    has not finished when the caller needs it (here: nothing, it never runs) the caller
    computes itself, with the same result; the pool's copy is cancelled."""
    expected = g.retrieve(query="swap WETH on base", k=5,
                          entities=[{"kind": "token", "id": "WETH"}])
    queued: list[Any] = []

    class Stalled:
        def submit(self, fn: Any, *args: Any) -> Future[Any]:
            queued.append(args)  # accepted, never run
            job: Future[Any] = Future()
            job.set_result(None)
            return job

    monkeypatch.setattr(sources, "_reads", lambda: Stalled())
    answers: list[dict[str, Any]] = []
    caller = threading.Thread(target=lambda: answers.append(g.retrieve(
        query="swap WETH on base", k=5, entities=[{"kind": "token", "id": "WETH"}])),
        daemon=True)
    caller.start()
    caller.join(60)
    assert answers, "retrieve waited for a read pool that never ran its job"
    result = answers[0]
    assert len(queued) == 1
    work = queued[0][0]
    assert len(work) == 3 and all(future.cancelled() for future, _, _ in work)
    assert [i["id"] for i in result["items"]] == [i["id"] for i in expected["items"]]
    assert result["trace"]["backends"] == expected["trace"]["backends"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_read_pool_runs_at_the_lowest_priority() -> None:
    """Its threads are reniced (not the process): the keyword backends fill the gaps the
    query embedding leaves instead of preempting it."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    seen = sources._reads().submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    assert seen == max(own, sources._READ_NICE)
    assert os.getpriority(os.PRIO_PROCESS, 0) == own


def test_close_waits_for_a_backend_still_running_in_the_read_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend the caller computed itself may still run in the pool after the answer;
    the stores do not close under it: ``close`` waits for it, then closes cleanly."""
    release = threading.Event()
    entered = threading.Event()
    real = sources._bm25_entries

    def slow_in_the_pool(*args: Any) -> Any:
        if threading.current_thread().name.startswith("grimoire-retrieval-reads"):
            entered.set()
            release.wait(30)
        return real(*args)

    def once_the_pool_has_started(*args: Any) -> Any:
        entered.wait(30)  # else the caller may cancel the pool's copy before it starts
        return real_finish(*args)

    real_finish = pipeline.finish_keyword
    monkeypatch.setattr(sources, "_bm25_entries", slow_in_the_pool)
    monkeypatch.setattr(pipeline, "finish_keyword", once_the_pool_has_started)
    clock = FrozenClock()
    g = open_grimoire(tmp_path / "data", clock)
    put_entry(g, "Avoid swaps when gas is above 60 gwei on base")
    result = g.retrieve(query="gas on base", k=3)
    assert entered.wait(30)  # the pool's copy is under way
    assert "bm25.entry" in result["trace"]["backends"]  # the caller did not wait for it
    closing = threading.Thread(target=g.close, daemon=True)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # waiting for the pool's copy, not closing under it
    release.set()
    closing.join(30)
    assert not closing.is_alive()


def test_bm25_leaves_out_words_its_weighting_would_zero(tmp_path: Path) -> None:
    """FTS5 clamps the IDF of a word in half the documents or more to 1e-6: such a word
    cannot reorder what a rarer word matches, so the entry query leaves it out (fewer
    matches to score); a query of only such words keeps them all (FTS5 still orders
    those matches, and that is all BM25 has to give)."""
    from grimoire.retrieval.stages.terms import selective_words

    clock = FrozenClock()
    with open_grimoire(tmp_path / "data", clock) as g:
        for text in ("WETH swaps slip on base", "WETH gas spikes at noon",
                     "WETH oracle lags spot", "WETH pools thin out at night"):
            put_entry(g, text)
        words = ["WETH", "oracle"]
        assert selective_words(g.context, "entry", words) == "oracle"
        assert selective_words(g.context, "entry", ["WETH"]) == "WETH"
        found = g.retrieve(query="WETH oracle", k=3, kinds=["entry"])
        assert found["items"][0]["content"] == "WETH oracle lags spot"


def test_the_caller_takes_a_backend_the_pool_is_running_instead_of_computing_it_again(
        g: Grimoire, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once it has computed the backends the pool has not started, the caller waits for the
    one the pool is running (it has a core by then) rather than computing it a second
    time beside it."""
    entered = threading.Event()
    release = threading.Event()
    calls: list[str] = []
    real = sources._bm25_entries

    def in_the_pool_until_released(*args: Any) -> Any:
        calls.append(threading.current_thread().name)
        if threading.current_thread().name.startswith("grimoire-retrieval-reads"):
            entered.set()
            release.wait(30)
        return real(*args)

    def once_the_pool_has_started(*args: Any) -> Any:
        entered.wait(30)
        threading.Timer(0.2, release.set).start()  # the pool's copy is running meanwhile
        return real_finish(*args)

    real_finish = pipeline.finish_keyword
    monkeypatch.setattr(sources, "_RUNNING_WAIT_S", 30.0)
    monkeypatch.setattr(sources, "_bm25_entries", in_the_pool_until_released)
    monkeypatch.setattr(pipeline, "finish_keyword", once_the_pool_has_started)
    result = g.retrieve(query="gas on base", k=3)
    assert "bm25.entry" in result["trace"]["backends"]
    assert len(calls) == 1 and calls[0].startswith("grimoire-retrieval-reads")
