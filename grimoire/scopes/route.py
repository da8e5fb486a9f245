"""The facade's ``scope=`` parameter: which scope's Grimoire answers, and the answer stamped.

``@scoped`` wraps a facade method that declares ``scope: str | None = None``: the call
is routed to the Grimoire of that scope (``registry``), which runs the method on its
own stores, and the answer says which scope it came from: the answer object and every
record in it (a mapping with an ``id``, in a list or a mapping one level down) carry
``"scope"``. Records are copied before they are stamped, never changed in place (a
cache may hold them). A record the caller hands in with a ``scope`` of its own (an
``episode.write_batch`` item, an episode's or an entry's params) must name the scope it
is written to: a different one is a ValidationError, nothing is written; the field is
then dropped, since the scope is where the record is stored.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from grimoire.errors import ValidationError
from grimoire.scopes.names import check_scope
from grimoire.scopes.registry import REGISTRY_KEY, Grimoire, registry, scope_of

__all__ = ["scoped", "stamp"]

F = TypeVar("F", bound=Callable[..., Any])


def _same_scope(value: Any, name: str, where: str) -> None:
    given = check_scope(value)
    if given != name:
        raise ValidationError(f"this record says scope {given!r} but is written to scope "
                              f"{name!r}: drop the field or call with scope={given!r}",
                              field=where)


def _unscoped(value: Any, name: str, where: str) -> Any:
    """``value`` without a ``scope`` field that agrees with ``name`` (else refused)."""
    if isinstance(value, Mapping) and "scope" in value:
        _same_scope(value["scope"], name, f"{where}.scope")
        return {k: v for k, v in value.items() if k != "scope"}
    return value


def stamp(result: Any, name: str) -> Any:
    """``result`` with ``"scope": name`` on it and on every record it holds (copies)."""
    if not isinstance(result, dict):
        return result
    out: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, list):
            out[key] = [{**item, "scope": name} if isinstance(item, dict) and "id" in item
                        else item for item in value]
        elif isinstance(value, dict) and "id" in value:
            out[key] = {**value, "scope": name}
        else:
            out[key] = value
    out["scope"] = name
    return out


def scoped(fn: F) -> F:
    """Route ``fn(self, …, scope=…)`` to the scope's Grimoire and stamp its answer."""

    signature = inspect.signature(fn)
    records = {"episodes", "feed_episodes"} & set(signature.parameters)

    @functools.wraps(fn)
    def routed(self: Grimoire, *args: Any, scope: str | None = None, **kwargs: Any) -> Any:
        # No scope: the one this Grimoire serves (a scope's own, or the default).
        target = self if scope is None else registry_of(self).get(scope)
        name = scope_of(target.context)
        if records:  # the records a caller hands in: each must agree with the scope
            bound = signature.bind_partial(target, *args, **kwargs)
            for key in records & set(bound.arguments):
                value = bound.arguments[key]
                if isinstance(value, list | tuple):
                    bound.arguments[key] = [_unscoped(e, name, f"{key}[{i}]")
                                            for i, e in enumerate(value)]
            return stamp(fn(*bound.args, **bound.kwargs), name)
        return stamp(fn(target, *args, **kwargs), name)

    return cast(F, routed)


def registry_of(g: Grimoire) -> Any:
    """The registry ``g`` belongs to (a scope's Grimoire shares its default scope's)."""
    found = g.context.extras.get(REGISTRY_KEY)
    return found if found is not None else registry(g)
