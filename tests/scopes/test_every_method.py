"""Every method of the method table, called over the socket in two scopes: each answers
in the scope it was asked (its ``scope`` says so), and what one scope wrote is not found
by the other."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.api import METHODS
from tests.service.daemon_support import ServerThread, raw_connect, rpc, short_dir

SCOPES = ("alpha", "beta")


@pytest.fixture
def served() -> Iterator[tuple[ServerThread, Path]]:
    with short_dir() as where, Grimoire.open(where / "data", clock=FrozenClock(),
                                             embedder=HashEmbedder()) as g:
        st = ServerThread(g, where / "data" / "grimoire.sock",
                          data_dir=where / "data").start()
        try:
            yield st, where
        finally:
            st.stop()


class Caller:
    def __init__(self, sock: socket.socket, scope: str) -> None:
        self.sock, self.scope, self.called = sock, scope, set[str]()

    def __call__(self, method: str, **params: Any) -> dict[str, Any]:
        """The method's result in this scope (a JSON-RPC error fails the test)."""
        self.called.add(method)
        answer = rpc(self.sock, method, {**params, "scope": self.scope})
        assert "result" in answer, (self.scope, method, answer)
        result: dict[str, Any] = answer["result"]
        assert result["scope"] == self.scope, (method, result)
        return result

    def error(self, method: str, **params: Any) -> str:
        answer = rpc(self.sock, method, {**params, "scope": self.scope})
        assert "error" in answer, (self.scope, method, answer)
        kind: str = answer["error"]["data"]["type"]
        return kind


def _every_method(call: Caller, clade: Path) -> dict[str, str]:
    """Call each method once in ``call``'s scope; the ids it wrote."""
    s = call.scope
    assert call("health")["ok"]
    cause = call("episode.write", text=f"gas spiked to 90 gwei on {s} pool", type="observation",
                 regime="high_vol")["id"]
    (effect,) = call("episode.write_batch", episodes=[
        {"text": f"swap on {s} pool lost to fees", "type": "action", "actions": ["swap"],
         "tool": "uniswap", "outcome": "negative", "regime": "high_vol", "scope": s}])["ids"]
    assert call("episode.get", id=cause)["text"].endswith(f"{s} pool")
    call("causal.link", cause_id=cause, effect_id=effect, relationship="fees")
    assert [c["id"] for c in call("causal.chain", id=effect)["chain"]][-2:] == [cause, effect]
    assert effect in {c["id"] for c in call("causal.consequences", id=cause)["consequences"]}
    entry = call("entry.add", category="warning",
                 content=f"Avoid swaps on the {s} pool when gas is high because fees eat "
                 "the gain")["id"]
    assert call("entry.get", id=entry)["id"] == entry
    assert entry in {e["id"] for e in call("entry.list")["entries"]}
    assert call("entry.explain", id=entry)["entry"]["id"] == entry
    found = call("retrieve", query=f"gas on the {s} pool", k=5)
    assert {i["id"] for i in found["items"]} <= {cause, effect, entry}
    call("rules.applicable", situation={"actions": ["swap"], "regime": "high_vol"})
    call("outcome.report", retrieval_id=found["retrieval_id"], outcome="negative")
    subject = {"kind": "pool", "id": "shared"}  # the same subject in both scopes
    fact = call("kg.assert", subject=subject, predicate="custom:feed",
                object={"kind": "oracle", "id": f"oracle-{s}"}, valid_from=10,
                source_episode=cause)["id"]
    (triple,) = call("kg.at", subject=subject, block=20)["triples"]
    assert triple["object"]["value"]["id"] == f"oracle-{s}"
    assert [t["id"] for t in call("kg.known_at", subject=subject, time=2**62)["triples"]] == [
        fact]
    assert [n["entity"]["id"] for n in call("kg.neighbors", subject=subject,
                                            block=20)["neighbors"]] == [f"oracle-{s}"]
    call("kg.invalidate", id=fact, at=30)
    call("curator.run")
    assert f"{s} pool" in call("playbook.get")["markdown"]
    assert call("status")["scope"] == s
    call("clade.publish", uri=str(clade / s), agent=f"agent-{s}")
    call("clade.pull", uri=str(clade / s), agent=f"agent-{s}")
    planned = call("forget", episode=cause, dry_run=True)
    assert call("episode.get", id=cause)["id"] == cause  # a dry run changes nothing
    call("forget", episode=effect)
    assert call.error("episode.get", id=effect) == "NotFoundError"
    assert planned
    return {"episode": cause, "entry": entry, "fact": fact,
            "retrieval": found["retrieval_id"]}


def test_every_method_answers_in_its_scope_and_never_finds_the_others(
        served: tuple[ServerThread, Path]) -> None:
    st, where = served
    wrote: dict[str, dict[str, str]] = {}
    with raw_connect(st.path) as sock:
        for scope in SCOPES:
            call = Caller(sock, scope)
            wrote[scope] = _every_method(call, where / "clade")
            assert call.called == set(METHODS), set(METHODS) - call.called
        for scope, other in (("alpha", "beta"), ("beta", "alpha")):
            call, theirs = Caller(sock, scope), wrote[other]
            assert call.error("episode.get", id=theirs["episode"]) == "NotFoundError"
            assert call.error("entry.get", id=theirs["entry"]) == "NotFoundError"
            assert call.error("entry.explain", id=theirs["entry"]) == "NotFoundError"
            assert call.error("kg.invalidate", id=theirs["fact"], at=40) == "NotFoundError"
            assert call.error("outcome.report", retrieval_id=theirs["retrieval"],
                              outcome="positive") == "NotFoundError"
            assert call.error("causal.chain", id=theirs["episode"]) == "NotFoundError"
            ids = {e["id"] for e in call("entry.list", status=None)["entries"]}
            assert theirs["entry"] not in ids
        default = Caller(sock, "default")
        for scope in SCOPES:  # nor does the default scope find either
            assert default.error("episode.get", id=wrote[scope]["episode"]) == "NotFoundError"
            assert default.error("entry.get", id=wrote[scope]["entry"]) == "NotFoundError"
    # each scope is its own directory
    data = where / "data"
    assert sorted(p.name for p in (data / "scopes").iterdir()) == ["alpha", "beta"]
