"""A successor starts from a testament: ``grimoire run --inherit TESTAMENT`` (SPEC §13).

``inherit(ctx, path)`` verifies the whole testament (``bundle.read_bundle``: every file's
hash, every item's hash, the counts; then its lessons and ``testament.json``) and imports
it through the admission gate (``transfer.import_items``) into a data directory that has
no life of its own yet, at the predecessor's generation + 1:

- the warnings of its lessons (and the predecessor's own bloodstains) are **bloodstains**:
  provenance ``death_reflection``, flagged ``is_bloodstain`` (×3 slower decay, ×1.2
  retrieval, never pruned: seed 004);
- every other entry comes as ``predecessor`` knowledge, unflagged;
- both at the exporter's confidence × the provenance weight (0.6), as candidates tagged
  ``inherited``, with their claims, so the successor's own curator re-validates them on
  its own episodes; PLAYBOOK.md lists them apart ("Told or inherited") until an outcome
  confirms them, and an inherited heuristic is never promoted before a local validation;
- causal edges at weight 0.3 with one piece of evidence (seed 004); graph triples at
  their confidence × 0.6;
- each entry's source records the predecessor's generation.

Meta ``succession.generation`` becomes the predecessor's + 1 (``status`` shows it, and a
testament this agent writes carries it); ``succession.inherited`` records which testament
(the sha256 of its manifest), from whom and what came in. Inheriting the same testament
again (a restart with the same ``--inherit``) is a no-op; another testament, or a
directory that already has episodes of its own, is refused: a successor starts empty.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grimoire.context import Context
from grimoire.errors import ValidationError
from grimoire.portable.bundle import Bundle, read_bundle, read_items
from grimoire.portable.manifest import MANIFEST, sha256_file
from grimoire.portable.testament import GENERATION_KEY, LESSONS, TESTAMENT, generation
from grimoire.portable.transfer import import_items

__all__ = ["INHERITED_KEY", "Testament", "inherit", "lineage", "read_testament"]

INHERITED_KEY = "succession.inherited"
_STARTED_KEY = "succession.inheriting"


class Testament:
    """A verified testament: its bundle, lessons, generation and lifetime figures."""

    def __init__(self, path: Path, bundle: Bundle, lessons: list[dict[str, Any]],
                 body: dict[str, Any]) -> None:
        self.path = path
        self.bundle = bundle
        self.lessons = lessons
        self.body = body
        self.id = sha256_file(path / MANIFEST)
        gen = body.get("generation")
        if isinstance(gen, bool) or not isinstance(gen, int) or gen < 0:
            raise ValidationError(f"{path}: testament.json has no generation >= 0",
                                  field="bundle")
        self.generation = gen

    @property
    def lesson_warnings(self) -> set[str]:
        return {str(w) for lesson in self.lessons for w in lesson.get("warnings") or ()}


def read_testament(path: str | Path) -> Testament:
    """Verify and parse a testament; a plain export bundle is refused (import it instead)."""
    root = Path(path)
    bundle = read_bundle(root)
    if not isinstance(bundle.manifest.get("testament"), dict) \
            or not {LESSONS, TESTAMENT} <= set(bundle.manifest["files"]):
        raise ValidationError(f"{root} is a knowledge bundle, not a testament (no lessons): "
                              "import it with grimoire import", field="bundle")
    lessons = read_items(root / LESSONS)
    try:
        body = json.loads((root / TESTAMENT).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{root}: testament.json is not JSON: {exc}",
                              field="bundle") from None
    if not isinstance(body, dict):
        raise ValidationError(f"{root}: testament.json must hold an object", field="bundle")
    return Testament(root, bundle, lessons, body)


def lineage(ctx: Context) -> dict[str, Any]:
    """This agent's generation and, for a successor, what it inherited (for ``status``)."""
    return {"generation": generation(ctx),
            "inherited": ctx.semantic.get_meta(INHERITED_KEY, None)}


def _set_meta(ctx: Context, values: dict[str, Any]) -> None:
    def job() -> None:
        with ctx.semantic.transaction():
            for key, value in values.items():
                ctx.semantic.set_meta(key, value)

    ctx.writer.call(job)


def inherit(ctx: Context, path: str | Path) -> dict[str, Any]:
    """Start this (empty) agent from the testament at ``path``; see the module doc."""
    t = read_testament(path)
    done = ctx.semantic.get_meta(INHERITED_KEY, None)
    if isinstance(done, dict):
        if done.get("testament") == t.id:
            return {**done, "generation": t.generation + 1, "already_inherited": True}
        raise ValidationError(f"{ctx.data_dir} already inherited from {done.get('origin')} "
                              f"(generation {done.get('predecessor_generation')}): one "
                              "predecessor per agent", field="inherit")
    started = ctx.semantic.get_meta(_STARTED_KEY, None)
    if started != t.id:
        own = ctx.episodes.count()
        if own:
            raise ValidationError(f"{ctx.data_dir} already has {own} episodes of its own: a "
                                  "successor starts from an empty data directory",
                                  field="inherit")
        _set_meta(ctx, {_STARTED_KEY: t.id})  # a crash from here on resumes, idempotently
    origin = t.bundle.origin
    lesson_warnings = t.lesson_warnings
    stained: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []
    for item in t.bundle.entries:
        blood = item.get("category") == "warning" and (
            str(item.get("source_id")) in lesson_warnings or bool(item.get("is_bloodstain")))
        (stained if blood else plain).append({**item, "is_bloodstain": blood})
    source = str(t.path)
    blood = import_items(ctx, entries=stained, provenance="death_reflection", origin=origin,
                         source=source, generation=t.generation)
    # All entries again, so causal links between a bloodstain and another entry resolve;
    # the bloodstains are already recorded and are skipped.
    rest = import_items(ctx, entries=[*stained, *plain], causal=t.bundle.causal,
                        triples=t.bundle.triples, provenance="predecessor", origin=origin,
                        source=source, generation=t.generation)
    rest["entries"]["already_imported"] -= len(stained)
    record = {
        "testament": t.id, "origin": origin, "predecessor_generation": t.generation,
        "died_at": t.body.get("died_at"), "inherited_at": ctx.now(),
        "bloodstains": blood["entries"], "entries": rest["entries"],
        "causal": rest["causal"], "triples": rest["triples"], "lessons": len(t.lessons),
        "figures": t.body.get("figures", {}),
    }
    _set_meta(ctx, {GENERATION_KEY: t.generation + 1, INHERITED_KEY: record})
    ctx.events.emit("Inherited", ctx.now(), origin=origin, generation=t.generation + 1,
                    bloodstains=blood["entries"], entries=rest["entries"])
    return {**record, "generation": t.generation + 1}
