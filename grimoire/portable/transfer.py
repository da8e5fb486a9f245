"""``import``: knowledge from a bundle (or the Clade) into this Grimoire, on its terms.

Every entry goes through the admission gate (``gate.admit.admit``, on the
writer thread) as its provenance (``predecessor``, ``clade`` or ``lethe``), at
the exporter's confidence times that provenance's weight
(``decay.provenance_weight``); it enters as a candidate tagged ``inherited``,
and the curator never promotes an outside heuristic before a local validation
(``curator.cycle.transitions``), so it re-earns confidence only through local outcomes.
Bloodstain flags are kept (a testament's lessons set them: ``succession``). An item's
structured claim comes with it, and a rule derived from an insight keeps that parent when
both are imported, so the importer's curator judges them on its own episodes like any
claim it learned; ``generation`` (a testament's) is recorded in each entry's source.
Inherited causal edges start at weight
``INHERITED_EDGE_WEIGHT`` (0.3, seed 004) with one piece of evidence; an
endpoint that was an episode in the source store becomes an ``observation``
episode here with ``ref`` ``inherited:<hash>``. Active triples are asserted at
their confidence times the provenance weight. An endpoint episode whose vector the bundle
carries (``portable.vectors``, checked by the caller) is written with it, not embedded again,
and so is an entry's sentence given to the gate.

Idempotent: each item's content hash is recorded in the semantic store's meta
table with the local id it became; an item already recorded is skipped. Each
import emits one ``IngestResult`` event.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.gate.admit import Proposal, admit
from grimoire.methods.entry import proposal_from_params
from grimoire.methods.episode import write_embedded_episodes, write_episodes
from grimoire.methods.kg import kg_assert_many
from grimoire.portable.vectors import text_key
from grimoire.records import Claim, EntrySource, Provenance
from grimoire.stores.semantic.types import CausalEdge, EdgeKind

__all__ = ["IMPORT_PROVENANCES", "INHERITED_EDGE_WEIGHT", "INHERITED_TAG", "import_items",
           "imported_as"]

# death_reflection: a testament's lessons (``succession``), never asked for by hand
IMPORT_PROVENANCES = ("predecessor", "clade", "lethe", "death_reflection")
INHERITED_EDGE_WEIGHT = 0.3
INHERITED_TAG = "inherited"
_LEDGER = "portable.imported."


def _seen(ctx: Context, item_hash: str) -> str | None:
    value = ctx.semantic.get_meta(_LEDGER + item_hash)
    return value if isinstance(value, str) else None


def imported_as(ctx: Context, item_hash: str) -> str | None:
    """The local id an item with this hash became ("" if the gate refused it), or None if
    it was never imported."""
    return _seen(ctx, item_hash)


def _claim(value: Any) -> Claim | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("claim must be an object or null", field="claim")
    try:
        return Claim.from_dict(value)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"claim is malformed: {exc!r}", field="claim") from None


def _proposal(item: dict[str, Any], provenance: str, weight: float, origin: str,
              generation: int | None = None) -> Proposal:
    conf = item.get("confidence")
    if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1:
        raise ValidationError("confidence must be a number in [0, 1]", field="confidence")
    tags = [t for t in item.get("tags") or [] if t != INHERITED_TAG]
    params = {
        "category": item.get("category"), "content": item.get("content"),
        "provenance": provenance, "confidence": round(float(conf) * weight, 4),
        "decay_class": item.get("decay_class"),
        "tags": [*tags, INHERITED_TAG, f"from:{item.get('origin') or origin}"],
        "strategy": item.get("strategy"), "regime": item.get("regime"),
        "source": {"golem_id": str(item.get("origin") or origin)},
    }
    proposal = proposal_from_params({k: v for k, v in params.items() if v is not None})
    alerts = item.get("parent_episode_ids") or ()
    return dataclasses.replace(
        proposal, is_bloodstain=bool(item.get("is_bloodstain")), claim=_claim(item.get("claim")),
        source=EntrySource(golem_id=proposal.source.golem_id, generation_number=generation),
        parent_episode_ids=tuple(str(i) for i in alerts))


def _weight(ctx: Context, provenance: str) -> float:
    if provenance not in IMPORT_PROVENANCES:
        raise ValidationError(f"must be one of {', '.join(IMPORT_PROVENANCES)}",
                              field="provenance")
    return float(ctx.config.decay.provenance_weight[Provenance(provenance).value])


def import_items(ctx: Context, *, entries: Sequence[dict[str, Any]],
                 causal: Sequence[dict[str, Any]] = (), triples: Sequence[dict[str, Any]] = (),
                 provenance: str, origin: str, source: str,
                 generation: int | None = None,
                 episode_vectors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Import already verified items; returns counts per outcome. See the module doc.
    ``episode_vectors``: ``{text_sha256: vector}`` of entries' sentences and endpoint
    episodes, checked against this model (``portable.vectors.episode_vectors``)."""
    weight = _weight(ctx, provenance)
    # Validate everything before the first write: bad input leaves the store untouched.
    proposals = []
    for n, item in enumerate(entries):
        try:
            proposals.append((item, _proposal(item, provenance, weight, origin, generation)))
        except ValidationError as exc:
            raise ValidationError(f"entry {n}: {exc}", field="bundle") from None
    for n, link in enumerate(causal):
        for end in ("cause", "effect"):
            node = link.get(end)
            if not isinstance(node, dict) or node.get("kind") not in ("entry", "episode") \
                    or not isinstance(node.get("text"), str) or not node.get("id"):
                raise ValidationError(f"causal {n}: {end} must be {{kind, id, text}}",
                                      field="bundle")
    for n, triple in enumerate(triples):
        if not isinstance(triple.get("confidence", 1.0), int | float):
            raise ValidationError(f"triple {n}: confidence must be a number", field="bundle")

    counts = {"entries": {}, "causal": {"added": 0, "skipped": 0},
              "triples": {"added": 0, "skipped": 0}}  # type: dict[str, dict[str, int]]
    fresh = [(item, p) for item, p in proposals if _seen(ctx, item["hash"]) is None]
    # parents first: a derived rule's insight must have its local id before the rule
    fresh.sort(key=lambda pair: bool(pair[0].get("parents")))
    counts["entries"]["already_imported"] = len(proposals) - len(fresh)
    # One batched embedding for the entries, then every admission (the whole gate, one
    # entry at a time) in one transaction on the writer: one durable commit, not one each.
    vectors = _entry_vectors(ctx, [p.content for _, p in fresh], episode_vectors or {}) \
        if fresh else None
    local_ids: dict[str, str] = {}
    hash_of = {str(item.get("source_id")): str(item["hash"]) for item, _ in proposals}

    def parent_ids(item: dict[str, Any]) -> tuple[str, ...]:
        found = [local_ids.get(str(s)) or _seen(ctx, hash_of.get(str(s), ""))
                 for s in item.get("parents") or ()]
        return tuple(i for i in found if i)

    def admit_all() -> None:
        with ctx.semantic.transaction():
            for i, (item, p) in enumerate(fresh):
                assert vectors is not None
                if item.get("parents"):
                    p = dataclasses.replace(p, parent_entry_ids=parent_ids(item))
                result = admit(ctx, p, vectors[i])
                decision = str(result["decision"])
                counts["entries"][decision] = counts["entries"].get(decision, 0) + 1
                ctx.semantic.set_meta(_LEDGER + item["hash"], result["id"] or "")
                if result["id"]:
                    local_ids[str(item.get("source_id"))] = str(result["id"])

    ctx.writer.call(admit_all)
    for item, _ in proposals:  # items imported earlier still map to their local entry
        known = _seen(ctx, item["hash"])
        if known:
            local_ids.setdefault(str(item.get("source_id")), known)

    links = [link for link in causal if _seen(ctx, link["hash"]) is None]
    counts["causal"]["skipped"] = len(causal) - len(links)
    episode_ids = _local_episodes(ctx, links, episode_vectors or {})
    edges: list[tuple[CausalEdge, str]] = []
    for link in links:
        ends = [local_ids.get(str(link[end]["id"])) if link[end]["kind"] == "entry"
                else episode_ids[_ref(link[end])] for end in ("cause", "effect")]
        if ends[0] is None or ends[1] is None or ends[0] == ends[1]:
            counts["causal"]["skipped"] += 1
            continue
        kind = str(link.get("kind")) if link.get("kind") in set(EdgeKind) else "explicit"
        rel = link.get("relationship")
        edges.append((CausalEdge(cause_id=ends[0], effect_id=ends[1], kind=EdgeKind(kind),
                                 weight=INHERITED_EDGE_WEIGHT,
                                 relationship=f"inherited ({provenance}: {origin})"
                                 + (f": {rel}" if rel else ""),
                                 lag_ms=link.get("lag_ms"), evidence_count=1),
                      str(link["hash"])))
    for start in range(0, len(edges), _CHUNK):
        ctx.writer.call(functools.partial(_record_edges, ctx, edges[start:start + _CHUNK]))
    counts["causal"]["added"] = len(edges)

    fresh_triples = [t for t in triples if _seen(ctx, t["hash"]) is None]
    counts["triples"]["skipped"] = len(triples) - len(fresh_triples)
    for start in range(0, len(fresh_triples), _CHUNK):
        chunk = fresh_triples[start:start + _CHUNK]
        got = kg_assert_many(ctx, [{
            "subject": t["subject"], "predicate": t["predicate"], "object": t["object"],
            "valid_from": t["valid_from"],
            "confidence": round(float(t.get("confidence", 1.0)) * weight, 4)} for t in chunk])
        ctx.writer.call(functools.partial(_record_ledger, ctx, [
            (str(t["hash"]), str(r.get("id", ""))) for t, r in zip(chunk, got, strict=True)]))
        counts["triples"]["added"] += len(chunk)

    summary = {"source": source, "provenance": provenance, "origin": origin,
               "weight": weight, **counts}
    ctx.events.emit("IngestResult", ctx.now(), source=source, stage="import",
                    outcome=counts, provenance=provenance, origin=origin)
    return summary


