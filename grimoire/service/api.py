"""The one method table (API.md) shared by the socket server, the CLI and the facade.

Each socket method name maps to a facade method (``episode.write`` →
``Grimoire.episode_write``). ``dispatch`` binds JSON params to that method's
keyword arguments, so an unknown or missing parameter is an invalid-params
error that names it, and the facade validates the values. Server and CLI
stay thin: they parse, call ``dispatch``, render. Every method also takes ``scope``
(the facade's ``@scoped`` parameter, ``grimoire.scopes``): which memory answers.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grimoire.errors import ValidationError
from grimoire.records.text import require_unicode

__all__ = ["METHODS", "MethodSpec", "dispatch", "suggest", "suggest_method"]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    summary: str
    params: str
    mutates: bool
    # Defaults that differ over the socket (the server fills them in when a request leaves
    # them out): retrieve's breakdown, trace and backend ranks cost bytes and encoding
    # time on every call, and most agents never read them, so there they are opt-in.
    socket_defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec("health", "liveness: version, tick, uptime", "{}", False),
        MethodSpec("status", "counts per store, health metrics, last curator cycle, events",
                   "{}", False),
        MethodSpec("episode.write", "store one episode; answers once it is durable",
                   "{text, type?, ref?, tool?, outcome?, chain?, token_pair?, timestamp?, "
                   "importance?, regime?, strategy?, actions?, gain?, metrics?, prediction?, "
                   "emotional_tag?, valid_from?, valid_until?, causal_hint?}", True),
        MethodSpec("episode.write_batch", "store many episodes, all or nothing",
                   "{episodes: [...]}", True),
        MethodSpec("episode.get", "one episode by id", "{id}", False),
        MethodSpec("retrieve", "ranked context with factor breakdown and provenance",
                   "{query, k?, max_tokens?, kinds?, categories?, regime?, strategy?, "
                   "min_confidence?, event_id?, entities?, mood?, mode?, at?, format?, "
                   "explain?, situation?, summaries?}", False,
                   socket_defaults=(("explain", False),)),
        MethodSpec("rules.applicable", "the active rules whose conditions hold for a "
                   "situation (fields of an action episode), warnings first",
                   "{situation{tool?, actions?, token_pair?, chain?, regime?, strategy?, "
                   "metrics?, timestamp?}, categories?, limit?, may_apply?}", False),
        MethodSpec("outcome.report", "how a retrieval's decision turned out",
                   "{retrieval_id, outcome, pnl?, followed_ids?}", True),
        MethodSpec("entry.add", "propose a knowledge entry (through the admission gate)",
                   "{category, content, provenance?, confidence?, decay_class?, tags?, "
                   "strategy?, regime?, source?, parent_episode_ids?}", True),
        MethodSpec("entry.get", "one entry (archived ones too)", "{id}", False),
        MethodSpec("entry.list", "entries by category / status / strategy; L1/L2 "
                   "summaries only when kind asks for them",
                   "{category?, status?, strategy?, limit?, kind?=\"knowledge\"|\"summary\"|"
                   "\"summary:l1\"|\"summary:l2\"|\"all\"}", False),
        MethodSpec("entry.explain", "an entry's history: votes, decay, promotions, provenance",
                   "{id}", False),
        MethodSpec("kg.assert", "assert a fact in the knowledge graph",
                   "{subject{kind,id}, predicate, object, valid_from, source_episode?, "
                   "confidence?}", True),
        MethodSpec("kg.invalidate", "close a fact at a block", "{id, at}", True),
        MethodSpec("kg.at", "facts about a subject valid at a block", "{subject, block}", False),
        MethodSpec("kg.known_at", "facts about a subject as known at a time",
                   "{subject, time}", False),
        MethodSpec("kg.neighbors", "entities within k hops at a block",
                   "{subject, max_hops?, block, direction?}", False),
        MethodSpec("causal.link", "an explicit causal link between two items",
                   "{cause_id, effect_id, relationship?, weight?}", True),
        MethodSpec("causal.chain", "the chain of causes back to the root, oldest first",
                   "{query} or {id}", False),
        MethodSpec("causal.consequences", "what followed from an event: its effects "
                   "forward along the causal edges, nearest first (depth 3 by default)",
                   "{query} or {id}, depth?=3, limit?=20", False),
        MethodSpec("playbook.get", "the compiled PLAYBOOK.md", "{}", False),
        MethodSpec("curator.run", "force a curator cycle now", "{}", True),
        MethodSpec("forget", "erase an episode, an actor's, a thread's, an entity's or a "
                   "phrase's every trace; dry_run lists what would go",
                   "{episode? | actor? | thread? | entity? | matching?, dry_run?}", True),
        # Knowledge exchange (grimoire/portable/clade.py): one shared LanceDB table at a URI.
        MethodSpec("clade.publish", "share warnings and validated heuristics to a Clade table",
                   "{uri, agent?}", True),
        MethodSpec("clade.pull", "import other agents' Clade items through the gate "
                   "(never the other kind of memory's unless allow_mixed)",
                   "{uri, agent?, allow_mixed?}", True),
    ]
}


def dispatch(target: Any, method: str, params: Mapping[str, Any] | None) -> Any:
    """Call ``target.<method as attr>(**params)`` with the params checked against its signature.

    Raises ``KeyError`` for an unknown method (the server maps it to -32601) and
    ``ValidationError`` for params that are not an object or do not fit.
    """
    spec = METHODS.get(method)
    if spec is None:
        raise KeyError(method)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ValidationError("params must be a JSON object", field="params")
    fn = getattr(target, spec.attr)
    if inspect.ismethod(fn) and "self" in params:
        # A bound method's signature hides ``self``, so binding accepts it into **params and
        # the call then fails with "multiple values for argument 'self'".
        raise ValidationError("unknown parameter(s): self", field="params")
    try:
        _signature(fn).bind(**params)
    except TypeError as exc:
        raise ValidationError(_explain_binding(fn, params, exc), field="params") from None
    check_text(params)
    return fn(**params)


# A bound method's signature is its function's minus ``self``: computed once per function.
# ``inspect.signature`` on every request cost ~30 µs of a socket call (health: ~1 µs itself).
_SIGNATURES: dict[Any, inspect.Signature] = {}


def _signature(fn: Any) -> inspect.Signature:
    if not inspect.ismethod(fn):
        return inspect.signature(fn)
    sig = _SIGNATURES.get(fn.__func__)
    if sig is None:
        sig = _SIGNATURES[fn.__func__] = inspect.signature(fn)
    return sig


def suggest_method(name: str) -> str:
    """``" (did you mean episode.write?)"`` for a mistyped method name, else ``""``."""
    close = suggest(name)
    return f" (did you mean {close}?)" if close else ""


def check_text(value: Any, where: str = "params") -> None:
    """Refuse strings that cannot be encoded as UTF-8 (a lone surrogate from JSON's
    ``\\ud800``), anywhere in the params: they would fail deep in the embedder or the
    stores instead of here. The message is the records' own (``require_unicode``)."""
    if isinstance(value, str):
        require_unicode(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(item, f"{where}.{key}" if where != "params" else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_text(item, f"{where}[{i}]")


def _explain_binding(fn: Any, params: Mapping[str, Any], exc: TypeError) -> str:
    sig = inspect.signature(fn)
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = [] if accepts_any else sorted(set(params) - set(sig.parameters))
    if unknown:
        return f"unknown parameter(s): {', '.join(unknown)}"
    missing = [
        name for name, p in sig.parameters.items()
        if p.default is p.empty and name not in params
        and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if missing:
        return f"missing required parameter(s): {', '.join(missing)}"
    return str(exc)


def suggest(name: str) -> str | None:
    """The method name closest to a mistyped one (``episode.wrte`` → ``episode.write``)."""
    close = difflib.get_close_matches(name, list(METHODS), n=1, cutoff=0.6)
    return close[0] if close else None
