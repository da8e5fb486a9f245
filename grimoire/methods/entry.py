"""Knowledge entries: ``entry.add`` through the admission gate, ``entry.get`` / ``entry.list``.

``entry.add`` validates its params into a ``Proposal`` and hands it to the gate's
admission path (``grimoire.gate.admit``), the one every candidate entry takes, on the
writer thread; then it indexes the new entry's entity mentions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from curator.cycle.state import store_time
from curator.cycle.transitions import SUMMARY_TAG, is_summary
from grimoire.context import Context
from grimoire.errors import NotFoundError, ValidationError
from grimoire.gate.admit import MAX_CONTENT_CHARS, Proposal, admit
from grimoire.gate.content import require_content
from grimoire.gate.decay import effective_confidence
from grimoire.guard.redact import redactor
from grimoire.records import (
    PAD,
    Category,
    DecayClass,
    EntrySource,
    EntryStatus,
    GrimoireEntry,
    Provenance,
    Regime,
    parse_enum,
    parse_optional_enum,
)
from grimoire.records.text import require_unicode
from grimoire.retrieval.stages.mentions import index_new_entries
from grimoire.stores.semantic.types import EntryFilter
from playbook.render_text import SHORT_ID_CHARS

__all__ = ["ENTRY_KINDS", "add_entry", "add_short_ids", "get_entry", "list_entries",
           "proposal_from_params"]


def _str_list(value: object, field: str, limit: int = 200) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError("must be a list of non-empty strings", field=field)
    if len(value) > limit:
        raise ValidationError(f"at most {limit} items", field=field)
    return tuple(value)


def _source(value: object) -> EntrySource:
    if value is None:
        return EntrySource()
    if not isinstance(value, Mapping) or set(value) - {"golem_id", "generation_number",
                                                       "owner_address"}:
        raise ValidationError("must be {golem_id, generation_number?, owner_address?}",
                              field="source")
    gen = value.get("generation_number")
    if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int) or gen < 0):
        raise ValidationError("must be an integer >= 0", field="source.generation_number")
    golem = value.get("golem_id", "local")
    owner = value.get("owner_address")
    if not isinstance(golem, str) or (owner is not None and not isinstance(owner, str)):
        raise ValidationError("golem_id and owner_address must be strings", field="source")
    return EntrySource(golem, gen, owner)


_PARAMS = {"category", "content", "provenance", "confidence", "decay_class", "tags", "strategy",
           "regime", "source", "parent_episode_ids", "emotional_tag"}


def proposal_from_params(params: Mapping[str, Any]) -> Proposal:
    """Validate ``entry.add`` params; the first bad field raises ValidationError naming it."""
    unknown = set(params) - _PARAMS
    if unknown:
        raise ValidationError(f"unknown parameter(s): {', '.join(sorted(unknown))}",
                              field="params")
    content = params.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("is required and must be a non-empty string", field="content")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(f"longer than {MAX_CONTENT_CHARS} characters", field="content")
    require_unicode(content, "content")
    require_content(content)  # the gate refuses "ok": a word or two with no claim
    if "category" not in params:
        raise ValidationError("is required", field="category")
    confidence = params.get("confidence")
    if confidence is not None and (isinstance(confidence, bool)
                                   or not isinstance(confidence, int | float)
                                   or not math.isfinite(confidence)
                                   or not 0.0 <= confidence <= 1.0):
        raise ValidationError("must be a number in [0, 1]", field="confidence")
    strategy = params.get("strategy")
    if strategy is not None and (not isinstance(strategy, str) or not strategy):
        raise ValidationError("must be a non-empty string", field="strategy")
    mood = params.get("emotional_tag")
    category = parse_enum(Category, params["category"], "category")
    provenance = parse_enum(Provenance, params.get("provenance", Provenance.AGENT.value),
                            "provenance")
    return Proposal(
        category=category,
        content=content.strip(),
        # Told, not learned: without a provenance an entry is the agent's word (the CLI sends
        # "owner" for the owner's); only Grimoire's learners write self_learned.
        provenance=provenance,
        # A warning from a death reflection is a bloodstain (seed 004).
        is_bloodstain=(category is Category.WARNING
                       and provenance is Provenance.DEATH_REFLECTION),
        confidence=None if confidence is None else float(confidence),
        decay_class=parse_optional_enum(DecayClass, params.get("decay_class"), "decay_class"),
        tags=_str_list(params.get("tags"), "tags"),
        strategy=strategy,
        regime=parse_optional_enum(Regime, params.get("regime"), "regime"),
        source=_source(params.get("source")),
        parent_episode_ids=_str_list(params.get("parent_episode_ids"), "parent_episode_ids",
                                     limit=1000),
        emotional_tag=None if mood is None else PAD.from_dict(mood, "emotional_tag"),
    )


def add_entry(ctx: Context, params: Mapping[str, Any]) -> dict[str, Any]:
    proposal = proposal_from_params(params)
    secrets = redactor(ctx.config.privacy.redact, ctx.config.privacy.phone_region)
    if secrets is not None:  # before the embedding and the store see it (privacy.redact)
        proposal = dataclasses.replace(proposal, content=secrets.redact(proposal.content))
    vector = ctx.embedder.embed([proposal.content])[0]  # off the writer thread
    # The optional LLM's view of future utility, also off the writer thread (SPEC §5).
    scorer = ctx.extras.get("admission_scorer")
    scores = scorer(proposal) if scorer is not None else None

    def job() -> dict[str, Any]:
        out = admit(ctx, proposal, vector, llm_scores=scores)
        if out["id"]:  # its entity mentions now, so the next query's graph backend sees it
            index_new_entries(ctx)
        return out

    result: dict[str, Any] = ctx.writer.call(job)
    if result["id"] and result["decision"] == "admitted":
        ctx.events.emit("GrimoireWrite", ctx.now(), kind="entry", count=1,
                        category=proposal.category.value)
    return result


def get_entry(ctx: Context, id: str) -> dict[str, Any]:
    if not isinstance(id, str) or not id:
        raise ValidationError("must be a non-empty string", field="id")
    entry = ctx.semantic.get_entry(id)
    if entry is None:
        raise NotFoundError(f"no entry with id {id}")
    data = entry.to_dict()
    data["effective_confidence"] = round(
        effective_confidence(entry, store_time(ctx), ctx.config.decay), 4)
    data["short_id"] = ctx.semantic.short_ids([entry.id], SHORT_ID_CHARS)[entry.id]
    return data


#: ``entry.list``'s kinds: ``knowledge`` (the default: rules, insights, causal links and
#: everything else but the curator's L1/L2 summaries), the summaries (``summary``, or one
#: level: ``summary:l1`` / ``summary:l2``, the tags they carry), or ``all``.
ENTRY_KINDS = ("knowledge", SUMMARY_TAG, f"{SUMMARY_TAG}:l1", f"{SUMMARY_TAG}:l2", "all")
_PAGE = 200


def _of_kind(entry: GrimoireEntry, kind: str) -> bool:
    if kind == "all":
        return True
    if kind == "knowledge":
        return not is_summary(entry)
    return kind in entry.tags


def list_entries(ctx: Context, *, category: str | None, status: str | None,
                 strategy: str | None, limit: int, kind: str = "knowledge") -> dict[str, Any]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValidationError("must be an integer in [1, 1000]", field="limit")
    if kind not in ENTRY_KINDS:
        raise ValidationError(f"{kind!r} is not one of: {', '.join(ENTRY_KINDS)}",
                              field="kind")
    filters = EntryFilter(
        categories=None if category is None else (parse_enum(Category, category, "category"),),
        statuses=None if status is None else (parse_enum(EntryStatus, status, "status"),),
        strategies=None if strategy is None else (strategy,),
    )
    now = store_time(ctx)  # effective confidence at the data's own time, as the curator's
    entries: list[GrimoireEntry] = []
    offset = 0
    while len(entries) < limit:  # the store's order, pages read until enough of the kind
        page: Sequence[GrimoireEntry] = ctx.semantic.list_entries(
            filters, limit=limit if kind == "all" else max(limit, _PAGE), offset=offset)
        entries.extend(e for e in page if _of_kind(e, kind))
        offset += len(page)
        if kind == "all" or len(page) < max(limit, _PAGE):
            break
    # Each id's shortest prefix unique in the whole store (never shorter than PLAYBOOK.md's
    # short id): what the owner's table prints and entry.get / explain take back.
    shorts = ctx.semantic.short_ids([e.id for e in entries[:limit]], SHORT_ID_CHARS)
    return {"kind": kind, "entries": [
        {**e.to_dict(), "effective_confidence": round(
            effective_confidence(e, now, ctx.config.decay), 4), "short_id": shorts[e.id]}
        for e in entries[:limit]]}


def add_short_ids(ctx: Context, items: Sequence[dict[str, Any]], *, kind: str | None = "entry"
                  ) -> None:
    """Give each entry item of an answer (``kind`` entry; every item for ``kind=None``) its
    ``short_id``: the shortest prefix unique among the store's entries, never shorter than
    PLAYBOOK.md's short id (what ``entry show`` and ``explain`` take)."""
    mine = [i for i in items if "id" in i and (kind is None or i.get("kind") == kind)]
    if not mine:
        return
    shorts = ctx.semantic.short_ids([str(i["id"]) for i in mine], SHORT_ID_CHARS)
    for item in mine:
        item["short_id"] = shorts[str(item["id"])]
