"""Knowledge bundles: the on-disk format, ``export_bundle`` and ``read_bundle``.

A bundle is a directory (format version 1)::

    manifest.json    kind "grimoire-bundle", format_version, origin, counts, and the
                     sha256 and size of every other file (written last)
    entries.jsonl    one knowledge entry per line: category, content, confidence,
                     provenance, decay class, tags, strategy, regime, bloodstain flag,
                     evidence {validated, contradicted, episodes, status}, origin, the
                     structured claim (or null) and the source ids of the entries it was
                     derived from (``parents``), so that the importer's curator judges it
                     on its own episodes; hash
    causal.jsonl     one causal link per line: cause / effect {kind, id, text}, kind,
                     weight, lag_ms, evidence_count, relationship, hash
    triples.jsonl    one active (open, current) knowledge-graph triple per line:
                     subject, predicate, object, valid_from, confidence, evidence_count, hash
    vectors.jsonl    the vectors of the entries' sentences and of the causal links' episodes
                     (``portable.vectors``), so that an importer with the same embedding
                     model does not embed them again; the manifest's ``vectors`` names
                     its model, dimension and count
                     (optional: a bundle without it is imported by embedding them)
    PLAYBOOK.md      the exporter's playbook, for the owner to read (never imported)

The manifest's ``memory`` is the exporter's ``FEED.json`` kind (``simulated``, ``real``, or
null for an unmarked directory): an import refuses to mix simulated and real memory
unless asked, and marks a fresh directory with the bundle's kind.

``hash`` is the sha256 of the item's canonical JSON without the hash: the importer
skips an item whose hash it has already imported, so importing twice adds nothing.
``read_bundle`` verifies the manifest (every hash and size, no missing or extra
file) and parses every line before returning, so a tampered or truncated bundle
is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grimoire import __version__
from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.gate.decay import effective_confidence
from grimoire.portable import vectors as carried
from grimoire.portable.manifest import (
    MANIFEST,
    file_table,
    fsync_tree,
    read_manifest,
    verify,
    write_json_atomic,
)
from grimoire.records import Category, EntryStatus
from grimoire.stores.semantic.types import EntryFilter

__all__ = ["FORMAT_VERSION", "Bundle", "export_bundle", "item_hash", "read_bundle", "read_items",
           "write_jsonl"]

FORMAT_VERSION = 1
KIND = "grimoire-bundle"
FILES = ("entries.jsonl", "causal.jsonl", "triples.jsonl")
_EXPORTED = (Category.INSIGHT, Category.HEURISTIC, Category.WARNING, Category.CAUSAL_LINK,
             Category.STRATEGY_FRAGMENT)
_LIVE = (EntryStatus.CANDIDATE, EntryStatus.ACTIVE, EntryStatus.DEMOTED)
_FAR_BLOCK = (1 << 62)


def item_hash(item: Mapping[str, Any]) -> str:
    body = {k: v for k, v in item.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def _hashed(item: dict[str, Any]) -> dict[str, Any]:
    item["hash"] = item_hash(item)
    return item


def entry_items(ctx: Context, min_confidence: float, origin: str,
                categories: tuple[Category, ...] = _EXPORTED,
                statuses: tuple[EntryStatus, ...] = _LIVE) -> Iterator[dict[str, Any]]:
    now = ctx.now()
    for e in ctx.semantic.list_entries(EntryFilter(categories=categories, statuses=statuses),
                                       limit=None):
        conf = effective_confidence(e, now, ctx.config.decay)
        if conf < min_confidence:
            continue
        yield _hashed({
            "category": e.category.value, "content": e.content,
            "confidence": round(conf, 4), "provenance": e.provenance.value,
            "decay_class": e.decay_class.value, "tags": list(e.tags), "strategy": e.strategy,
            "regime": e.market_regime.value if e.market_regime else None,
            "is_bloodstain": e.is_bloodstain,
            "evidence": {"validated": e.validated_count, "contradicted": e.contradicted_count,
                         "episodes": len(e.parent_episode_ids), "status": e.status.value},
            "origin": e.source.golem_id if e.source.golem_id != "local" else origin,
            "source_id": e.id,
            "claim": e.claim.to_dict() if e.claim is not None else None,
            "parents": list(e.parent_entry_ids),
        })


def _endpoint(ctx: Context, node_id: str, embedded: dict[str, str] | None
              ) -> dict[str, Any] | None:
    entry = ctx.semantic.get_entry(node_id)
    if entry is not None:
        return {"kind": "entry", "id": node_id, "text": entry.content}
    episode = ctx.episodes.get(node_id)
    if episode is not None:
        if embedded is not None and episode.thread is None:  # its vector embeds its words
            embedded.setdefault(carried.text_key(episode.text), episode.id)
        return {"kind": "episode", "id": node_id, "text": episode.text}
    return None


def causal_items(ctx: Context, embedded: dict[str, str] | None = None
                 ) -> Iterator[dict[str, Any]]:
    """The causal links; each episode endpoint whose vector can travel is added to
    ``embedded`` ({text_sha256: episode id}) when given."""
    for edge in ctx.semantic.list_edges():
        cause = _endpoint(ctx, edge.cause_id, embedded)
        effect = _endpoint(ctx, edge.effect_id, embedded)
        if cause is None or effect is None:
            continue
        yield _hashed({"cause": cause, "effect": effect, "kind": str(edge.kind),
                       "weight": edge.weight, "lag_ms": edge.lag_ms,
                       "evidence_count": edge.evidence_count,
                       "relationship": edge.relationship})


def triple_items(ctx: Context) -> Iterator[dict[str, Any]]:
    for t in ctx.graph.range_scan(0, _FAR_BLOCK):
        if not t.is_open or t.superseded_at is not None:
            continue
        yield _hashed({"subject": t.subject.to_dict(), "predicate": t.predicate,
                       "object": t.object.to_dict(), "valid_from": t.valid_from,
                       "confidence": t.confidence, "evidence_count": t.evidence_count})


def write_jsonl(path: Path, items: Iterable[dict[str, Any]]) -> int:
    """Write one JSON object a line (sorted keys, UTF-8); the number written."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item, sort_keys=True, ensure_ascii=False) + "\n")
            n += 1
    return n


