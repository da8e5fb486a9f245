"""What ``backup``, ``restore``, ``export``, ``import``, ``clade`` and ``reembed`` print for a
person: a few lines saying what was done, with the numbers that matter (``--json`` prints
the answer itself, every field)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["render"]


def _size(n: Any) -> str:
    if not isinstance(n, int | float):
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def _stores(stores: Mapping[str, Any]) -> str:
    episodes = stores.get("episodes") or {}
    semantic = (stores.get("semantic") or {}).get("rows") or {}
    rows = int(episodes.get("lance_rows", 0) or 0) + int(episodes.get("journal_rows", 0) or 0)
    return (f"{rows:,} episodes, {semantic.get('grimoire_entries', 0):,} entries, "
            f"{semantic.get('causal_edges', 0):,} causal edges, "
            f"{(stores.get('graph') or {}).get('main_entries', 0):,} graph records")


def _backup(r: Mapping[str, Any]) -> str:
    return (f"backed up to {r.get('dest')}: {r.get('files')} files, {_size(r.get('bytes'))} in "
            f"{r.get('seconds', 0):.1f} s\n  {_stores(r.get('stores') or {})}\n"
            f"  (the manifest inside lists every file's sha256; grimoire restore checks them)")


def _restore(r: Mapping[str, Any]) -> str:
    return (f"restored into {r.get('dir')}: {r.get('files')} files, every checksum verified\n"
            f"  {_stores(r.get('stores') or {})}")


def _export(r: Mapping[str, Any]) -> str:
    counts = r.get("counts") or {}
    return (f"exported to {r.get('out')} in {r.get('seconds', 0):.1f} s: "
            f"{counts.get('entries', 0):,} entries, {counts.get('causal', 0):,} causal links, "
            f"{counts.get('triples', 0):,} graph facts (from {r.get('origin')})")


def _import(r: Mapping[str, Any]) -> str:
    entries = r.get("entries") or {}
    causal = r.get("causal") or {}
    triples = r.get("triples") or {}
    lines = [f"imported {r.get('source')} as {r.get('provenance')} (from {r.get('origin')}; "
             f"confidence × {r.get('weight')})"
             + (f" in {r['seconds']:.1f} s" if isinstance(r.get("seconds"), int | float)
                else ""),
             "  entries: " + ", ".join(f"{v:,} {k.replace('_', ' ')}"
                                       for k, v in entries.items()),
             f"  causal links: {causal.get('added', 0):,} added, "
             f"{causal.get('skipped', 0):,} skipped",
             f"  graph facts: {triples.get('added', 0):,} added, "
             f"{triples.get('skipped', 0):,} skipped"]
    return "\n".join(lines)


def _clade(r: Mapping[str, Any]) -> str:
    if "published" in r:
        return (f"published {r.get('published')} of {r.get('offered')} warnings and "
                f"heuristics to {r.get('uri')} as {r.get('agent')}")
    rest = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in r.items()
                     if k not in ("uri", "agent", "rows", "foreign")
                     and isinstance(v, int | float))
    return (f"pulled from {r.get('uri')}: {r.get('foreign')} of {r.get('rows')} rows from "
            f"other agents" + (f"; {rest}" if rest else ""))


def _reembed(r: Mapping[str, Any]) -> str:
    rest = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in r.items()
                     if k not in ("out", "from_model", "to_model") and isinstance(v, int))
    return (f"wrote {r.get('out')}: re-embedded from {r.get('from_model')} to "
            f"{r.get('to_model')}" + (f" ({rest})" if rest else "")
            + "\n  point data_dir at it and set embedding.model to use it")


VIEWS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "backup": _backup, "restore": _restore, "export": _export, "import": _import,
    "clade": _clade, "reembed": _reembed,
}


def render(command: str, result: Any) -> str:
    """The person's view of ``command``'s answer (``result`` must be its answer mapping)."""
    view = VIEWS.get(command)
    if view is None or not isinstance(result, Mapping):
        import json

        return json.dumps(result, indent=2, default=str)
    return view(result)
