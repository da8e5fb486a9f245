"""The MCP server: one tool per agent need, each a thin bridge to the daemon's socket.

Named as seed 001 names them (``add_event(effect, cause?)``, ``query(query)``); every
parameter carries a description, allowed values are JSON-schema enums, and answers are
compact by default (``retrieve``'s ``detail`` and ``explain``'s ``full`` give the rest).

Runs with ``grimoire mcp [--data DIR]``. Nothing but protocol goes to stdout:
the SDK's stdio transport diverts fd 1 to stderr while it serves, and this
module sends Grimoire's own log lines to stderr too. Every tool call goes to
the daemon's socket when a daemon listens there (a connection per call: the
daemon may restart under it). When none listens, the read tools (``query``,
``retrieve``, ``advise``, ``consequences``, ``playbook``, ``explain``, ``kg_query``) are
served from a read-only open of the data directory (``Grimoire.open(read_only=True)``:
no lock, nothing written, retrievals not logged), reopened when the episode store
has changed on disk since; the write tools (``add_event``, ``report_outcome``,
``kg_assert``) answer a clear error that says to start the daemon.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import structlog
from pydantic import Field

from grimoire import __version__
from grimoire.config import Config
from grimoire.errors import GrimoireError
from grimoire.mcp import tools
from grimoire.records.enums import EpisodeType, Outcome, Regime
from grimoire.records.graph import EntityKind, Predicate
from grimoire.scopes.names import check_scope

__all__ = ["DirectoryCaller", "build_server", "serve", "socket_caller"]


def socket_caller(socket: Path) -> tools.Call:
    """One socket round trip per call; Grimoire's errors reach the model as tool errors."""
    from mcp.server.mcpserver.exceptions import ToolError

    def call(method: str, params: dict[str, Any]) -> Any:
        from grimoire.service.client import Client

        if not socket.exists():
            raise ToolError(f"no Grimoire daemon is listening on {socket}: start one with "
                            "`grimoire run` (the MCP server talks to it)")
        try:
            with Client(socket) as client:
                return client.call(method, params)
        except GrimoireError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise ToolError(f"cannot reach the daemon at {socket}: {exc}") from None

    return call


