"""Short human views of the API's answers; ``--json`` prints the answer itself.

Each view is a function of the method's result; a method without its own view
prints its answer as indented JSON. Non-ASCII text prints as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["VIEWS", "dumps", "render", "without_front_matter"]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _when(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _clip(text: Any, width: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _status(r: Mapping[str, Any]) -> str:
    ep = r.get("episodes") or {}
    en = r.get("entries") or {}
    gr = r.get("graph") or {}
    out = [f"grimoire {r.get('version', '?')}  data {r.get('data_dir', '?')}  "
           f"tick {r.get('tick', 0)}",
           f"episodes  {ep.get('rows', 0)} ({ep.get('buffered_rows', 0)} buffered), "
           f"{ep.get('disk_bytes', 0) / 1e6:.1f} MB",
           f"entries   {en.get('total', 0)}: "
           + (", ".join(f"{k} {v}" for k, v in sorted((en.get("by_category") or {}).items()))
              or "none"),
           f"graph     {gr.get('triples', 0)} facts ({gr.get('open', 0)} open), "
           f"{gr.get('subjects', 0)} subjects"]
    memory = r.get("memory")
    simulated = isinstance(memory, Mapping) and memory.get("kind") == "simulated"
    if isinstance(memory, Mapping):
        mixed = memory.get("mixed_in") or []
        out.append(f"memory    {memory.get('kind')} (feed {memory.get('feed')}, since "
                   f"{memory.get('since')})"
                   + (": the market simulator's, its times are simulated time"
                      if simulated else "")
                   + (f"; {len(mixed)} import(s) of the other kind mixed in" if mixed else ""))
    cycle = r.get("last_curator_cycle")
    if isinstance(cycle, Mapping):
        when = (_when(cycle.get("now")).rstrip("Z") + " simulated time" if simulated
                else _when(cycle.get("now")))
        out.append(f"curator   cycle {cycle.get('cycle')} at {when}: "
                   f"{cycle.get('entries_promoted', 0)} promoted, "
                   f"{cycle.get('entries_pruned', 0)} retired")
    else:
        out.append("curator   no cycle yet")
    daemon = r.get("daemon")
    if isinstance(daemon, Mapping):
        out.append(f"daemon    pid {daemon.get('pid')}, feed {daemon.get('feed')}, "
                   f"{daemon.get('ticks_run', 0)} ticks ({daemon.get('ticks_skipped', 0)} "
                   "skipped)")
    else:
        out.append("daemon    not running (read from disk)")
    health = r.get("health") or {}
    flagged = [(k, v) for k, v in health.items()
               if isinstance(v, Mapping) and v.get("value") is not None
               and v.get("flag") in ("watch", "alarm")]
    if not flagged:
        out.append("health    every metric with enough data is in its healthy band")
    else:
        out.append("health    watch: outside its healthy band, not yet an alarm; alarm: past "
                   "the alarm rule")
        out.extend(f"  {k.replace('_', ' ')} {_metric_value(v.get('value'))}: {v.get('flag')}"
                   f"{_band(v)}" for k, v in flagged)
    out.append("(grimoire status --json for every number)")
    return "\n".join(out)


def _metric_value(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _band(metric: Mapping[str, Any]) -> str:
    """``(healthy 0.30-0.70; alarm: < 0.2)``: the band and the alarm rule a flag is read by."""
    healthy = metric.get("healthy")
    parts = []
    if isinstance(healthy, list | tuple) and len(healthy) == 2:
        low, high = healthy
        parts.append("healthy " + (f"{low:g}–{high:g}" if low is not None and high is not None
                                   else f"≥ {low:g}" if low is not None
                                   else f"≤ {high:g}" if high is not None else "any"))
    elif isinstance(healthy, str):
        parts.append(f"healthy: {healthy}")
    if metric.get("alarm"):
        parts.append(f"alarm: {metric['alarm']}")
    return f" ({'; '.join(parts)})" if parts else ""


def _retrieve(r: Mapping[str, Any]) -> str:
    items = r.get("items") or []
    rows = [[str(i.get("rank", "")), f"{i.get('score', 0):.3f}",
             str(i.get("category") or i.get("kind", "")), _id(i),
             _clip(i.get("content", ""), 70)] for i in items]
    head = (f"{len(items)} item(s), {r.get('tokens', 0)} of {r.get('max_tokens', '?')} "
            f"tokens, mode {r.get('mode')}, retrieval {r.get('retrieval_id')}")
    return head + ("\n" + _table(rows, ["#", "score", "kind", "id", "content"])
                   if rows else "")


def _id(item: Mapping[str, Any]) -> str:
    """An entry's shortest prefix unique in the store (``short_id``, what ``entry show`` and
    ``explain`` take); any other id (an episode's, which ``episode.get`` needs whole) in full."""
    return str(item.get("short_id") or item.get("id", ""))


def _rules(r: Mapping[str, Any]) -> str:
    """``rules.applicable``: each rule on its own line, why it applies under it."""
    rules = r.get("rules") or []
    out = [f"{r.get('applies', 0)} rule(s) apply and {r.get('may_apply', 0)} may apply to: "
           f"{r.get('situation', '')}"]
    for rank, rule in enumerate(rules, start=1):
        match = ("applies" if rule.get("match") == "applies"
                 else f"may apply, needs {', '.join(rule.get('missing') or [])}")
        out.append(f"{rank}. {rule.get('category')} {_id(rule)} · {match} · "
                   f"conf {rule.get('confidence', 0):.2f} · weight {rule.get('weight', 0):.2f}")
        out.append(f"   {_clip(rule.get('content', ''), 150)}")
        for also in rule.get("also") or []:  # the same advice, another reason
            out.append(f"   also {_id(also)} · conf {also.get('confidence', 0):.2f} · weight "
                       f"{also.get('weight', 0):.2f}: {_clip(also.get('content', ''), 120)}")
    if not rules:
        out.append("(no active rule's condition holds here; grimoire retrieve searches by words)")
    return "\n".join(out)


def _entries(r: Mapping[str, Any]) -> str:
    items = r.get("entries") or []
    # ✓ / ✗ as PLAYBOOK.md and explain print them, beside the sentence that states its numbers
    rows = [[_id(e), str(e.get("category", "")), str(e.get("status", "")),
             f"{e.get('confidence', 0):.2f}",
             f"✓{e.get('validated_count', 0)} ✗{e.get('contradicted_count', 0)}",
             _clip(e.get("content", ""), 70)] for e in items]
    kind = r.get("kind", "knowledge")
    head = f"{len(items)} entr{'y' if len(items) == 1 else 'ies'}" + (
        " (L1/L2 summaries: --kind summary)" if kind == "knowledge" else f" of kind {kind}")
    return head + (
        "\n" + _table(rows, ["id", "category", "status", "conf", "votes", "content"]) if rows
        else "")


def _entity(ref: Any) -> str:
    return f"{ref.get('kind')}:{ref.get('id')}" if isinstance(ref, Mapping) else str(ref)


def _object(o: Any) -> str:
    """A triple's object as the owner reads it: ``token:WETH``, ``3.5``, ``"text"``."""
    if not isinstance(o, Mapping):
        return str(o)
    value = o.get("value")
    if o.get("kind") == "entity":
        return _entity(value)
    if o.get("kind") == "string":
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _triples(r: Mapping[str, Any]) -> str:
    """Facts with their whole ids (``kg invalidate`` takes the whole id)."""
    items = r.get("triples") or []
    rows = [[str(t.get("id", "")), _entity(t.get("subject")), str(t.get("predicate", "")),
             _clip(_object(t.get("object")), 40),
             f"{t.get('valid_from')}..{t.get('valid_to') or ''}"] for t in items]
    if not rows:
        return "no facts about this subject then (the graph may hold none yet)"
    return f"{len(items)} fact(s)\n" + _table(
        rows, ["id", "subject", "predicate", "object", "valid blocks"])


def _kg_assert(r: Mapping[str, Any]) -> str:
    closed = list(r.get("closed") or [])
    if r.get("reinforced"):
        head = f"the same fact was already open: reinforced {r.get('id')}"
    else:
        head = f"asserted fact {r.get('id')}"
    if closed:
        head += (f"\nit replaces {len(closed)} open fact(s) with the same subject and "
                 f"predicate, closed at its valid_from: {', '.join(closed)}")
    return head


def _neighbors(r: Mapping[str, Any]) -> str:
    items = r.get("neighbors") or []
    if not items:
        return "no neighbours within the hops asked (the graph may hold no facts yet)"
    rows = [[str(n.get("hops")), _entity(n.get("entity")), str(n.get("predicate", "")),
             "→ out" if n.get("direction") == "out" else "← in"] for n in items]
    return f"{len(items)} neighbour(s)\n" + _table(rows, ["hops", "entity", "via", "direction"])


def _entry(e: Mapping[str, Any]) -> str:
    """``entry show``: one entry in a few lines (``explain`` tells its whole history)."""
    short = _id(e)
    out = [f"{e.get('category')} {short} [{e.get('status')}]  ({e.get('id')})",
           f"  {e.get('content', '')}",
           f"confidence {e.get('effective_confidence', e.get('confidence', 0)):.2f} now "
           f"(stored {e.get('confidence', 0):.2f}), ✓{e.get('validated_count', 0)} "
           f"✗{e.get('contradicted_count', 0)}, {e.get('decay_class')}, "
           f"{str(e.get('provenance', '')).replace('_', ' ')}"]
    extra = [f"{k.replace('_', ' ')} {e[k]}" for k in ("strategy", "market_regime")
             if e.get(k)]
    if e.get("tags"):
        extra.append("tags " + ", ".join(map(str, e["tags"])))
    if extra:
        out.append("; ".join(extra))
    out.append(f"made {_when(e.get('created_at'))}, last confirmed "
               f"{_when(e.get('last_accessed_at'))}")
    out.append(f"(grimoire explain {short} for its evidence and history; --json for every "
               "field)")
    return "\n".join(out)


def _health(r: Mapping[str, Any]) -> str:
    return f"ok: grimoire {r.get('version')}, tick {r.get('tick')}, up {r.get('uptime_s')} s"


def _curate(r: Mapping[str, Any]) -> str:
    pb = (r.get("phases") or {}).get("playbook") or {}
    from playbook import updated_line

    return (f"curator cycle {r.get('cycle')}: {r.get('episodes', 0)} episodes read, "
            f"{r.get('entries_promoted', 0)} promoted, {r.get('entries_demoted', 0)} demoted, "
            f"{r.get('entries_pruned', 0)} retired, {r.get('heuristics_proposed', 0)} "
            f"heuristics proposed in {r.get('duration_ms', 0):.0f} ms; "
            f"{updated_line(pb.get('selected') or {})}")


def _consequences(r: Mapping[str, Any]) -> str:
    """The start, then each consequence indented by its depth, with its path weight."""
    lines = [str(r.get("narrative", ""))]
    for item in r.get("consequences") or []:
        indent = "  " * int(item.get("depth", 1))
        why = f" ({item['relationship']})" if item.get("relationship") else ""
        lines.append(f"{indent}→ {' '.join(str(item.get('text', '')).split())[:160]} "
                     f"[depth {item.get('depth')}, weight {item.get('weight', 0):.2f}]{why}")
    return "\n".join(lines)


def _text(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: str(r.get(key, "")).rstrip("\n")


def without_front_matter(markdown: str) -> str:
    """PLAYBOOK.md for a person: without the leading ``---`` YAML block programs read."""
    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 4)
        if end != -1:
            return markdown[end + 5:].lstrip("\n")
    return markdown


VIEWS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "status": _status,
    "health": _health,
    "retrieve": _retrieve,
    "rules.applicable": _rules,
    "entry.list": _entries,
    "entry.explain": _text("text"),
    "causal.consequences": _consequences,
    "playbook.get": lambda r: without_front_matter(_text("markdown")(r)),
    "curator.run": _curate,
    "kg.at": _triples,
    "kg.known_at": _triples,
    "kg.assert": _kg_assert,
    "kg.invalidate": lambda r: f"closed fact {(r.get('triple') or {}).get('id')} at block "
                               f"{(r.get('triple') or {}).get('valid_to')}",
    "kg.neighbors": _neighbors,
    "entry.get": _entry,
    "entry.add": lambda r: dumps(r),
    "episode.write": lambda r: f"written: episode {r.get('id')}",
}


def render(method: str, result: Any, as_json: bool) -> str:
    """The text to print for ``method``'s ``result``."""
    view = VIEWS.get(method)
    if as_json or view is None or not isinstance(result, Mapping):
        return dumps(result)
    return view(result)