def export_bundle(ctx: Context, out: str | Path, *, min_confidence: float = 0.3,
                  origin: str | None = None) -> dict[str, Any]:
    """Write a bundle of ``ctx``'s knowledge to the new directory ``out``."""
    started = time.perf_counter()
    target = Path(out)
    if not 0.0 <= min_confidence <= 1.0:
        raise ValidationError("must be in [0, 1]", field="min_confidence")
    if target.exists():
        raise ValidationError(f"{target} already exists: choose a new bundle directory",
                              field="out")
    origin = origin or ctx.data_dir.resolve().name
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True, mode=0o700)
    try:
        embedded: dict[str, str] = {}
        sentences: dict[str, str] = {}

        def noted(items: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            for item in items:  # an entry's stored vector is its sentence's
                sentences.setdefault(carried.text_key(item["content"]), item["source_id"])
                yield item

        counts = {
            "entries": write_jsonl(partial / "entries.jsonl",
                                    noted(entry_items(ctx, min_confidence, origin))),
            "causal": write_jsonl(partial / "causal.jsonl", causal_items(ctx, embedded)),
            "triples": write_jsonl(partial / "triples.jsonl", triple_items(ctx)),
        }
        vectors = write_jsonl(partial / carried.FILE, map(_hashed, carried.vector_items(
            ctx, embedded, sentences)))
        book = ctx.config.playbook_path
        if book.exists():
            shutil.copy2(book, partial / "PLAYBOOK.md")
        fsync_tree(partial)
        write_json_atomic(partial / MANIFEST, {
            "kind": KIND, "format_version": FORMAT_VERSION, "grimoire_version": __version__,
            "origin": origin, "created_at_ms": ctx.now(), "min_confidence": min_confidence,
            "embedding_model": ctx.embedder.model_id, "counts": counts,
            "vectors": carried.manifest_entry(ctx.episodes.model_id, ctx.episodes.dim,
                                              vectors),
            "memory": ctx.memory["kind"] if ctx.memory else None,
            "files": file_table(partial),
        })
        os.replace(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    seconds = time.perf_counter() - started
    return {"out": str(target), "counts": counts, "origin": origin,
            "seconds": round(seconds, 3)}


@dataclass(frozen=True)
class Bundle:
    root: Path
    origin: str
    manifest: dict[str, Any]
    entries: list[dict[str, Any]]
    causal: list[dict[str, Any]]
    triples: list[dict[str, Any]]
    #: ``vectors.jsonl``'s lines (hash-checked; ``portable.vectors.episode_vectors`` checks
    #: the rest against the importer's model)
    vectors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def memory(self) -> str:
        """``simulated`` or ``real``: what the exporter's directory held (a bundle from an
        unmarked directory, or from before bundles said it, counts as real)."""
        return "simulated" if self.manifest.get("memory") == "simulated" else "real"


def read_items(path: Path) -> list[dict[str, Any]]:
    """Parse a JSONL file of hashed items; refuses a line whose hash does not match."""
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{path.name} line {n} is not JSON: {exc}",
                                  field="bundle") from None
        if not isinstance(item, dict) or item.get("hash") != item_hash(item):
            raise ValidationError(f"{path.name} line {n}: item hash does not match its "
                                  "content, refused", field="bundle")
        items.append(item)
    return items


def read_bundle(path: str | Path) -> Bundle:
    """Verify and parse a whole bundle; raises ValidationError before anything is used."""
    root = Path(path)
    manifest = read_manifest(root, KIND, FORMAT_VERSION)
    missing = [name for name in FILES if name not in manifest["files"]]
    if missing:
        raise ValidationError(f"{root} manifest lacks {missing[0]}", field="bundle")
    verify(root, manifest)
    entries, causal, triples = (read_items(root / name) for name in FILES)
    vectors = read_items(root / carried.FILE) if carried.FILE in manifest["files"] else []
    counts = manifest.get("counts", {})
    got = {"entries": len(entries), "causal": len(causal), "triples": len(triples)}
    if counts != got:
        raise ValidationError(f"{root}: the manifest counts {counts} but the files hold {got}",
                              field="bundle")
    origin = manifest.get("origin")
    if not isinstance(origin, str) or not origin:
        raise ValidationError(f"{root}: manifest has no origin", field="bundle")
    return Bundle(root, origin, manifest, entries, causal, triples, vectors)