class DirectoryCaller:
    """The daemon's socket when a daemon listens, else a read-only open for reads.

    Thread-safe: calls on the read-only open are serialised (it may be reopened)."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._socket = Path(config.socket)
        self._lock = threading.Lock()
        self._reader: Any = None  # a read-only Grimoire, opened on the first read
        self._seen: tuple[Any, ...] = ()
        self._embedder: Any = None

    def __call__(self, method: str, params: dict[str, Any]) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError

        from grimoire.cli.access import daemon_listening, has_data
        from grimoire.service.api import METHODS

        if daemon_listening(self._socket):
            return socket_caller(self._socket)(method, params)
        data = self._config.data_dir
        spec = METHODS.get(method)
        dry_run = method == "forget" and params.get("dry_run") is True  # reads only
        if spec is not None and spec.mutates and not dry_run:
            raise ToolError(
                f"{method} changes the memory and needs the Grimoire daemon, but none is "
                f"listening on {self._socket}: start one with `grimoire run --data {data}`. "
                "The read tools (query, retrieve, advise, consequences, playbook, explain, "
                "kg_query) work "
                "without it.")
        if not has_data(self._config):
            raise ToolError(f"no Grimoire daemon is listening on {self._socket} and {data} "
                            "holds no Grimoire data: start one with `grimoire run` (the MCP "
                            "server talks to it)")
        from grimoire.service.api import dispatch

        with self._lock:
            try:
                return dispatch(self._open(), method, params)
            except GrimoireError as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from None

    def _signature(self) -> tuple[Any, ...]:
        """What changes on disk when episodes are written (the open is a snapshot of them)."""
        root = Path(self._config.data_dir) / "episodes"
        out: list[Any] = []
        for path in (root / "episodes.lance" / "_versions", root / "episodes_journal.sqlite",
                     root / "episodes_journal.sqlite-wal"):
            try:
                st = path.stat()
            except FileNotFoundError:
                out.append(None)
                continue
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _open(self) -> Any:
        from grimoire.grimoire import Grimoire

        seen = self._signature()
        if self._reader is not None and seen != self._seen:
            self.close()  # episodes written since the open: read a fresh snapshot
        if self._reader is None:
            self._reader = Grimoire.open(config=self._config, embedder=self._embedder,
                                         read_only=True)
            self._embedder = self._reader.context.embedder  # loaded once, kept
            self._seen = seen
        return self._reader

    def simulated(self) -> bool:
        """The directory holds simulated memory (its FEED.json, read on each ask: cheap, and
        a directory's kind is recorded once), whose times are simulated time."""
        from grimoire.stores.marker import read_marker

        marker = read_marker(Path(self._config.data_dir))
        return marker is not None and marker.get("kind") == "simulated"

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad arguments found here (ValidationError) become tool errors the model can read."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GrimoireError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    return wrapper


def _given(params: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``params`` plus each optional argument the model gave (None means not given)."""
    return {**params, **{k: v for k, v in optional.items() if v is not None}}


def _enum(description: str, values: Sequence[str], optional: bool = False) -> Any:
    """A parameter's description with its allowed values listed as a JSON-schema enum (the
    daemon checks them too and names a wrong one)."""
    allowed: list[Any] = [*values, None] if optional else list(values)
    return Field(description=f"{description}: one of {', '.join(values)}",
                 json_schema_extra={"enum": allowed})


EPISODE_TYPES = tuple(t.value for t in EpisodeType)
OUTCOMES = tuple(o.value for o in Outcome)
REPORTED_OUTCOMES = ("positive", "negative", "neutral")
REGIMES = tuple(r.value for r in Regime)
MODES = ("deciding", "browse", "auto")
ENTITY_KINDS = tuple(k.value for k in EntityKind)
_EVENT = ("an episode or entry id (from add_event, retrieve or query)")


def build_server(call: tools.Call, simulated: Callable[[], bool] = lambda: False) -> Any:
    """The tools over ``call``; ``simulated`` says whether the memory served is the market
    simulator's (retrieve then labels it and gives its times as simulated time)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name="grimoire", version=__version__,
                       instructions="Grimoire is this agent's long-term memory: record events "
                       "with add_event, ask advise (the rules for your situation) and query "
                       "before deciding, report_outcome afterwards; consequences tells what "
                       "followed from an event.")

    @server.tool(description="Record an event (the effect) in memory. Give its cause as text "
                 "or as the id of an earlier event if you know it; otherwise memory links the "
                 "likely causes it finds (recent and similar) and names the strongest.")
    @_tool_errors
    def add_event(
        effect: Annotated[str, Field(description="what happened, in one or two sentences")],
        cause: Annotated[str | None, Field(
            description="what caused it, in words (stored as its own event, then linked)")
        ] = None,
        cause_id: Annotated[str | None, Field(
            description=f"or the cause as {_EVENT}")] = None,
        type: Annotated[str, _enum("the kind of event", EPISODE_TYPES)] = "observation",
        outcome: Annotated[str | None, _enum("how it turned out, for an action", OUTCOMES,
                                             optional=True)] = None,
    ) -> dict[str, Any]:
        return tools.add_event(call, effect, cause, cause_id, type, outcome)

    @server.tool(description="Ask memory about a situation: a narrative of what led here "
                 "(causal chain, oldest first) and the most relevant knowledge.")
    @_tool_errors
    def query(
        query: Annotated[str, Field(description="the question, in words")],
        k: Annotated[int, Field(description="relevant items at most (1-50)", ge=1, le=50)] = 5,
        summaries: Annotated[bool, Field(
            description="include the curator's L1/L2 episode summaries")] = False,
    ) -> dict[str, Any]:
        return tools.query_narrative(call, query, k, summaries)

    @server.tool(description="Ranked memory items for a query (id, words, score, confidence, "
                 "time); keep retrieval_id for report_outcome. With a situation, the rules "
                 "that apply to it come first (see advise).")
    @_tool_errors
    def retrieve(
        query: Annotated[str | None, Field(
            description="what you are about to decide, in words (optional with a "
            "situation)")] = None,
        k: Annotated[int, Field(description="items at most (1-50)", ge=1, le=50)] = 5,
        max_tokens: Annotated[int | None, Field(
            description="token budget of the items (default: the daemon's)", ge=1)] = None,
        mode: Annotated[str, _enum("deciding (an action follows: logged for "
                                   "report_outcome), browse (just looking) or auto (memory "
                                   "picks how much to search)", MODES)] = "deciding",
        situation: Annotated[dict[str, Any] | None, Field(
            description="the decision as the fields of an action episode: actions, tool, "
            "token_pair, chain, regime, strategy, metrics, timestamp")] = None,
        summaries: Annotated[bool, Field(
            description="include the curator's L1/L2 episode summaries")] = False,
        detail: Annotated[bool, Field(
            description="the full answer: every ranking factor, provenance and the trace "
            "(several KB per item)")] = False,
    ) -> dict[str, Any]:
        if query is None and situation is None:
            raise ToolError("give a query, a situation, or both")
        out: dict[str, Any] = call("retrieve", _given(
            {"k": k, "mode": mode, "explain": detail, "summaries": summaries}, query=query,
            max_tokens=max_tokens, situation=situation))
        if detail:
            return {**out, "memory": tools.SIMULATED} if simulated() else out
        return tools.compact_retrieval(out, simulated())

    @server.tool(description="Before acting: the learned rules whose conditions hold for "
                 "the situation you are in, warnings first (by confidence x effect size). "
                 "Describe the decision with the fields you know; a rule that needs a field "
                 "you did not give is listed as may_apply with the fields it needs.")
    @_tool_errors
    def advise(
        actions: Annotated[list[str] | None, Field(
            description="what you are about to do, e.g. [\"swap\"]")] = None,
        tool: Annotated[str | None, Field(description="the tool, e.g. uniswap_v3")] = None,
        token_pair: Annotated[str | None, Field(description="e.g. WETH/USDC")] = None,
        chain: Annotated[str | None, Field(description="e.g. ethereum")] = None,
        regime: Annotated[str | None, _enum("market regime", REGIMES, optional=True)] = None,
        strategy: Annotated[str | None, Field(description="your strategy's name")] = None,
        metrics: Annotated[dict[str, float] | None, Field(
            description="metrics as they are now, e.g. {\"gas_gwei\": 31}")] = None,
        timestamp: Annotated[int | None, Field(
            description="the situation's time in unix ms (for hour-of-day rules)")] = None,
        limit: Annotated[int, Field(description="rules at most (1-100)", ge=1, le=100)] = 10,
    ) -> dict[str, Any]:
        situation = _given({}, actions=actions, tool=tool, token_pair=token_pair, chain=chain,
                           regime=regime, strategy=strategy, metrics=metrics,
                           timestamp=timestamp)
        out: dict[str, Any] = call("rules.applicable", {"situation": situation,
                                                        "limit": limit})
        return out

    @server.tool(description="What followed from an event: its effects forward along the "
                 "causal links (explicit, inferred, learned), nearest first, each with its "
                 "depth and the product of the link weights on its strongest path.")
    @_tool_errors
    def consequences(
        id: Annotated[str | None, Field(description=f"the event as {_EVENT}")] = None,
        query: Annotated[str | None, Field(
            description="or the event in words (the most similar one is the start)")] = None,
        depth: Annotated[int, Field(description="links to follow forward (1-8)", ge=1,
                                    le=8)] = 3,
        limit: Annotated[int, Field(description="consequences at most (1-100)", ge=1,
                                    le=100)] = 10,
    ) -> dict[str, Any]:
        if (id is None) == (query is None):
            raise ToolError("give exactly one of id or query")
        start = {"id": id} if id is not None else {"query": query}
        return tools.consequences(call, start, depth, limit)

    @server.tool(description="Tell memory how a decision taken after a retrieval turned out, "
                 "and which items were followed.")
    @_tool_errors
    def report_outcome(
        retrieval_id: Annotated[str, Field(
            description="the retrieval_id retrieve or query answered")],
        outcome: Annotated[str, _enum("how the decision turned out", REPORTED_OUTCOMES)],
        pnl: Annotated[float | None, Field(
            description="profit or loss of the decision, in your unit")] = None,
        followed_ids: Annotated[list[str] | None, Field(
            description="ids of the retrieved items the decision followed")] = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = call("outcome.report", _given(
            {"retrieval_id": retrieval_id, "outcome": outcome}, pnl=pnl,
            followed_ids=followed_ids))
        return out

    @server.tool(description="The compiled PLAYBOOK.md: heuristics and warnings learned so "
                 "far, with their evidence.")
    @_tool_errors
    def playbook() -> str:
        return str(call("playbook.get", {}).get("markdown", ""))

    @server.tool(description="Why a knowledge entry is what it is: its sentence, evidence "
                 "(validated / contradicted), confidence, provenance and last changes; "
                 "full=true for every vote, cited episode and change.")
    @_tool_errors
    def explain(
        id: Annotated[str, Field(
            description="the entry's id, or the short id PLAYBOOK.md prints")],
        full: Annotated[bool, Field(
            description="the whole history (tens of KB for a well-used rule)")] = False,
    ) -> dict[str, Any]:
        out: dict[str, Any] = call("entry.explain", {"id": id})
        return out if full else tools.explain_summary(out)

    @server.tool(description="Assert a fact in the knowledge graph: subject (kind, id), "
                 "predicate, object (text or {kind, id}), valid from a block.")
    @_tool_errors
    def kg_assert(
        subject_kind: Annotated[str, _enum("the subject's entity kind", ENTITY_KINDS)],
        subject_id: Annotated[str, Field(description="the subject's id, e.g. an address")],
        predicate: Annotated[str, Field(description="one of " + ", ".join(
            p.value for p in Predicate) + ", or custom:<name>")],
        object: Annotated[str | dict[str, str], Field(
            description="the object: text, or an entity {kind, id}")],
        valid_from: Annotated[int, Field(
            description="the block (or unix ms) from which the fact holds", ge=0)],
        confidence: Annotated[float | None, Field(
            description="how sure, 0-1 (default 0.5)", ge=0, le=1)] = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = call("kg.assert", _given(
            {"subject": {"kind": subject_kind, "id": subject_id}, "predicate": predicate,
             "object": object, "valid_from": valid_from}, confidence=confidence))
        return out

    @server.tool(description="Facts about a subject in the knowledge graph, valid at a block "
                 "or as known at a time (unix ms): give exactly one of the two.")
    @_tool_errors
    def kg_query(
        subject_kind: Annotated[str, _enum("the subject's entity kind", ENTITY_KINDS)],
        subject_id: Annotated[str, Field(description="the subject's id")],
        block: Annotated[int | None, Field(
            description="facts valid at this block (or unix ms)", ge=0)] = None,
        known_at: Annotated[int | None, Field(
            description="facts as known at this time (unix ms)", ge=0)] = None,
    ) -> Any:
        return tools.kg_query(call, subject_kind, subject_id, block, known_at)

    @server.tool(description="Forget for good: erase one episode (its id), every episode of "
                 "an actor or a thread, or everything that names an entity ('token:WETH' or a "
                 "bare name) or quotes a phrase, from every store, with what was learned from "
                 "it recounted. Give exactly one of episode, actor, thread, entity, matching; "
                 "dry_run: true lists what would go and changes nothing.")
    @_tool_errors
    def forget(
        episode: Annotated[str | None, Field(description="one episode's id")] = None,
        actor: Annotated[str | None, Field(
            description="every episode of this actor (who spoke or acted)")] = None,
        thread: Annotated[str | None, Field(
            description="every episode of this thread (conversation, session, task)")] = None,
        entity: Annotated[str | None, Field(
            description="everything that names this entity: 'token:WETH' or a bare name")
        ] = None,
        matching: Annotated[str | None, Field(
            description="everything that quotes this phrase (case-insensitive, 3+ chars)")
        ] = None,
        dry_run: Annotated[bool, Field(
            description="list what would go and change nothing")] = False,
    ) -> dict[str, Any]:
        out: dict[str, Any] = call("forget", _given(
            {"dry_run": dry_run}, episode=episode, actor=actor, thread=thread, entity=entity,
            matching=matching))
        return out

    return server


def in_scope(call: tools.Call, scope: str | None) -> tools.Call:
    """``call`` with every method's params in ``scope`` (checked now: a bad name fails at
    start, not on the first tool call); ``call`` itself without one."""
    if scope is None:
        return call
    name = check_scope(scope)

    def scoped_call(method: str, params: dict[str, Any]) -> Any:
        return call(method, {**params, "scope": name})

    return scoped_call


def serve(config: Config, scope: str | None = None) -> int:
    """Serve MCP over stdio until stdin closes; Grimoire's logs go to stderr. With
    ``scope`` (``grimoire mcp --scope NAME``) every tool reads and writes that scope."""
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
                        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    caller = DirectoryCaller(config)
    try:
        build_server(in_scope(caller, scope), caller.simulated).run("stdio")
    finally:
        caller.close()
    return 0
