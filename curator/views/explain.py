"""``entry.explain``: where an entry came from and everything that happened to it.

Owns the owner's view of one entry's history: its numbers (✓ / ✗, the episodes its
sentence cites and where they come from, the effect and baseline: the same fields every
other view reads), the admission decision (with
its five factors) and later merges into it, the curator's changes (votes,
validations, promotions, demotions, pruning, quarantine reviews; each with
before / after and why), its decay today (stored confidence vs effective
confidence now, half-life, retention, strength), the episodes it was
distilled from (texts and refs), its parent and derived entries, and its
causal and outcome edges. Returned as data and as ``text``, rendered here so
that the CLI and the socket show the same thing.

Read-only. An id may be given as a unique prefix, or as the prefix
PLAYBOOK.md prints (unique among the entries it lists); an ambiguous prefix
is a ValidationError listing the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from curator.cycle.state import store_time
from grimoire.clock import MS_PER_DAY
from grimoire.context import Context
from grimoire.errors import NotFoundError, ValidationError
from grimoire.gate.decay import (
    effective_confidence,
    evidence_confidence,
    half_life_ms,
    initial_confidence,
    retention,
)
from grimoire.records import EntryStatus, GrimoireEntry
from grimoire.stores.semantic.evidence import DECISION_PREFIX
from grimoire.stores.semantic.types import EntryFilter
from playbook import iso_utc

__all__ = ["explain_entry", "resolve_entry"]

MAX_EPISODES = 20
MAX_ADMISSIONS_SCANNED = 50_000
_MIN_PREFIX = 4


def resolve_entry(ctx: Context, id: str) -> GrimoireEntry:
    """The entry with this id, or the only one whose id starts with it."""
    if not isinstance(id, str) or not id.strip():
        raise ValidationError("must be a non-empty string", field="id")
    exact = ctx.semantic.get_entry(id.strip())
    if exact is not None:
        return exact
    key = id.strip().lower()
    if len(key) < _MIN_PREFIX:
        raise ValidationError(f"give at least {_MIN_PREFIX} characters of the id", field="id")
    matches = [e for e in ctx.semantic.list_entries(
        EntryFilter(statuses=tuple(EntryStatus)), order="created_at", limit=None)
        if e.id.startswith(key)]
    if not matches:
        raise NotFoundError(f"no entry whose id is or starts with {key!r}")
    if len(matches) > 1:
        # PLAYBOOK.md prints the shortest prefix unique among the entries it shows; entries
        # made in the same millisecond share 12 characters (UUIDv7), so a prefix copied from
        # the file may match others in the store: the one in the playbook is the one meant.
        from curator.views.playbook import select_entries

        in_playbook = {e.id for e in select_entries(ctx)}
        listed = [m for m in matches if m.id in in_playbook]
        if len(listed) == 1:
            return listed[0]
        shown = ", ".join(sorted(m.id for m in matches)[:5])
        raise ValidationError(f"{key!r} matches {len(matches)} entries ({shown}"
                              f"{', …' if len(matches) > 5 else ''}): give more characters",
                              field="id")
    return matches[0]


def _rule(ctx: Context, entry: GrimoireEntry, now: int) -> dict[str, Any]:
    """The terms of the confidence rule for this entry (SPEC §13, ``evidence_confidence``)."""
    cfg = ctx.config.decay
    from_evidence = evidence_confidence(entry.provenance, entry.validated_count,
                                        entry.contradicted_count, cfg)
    return {"confirmed": entry.validated_count, "contradicted": entry.contradicted_count,
            "prior": initial_confidence(entry.provenance, cfg), "k": cfg.prior_strength,
            "from_evidence": round(from_evidence, 4), "stored": entry.confidence,
            "age_factor": round(retention(entry, now, cfg), 4),
            "effective": round(effective_confidence(entry, now, cfg), 4)}


def _decay(ctx: Context, entry: GrimoireEntry, now: int) -> dict[str, Any]:
    cfg = ctx.config.decay
    half = half_life_ms(entry, cfg)
    return {
        "rule": _rule(ctx, entry, now),
        "confidence": entry.confidence,
        "effective_confidence": round(effective_confidence(entry, now, cfg), 4),
        "retention": round(retention(entry, now, cfg), 4),
        "decay_class": entry.decay_class.value,
        "half_life_days": None if half is None else round(half / MS_PER_DAY, 3),
        "strength": entry.strength,
        "effective_half_life_days": None if half is None else round(
            half * entry.strength / MS_PER_DAY, 3),
        "last_accessed_at": entry.last_accessed_at,
        "days_since_access": round(max(0, now - entry.last_accessed_at) / MS_PER_DAY, 3),
    }


def _admissions(ctx: Context, entry: GrimoireEntry) -> list[dict[str, Any]]:
    records = ctx.semantic.list_admissions(since=entry.created_at,
                                           limit=MAX_ADMISSIONS_SCANNED)
    return [{"at": r.decided_at, "decision": r.decision, "composite": round(r.composite, 4),
             "factors": {k: round(v, 4) for k, v in r.factors.items()},
             "off_topic": r.off_topic, "reasons": list(r.reasons)}
            for r in reversed(records) if r.entry_id == entry.id]


def _episodes(ctx: Context, ids: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for episode_id in list(ids)[-MAX_EPISODES:]:
        episode = ctx.episodes.get(episode_id)
        if episode is None:
            out.append({"id": episode_id, "missing": True})
            continue
        out.append({"id": episode.id, "ref": episode.ref, "timestamp": episode.timestamp,
                    "type": episode.type.value, "outcome": episode.outcome.value,
                    "text": episode.text})
    return out


def _brief(entry: GrimoireEntry) -> dict[str, Any]:
    return {"id": entry.id, "category": entry.category.value, "status": entry.status.value,
            "confidence": entry.confidence, "content": entry.content}


def _related(ctx: Context, entry: GrimoireEntry) -> tuple[list[dict[str, Any]],
                                                          list[dict[str, Any]]]:
    parents = []
    for parent_id in entry.parent_entry_ids:
        parent = ctx.semantic.get_entry(parent_id)
        parents.append(_brief(parent) if parent else {"id": parent_id, "missing": True})
    children = [_brief(e) for e in ctx.semantic.list_entries(
        EntryFilter(statuses=tuple(EntryStatus)), order="created_at", limit=None)
        if entry.id in e.parent_entry_ids]
    return parents, children


def _edges(ctx: Context, entry_id: str) -> list[dict[str, Any]]:
    edges = [*ctx.semantic.edges_from(entry_id, kinds=None),
             *ctx.semantic.edges_to(entry_id, kinds=None)]
    irrelevant = ctx.semantic.edges_from(entry_id, kinds=("irrelevant",))
    return [{"cause_id": e.cause_id, "effect_id": e.effect_id, "kind": e.kind.value,
             "weight": e.weight, "evidence_count": e.evidence_count,
             "relationship": e.relationship, "updated_at": e.updated_at}
            for e in (*edges, *irrelevant)]


def _ranges(ids: list[str], limit: int = 12) -> str:
    """The counted episode ids, shortened: the first ``limit`` and how many more."""
    shown = ", ".join(i[:8] for i in ids[:limit])
    return shown + (f" … (+{len(ids) - limit} more)" if len(ids) > limit else "")


def _evidence(ctx: Context, entry_id: str) -> dict[str, Any]:
    """The episodes counted for the entry (``entry_evidence``), by verdict, oldest first."""
    rows = ctx.semantic.list_evidence(entry_id)

    def units(verdict: str, decisions: bool) -> list[str]:
        return [r[0].removeprefix(DECISION_PREFIX) for r in rows
                if r[1] == verdict and r[0].startswith(DECISION_PREFIX) == decisions]

    return {"confirming": units("confirm", False),
            "contradicting": units("contradict", False),
            "confirming_decisions": units("confirm", True),
            "contradicting_decisions": units("contradict", True),
            "cycles": sorted({r[2] for r in rows})}


def _numbers(ctx: Context, entry: GrimoireEntry, evidence: Mapping[str, Any],
             ) -> dict[str, Any]:
    """The numbers its sentence states, from the fields every view reads: ✓ / ✗, and the
    claim behind the sentence (its own, or for a derived rule its insight's): ``cited_n``
    the episodes the sentence cites, the effect and baseline, and how many of the cited
    episodes were counted since it was learned (each once, as ✓ or ✗: ``counted``) and how
    many it was learned from before (``learned_from``, the rest)."""
    claim, owner = entry.claim, entry.id
    if claim is None and entry.parent_entry_ids:
        # a rule derived from an insight states the numbers of its first parent's claim
        parent = ctx.semantic.get_entry(entry.parent_entry_ids[0])
        if parent is not None and parent.claim is not None:
            claim, owner = parent.claim, parent.id
    out: dict[str, Any] = {"validated_count": entry.validated_count,
                           "contradicted_count": entry.contradicted_count,
                           "sentence": entry.content, "claim_of": None, "cited_n": None}
    if claim is None:
        return out
    counted = (len(evidence["confirming"]) + len(evidence["contradicting"]) if owner == entry.id
               else sum(not r[0].startswith(DECISION_PREFIX)
                        for r in ctx.semantic.list_evidence(owner)))
    out.update(claim_of=owner, own=owner == entry.id, cited_n=claim.support, effect=claim.effect,
               baseline=claim.baseline, counted=counted,
               learned_from=max(0, claim.support - counted))
    return out


def explain_entry(ctx: Context, id: str) -> dict[str, Any]:
    """Everything known about one entry's history (see the module doc)."""
    entry = resolve_entry(ctx, id)
    now = store_time(ctx)  # the data's own time, as the curator's cycles judge it
    deltas = [{"cycle": d.cycle, "op": d.op, "at": d.created_at, "before": d.before,
               "after": d.after} for d in ctx.semantic.list_curator_deltas(entry_id=entry.id)]
    quarantine = ctx.semantic.get_quarantine(entry.id)
    parents, children = _related(ctx, entry)
    evidence = _evidence(ctx, entry.id)
    out: dict[str, Any] = {
        "id": entry.id,
        "entry": entry.to_dict(),
        "votes": {"validated_count": entry.validated_count,
                  "contradicted_count": entry.contradicted_count},
        "numbers": _numbers(ctx, entry, evidence),
        "evidence": evidence,
        "decay": _decay(ctx, entry, now),
        "admission": _admissions(ctx, entry),
        "history": deltas,
        "quarantine": None if quarantine is None else {
            "reason": quarantine.reason, "conflicting_id": quarantine.conflicting_id,
            "quarantined_at": quarantine.quarantined_at, "resolution": quarantine.resolution,
            "resolved_at": quarantine.resolved_at},
        "provenance": {"provenance": entry.provenance.value, "source": entry.source.to_dict(),
                       "episodes_total": len(entry.parent_episode_ids),
                       "episodes": _episodes(ctx, entry.parent_episode_ids)},
        "parents": parents,
        "derived": children,
        "edges": _edges(ctx, entry.id),
        "now": now,
        # FEED.json: the market simulator's memory, whose times are simulated time
        "simulated": ctx.simulated,
    }
    out["text"] = render_text(out)
    return out


def _when(ms: int, simulated: bool = False) -> str:
    """A time of the memory: UTC, or simulated time when the memory is simulated (the
    simulator's clock runs ahead of the wall clock: never printed as real UTC)."""
    text = iso_utc(ms).replace("T", " ").removesuffix("Z")
    return f"{text} {'simulated time' if simulated else 'UTC'}"


# Said once at the top of the view of an entry of simulated memory (as PLAYBOOK.md says it).
SIMULATED_LINE = ("Simulated memory: learned from Grimoire's built-in market simulator, not "
                  "from an agent's real episodes; its times are simulated time.")


_PROVENANCE_WORDS = {"self_learned": "learned from its own episodes"}


def _provenance(p: Mapping[str, Any]) -> str:
    kind = str(p.get("provenance", ""))
    words = _PROVENANCE_WORDS.get(kind, kind.replace("_", " "))
    golem = (p.get("source") or {}).get("golem_id")
    return words if golem in (None, "", "local") else f"{words} (from agent {golem})"


def _change(before: Mapping[str, Any], after: Mapping[str, Any],
            simulated: bool = False) -> str:
    """What one curator step changed, field by field, in words: only the fields that moved
    (a step records whole fields: a structured claim, the sentence), each as before → after;
    a sentence as the words that changed in it; a structured value as "updated"."""
    parts = []
    for key in [k for k in after if k not in ("why", "detail")]:
        old, new = before.get(key), after[key]
        if key in before and old == new:
            continue
        name = key.replace("_", " ")
        if isinstance(new, Mapping) or isinstance(old, Mapping):
            parts.append(f"{name} updated")
        elif key == "content" and isinstance(old, str) and isinstance(new, str):
            parts.append(f"sentence {_words_changed(old, new)}")
        elif key in before:
            parts.append(f"{name} {_value(key, old, simulated)} → "
                         f"{_value(key, new, simulated)}")
        else:
            parts.append(f"{name} {_value(key, new, simulated)}")
    return ", ".join(parts)


def _words_changed(old: str, new: str) -> str:
    """``"… averages 2481642 …" → "… averages 2497305 …"``: the span that differs, with a
    word of context each side, the rest elided."""
    a, b = old.split(), new.split()
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    lo = max(0, start - 1)

    def span(words: list[str]) -> str:
        hi = len(words) - max(0, end - 1)
        text = " ".join(words[lo:hi])
        text = _short(text, 80)
        return ("… " if lo > 0 else "") + text + (" …" if hi < len(words) else "")

    return f"“{span(a)}” → “{span(b)}”"


def _value(key: str, value: Any, simulated: bool = False) -> str:
    if key.endswith("_at") and isinstance(value, int):
        return _when(value, simulated)
    return _short(value)


def _short(value: Any, width: int = 60) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _numbers_text(n: Mapping[str, Any]) -> list[str]:
    cited = n.get("cited_n")
    if not isinstance(cited, int):
        return []
    whose = "" if n.get("own") else f" (those of insight {n.get('claim_of')})"
    return [f"Its sentence cites {cited} episode{'s' * (cited != 1)}{whose}: "
            f"{n.get('learned_from', 0)} it was learned from and {n.get('counted', 0)} counted "
            f"since (each once, as ✓ or ✗)."]


def _rule_lines(rule: Mapping[str, Any]) -> list[str]:
    """The confidence rule with this entry's terms (and its stored value where it differs:
    set when written, before any evidence was counted)."""
    k = f"{rule['k']:g}"
    head = (f"Confidence rule: (✓{rule['confirmed']} + {k} × prior {rule['prior']:g}) / "
            f"(✓{rule['confirmed']} + ✗{rule['contradicted']} + {k}) = "
            f"{rule['from_evidence']:.3f} from the evidence")
    tail = f" × age factor {rule['age_factor']:.3f} = {rule['effective']:.3f} now."
    if abs(rule["stored"] - rule["from_evidence"]) <= 5e-4:
        return [head + "," + tail]
    return [head + ";", f"  stored {rule['stored']:.3f} (set when it was written: the rule "
                        "replaces it once evidence is counted)," + tail]


def render_text(data: Mapping[str, Any]) -> str:
    """The owner-readable form of ``explain_entry``'s data."""
    e = data["entry"]
    d = data["decay"]
    sim = bool(data.get("simulated"))
    lines = [
        *([SIMULATED_LINE] if sim else []),
        f"{e['category']} {e['id']} [{e['status']}]",
        f"  {e['content']}",
        "",
        f"Confidence {d['confidence']:.3f} stored, {d['effective_confidence']:.3f} effective now "
        f"(retention {d['retention']:.3f}; {d['decay_class']}, "
        + ("never decays" if d["half_life_days"] is None else
           f"half-life {d['half_life_days']} d × strength {d['strength']}")
        + f"; last reinforced {d['days_since_access']} d ago).",
        *_rule_lines(d["rule"]),
        f"Votes: ✓{data['votes']['validated_count']} ✗{data['votes']['contradicted_count']}. "
        f"Provenance: {_provenance(data['provenance'])}.",
    ]
    lines.extend(_numbers_text(data.get("numbers") or {}))
    ev = data.get("evidence") or {}
    for word, key in (("Confirming", "confirming"), ("Contradicting", "contradicting")):
        ids = list(ev.get(key, ()))
        decisions = list(ev.get(f"{key}_decisions", ()))
        lines.append(f"{word} episodes counted ({len(ids)}): {_ranges(ids) or 'none'}"
                     + (f"; reported decisions ({len(decisions)}): {_ranges(decisions)}"
                        if decisions else "") + ".")
    if data["admission"]:
        lines += ["", "Admission gate:"]
        for a in data["admission"]:
            factors = ", ".join(f"{k} {v:.2f}" for k, v in a["factors"].items())
            lines.append(f"  {_when(a['at'], sim)}  {a['decision']} "
                         f"(composite {a['composite']:.3f}: {factors})"
                         + (" [off-topic]" if a.get("off_topic") else ""))
            lines.extend(f"    - {reason}" for reason in a.get("reasons", ()))
    if data["history"]:
        lines += ["", "Curator history:"]
        for h in data["history"]:
            why = (h["after"] or {}).get("why", "")
            change = _change(h["before"] or {}, h["after"] or {}, sim)
            lines.append(f"  cycle {h['cycle']} {_when(h['at'], sim)}  {h['op']}"
                         + (f": {change}" if change else "") + (f" ({why})" if why else ""))
    q = data["quarantine"]
    if q:
        lines += ["", f"Quarantine: {q['reason']} (conflicts with {q['conflicting_id']}); "
                      f"{q['resolution'] or 'pending'}"]
    for title, items in (("Derived from", data["parents"]), ("Rules derived from it",
                                                              data["derived"])):
        if items:
            lines += ["", f"{title}:"]
            lines += [f"  {p['id']}" + (" (missing)" if p.get("missing") else
                                        f" {p['category']} [{p['status']}] {p['content']}")
                      for p in items]
    eps = data["provenance"]["episodes"]
    if eps:
        total = data["provenance"]["episodes_total"]
        lines += ["", f"Episodes the learners found it in (the last {len(eps)} of the {total} "
                      "kept):"]
        for ep in eps:
            if ep.get("missing"):
                lines.append(f"  {ep['id']} (no longer stored)")
                continue
            ref = f" [{ep['ref']}]" if ep["ref"] else ""
            lines.append(f"  {_when(ep['timestamp'], sim)}{ref} {ep['outcome']}: {ep['text']}")
    if data["edges"]:
        lines += ["", "Causal and outcome edges:"]
        lines += [f"  {x['cause_id']} → {x['effect_id']} ({x['kind']}, weight {x['weight']:.2f},"
                  f" evidence {x['evidence_count']})" for x in data["edges"]]
    return "\n".join(lines) + "\n"