# Edges, ledger rows and triples per writer job: one durable commit per chunk, and the
# writer stays free for the daemon's other work between chunks.
_CHUNK = 1000
_EPISODE_BATCH = 256
_CARRIED_BATCH = 1000  # episodes with their vectors per durable append (no embedding)


def _record_edges(ctx: Context, edges: Sequence[tuple[CausalEdge, str]]) -> None:
    """On the writer: the edges, their fan-in bound and their ledger rows, one transaction
    (bounding after the chunk keeps the same strongest edges as bounding after each)."""
    now = ctx.now()
    with ctx.semantic.transaction():
        for edge, item_hash in edges:
            ctx.semantic.upsert_edge(edge, now=now)
            ctx.semantic.set_meta(_LEDGER + item_hash, f"{edge.cause_id}>{edge.effect_id}")
        ctx.semantic.bound_fan_in([e.effect_id for e, _ in edges],
                                  ctx.config.retrieval.causal_max_fan_in)


def _record_ledger(ctx: Context, rows: Sequence[tuple[str, str]]) -> None:
    with ctx.semantic.transaction():
        for item_hash, local in rows:
            ctx.semantic.set_meta(_LEDGER + item_hash, local)


def _entry_vectors(ctx: Context, sentences: Sequence[str], carried: Mapping[str, Any]
                   ) -> Any:
    """One row per sentence: the bundle's vector for it when it carries one (checked against
    this model), else embedded here, in one call for those."""
    import numpy as np

    rows = np.empty((len(sentences), ctx.embedder.dim), dtype=np.float32)
    todo = []
    for i, text in enumerate(sentences):
        if text_key(text) in carried:
            rows[i] = carried[text_key(text)]
        else:
            todo.append(i)
    if todo:
        rows[todo] = ctx.embedder.embed([sentences[i] for i in todo])
    return rows


def _ref(node: dict[str, Any]) -> str:
    return "inherited:" + hashlib.sha256(node["text"].encode()).hexdigest()[:32]


def _local_episodes(ctx: Context, links: Sequence[dict[str, Any]],
                    vectors: Mapping[str, Any]) -> dict[str, str]:
    """The local episode of every episode endpoint (by its ``inherited:`` ref): the one an
    earlier import wrote, else a new ``observation`` episode, written in batches (one
    durable append per batch, and one embedding call for those whose vector ``vectors``,
    keyed by the words' sha256, does not carry)."""
    found: dict[str, str] = {}
    missing: dict[str, str] = {}  # ref -> text, in first-seen order
    for link in links:
        for end in ("cause", "effect"):
            node = link[end]
            if node["kind"] != "episode":
                continue
            ref = _ref(node)
            if ref in found or ref in missing:
                continue
            known = ctx.episodes.get_by_ref(ref)
            if known:
                found[ref] = known[0].id
            else:
                missing[ref] = node["text"]
    carried = [(ref, text) for ref, text in missing.items() if text_key(text) in vectors]
    embed = [(ref, text) for ref, text in missing.items() if text_key(text) not in vectors]
    for start in range(0, len(carried), _CARRIED_BATCH):
        batch = carried[start:start + _CARRIED_BATCH]
        ids = write_embedded_episodes(
            ctx, [{"text": text, "type": "observation", "ref": ref} for ref, text in batch],
            [vectors[text_key(text)] for _, text in batch])
        found.update((ref, id_) for (ref, _), id_ in zip(batch, ids, strict=True))
    for start in range(0, len(embed), _EPISODE_BATCH):
        batch = embed[start:start + _EPISODE_BATCH]
        ids = write_episodes(ctx, [{"text": text, "type": "observation", "ref": ref}
                                   for ref, text in batch])
        found.update((ref, id_) for (ref, _), id_ in zip(batch, ids, strict=True))
    return found
