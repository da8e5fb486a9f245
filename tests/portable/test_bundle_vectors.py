"""A bundle carries its causal links' episode vectors; an import with the same model writes
those episodes with them instead of embedding them again, and a changed vector is refused.

Real stores and the hash embedder (deterministic: a re-embedded text gives its vector
back); ``Counting`` only counts the texts the importer embeds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from grimoire import Grimoire
from grimoire.errors import ValidationError
from grimoire.models.embedders import HashEmbedder, Vectors
from grimoire.portable.bundle import export_bundle, item_hash
from grimoire.portable.manifest import file_table
from grimoire.portable.session import import_bundle
from grimoire.portable.vectors import FILE, SAMPLE, text_key
from tests.service.test_cli_errors import cli

EVENTS = ["gas jumped to {} gwei during the NFT mint", "the ETH/USDC swap lost {}% to fees",
          "a whale moved {}k ETH to an exchange", "the pool's price fell {}% in a minute"]
PLAIN = [event.format(n) for n in (3, 7, 11) for event in EVENTS]  # more than SAMPLE
FIRST = "the bot's first try reverted"
THREADED = "the bot's second retry also reverted"
WARNING = "Avoid swaps when gas is above 80 gwei because fees eat the whole gain"


class Counting(HashEmbedder):
    """The hash embedder, counting every text it is asked to embed."""

    def __init__(self, model_id: str | None = None) -> None:
        super().__init__(dim=384, model_id=model_id)
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Vectors:
        self.texts.extend(texts)
        return super().embed(texts)


def _bundle(tmp_path: Path) -> Path:
    with Grimoire.open(tmp_path / "a", embedder=HashEmbedder()) as g:
        ids = [g.episode_write(text=t)["id"] for t in PLAIN]
        first = g.episode_write(text=FIRST, thread="bot-1")["id"]
        threaded = g.episode_write(text=THREADED, thread="bot-1")["id"]
        assert g.entry_add(category="warning", content=WARNING)["decision"] == "admitted"
        for cause, effect in zip(ids[::2], ids[1::2], strict=True):
            g.causal_link(cause_id=cause, effect_id=effect, weight=0.9)
        g.causal_link(cause_id=first, effect_id=threaded, weight=0.7)
        export_bundle(g.context, tmp_path / "bundle")
    return tmp_path / "bundle"


def _lines(bundle: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (bundle / FILE).read_text().splitlines()]


def _rewrite(bundle: Path, lines: list[dict[str, object]]) -> None:
    """What a forger does: change lines, their item hashes and the manifest's checksums."""
    for line in lines:
        line["hash"] = item_hash(line)
    (bundle / FILE).write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"] = file_table(bundle)
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def test_export_carries_the_vectors_of_unthreaded_episodes(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["vectors"] == {"file": FILE, "embedding_model": "hash-384",
                                   "embedding_dim": 384, "count": len(PLAIN) + 1}
    lines = _lines(bundle)
    keys = {line["text_sha256"] for line in lines}
    # the plain texts and the entry's sentence; not a thread's episodes (a vector there may
    # also embed the thread's previous words)
    assert keys == {text_key(t) for t in [*PLAIN, WARNING]}
    one = next(x for x in lines if x["text_sha256"] == text_key(PLAIN[0]))
    codes = np.frombuffer(base64.b64decode(str(one["codes"])), np.int8)
    vector = codes.astype(np.float32) * float(str(one["scale"]))
    assert float(vector @ HashEmbedder().embed([PLAIN[0]])[0]) > 0.999


def test_import_writes_carried_vectors_without_embedding_them(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    embedder = Counting()
    with Grimoire.open(tmp_path / "b", embedder=embedder) as g:
        embedder.texts.clear()
        got = import_bundle(g.context, str(bundle), "predecessor")
        assert got["causal"]["added"] >= 7  # with the links the source made by itself
        ctx = g.context
        # the sample check embeds a few carried texts; the episodes themselves are not
        # embedded, except the threaded ones the bundle could not carry
        sampled = [t for t in embedder.texts if t in [*PLAIN, WARNING]]
        assert len(sampled) == len(set(sampled)) == SAMPLE < len(PLAIN)
        assert embedder.texts.count(THREADED) == embedder.texts.count(FIRST) == 1
        # nothing else: neither the carried episodes nor the entry given to the gate
        assert len(embedder.texts) == SAMPLE + 2
        assert got["entries"]["admitted"] == 1
        ids = {e.text: e.id for e in ctx.episodes.recent(100)}
        assert set(PLAIN) | {THREADED} <= set(ids)
        here = ctx.episodes.vectors_for([ids[t] for t in PLAIN])
        assert np.allclose(here, HashEmbedder().embed(PLAIN), atol=0.02)
        hits = g.retrieve(query=PLAIN[2], k=3)["items"]
        assert any(PLAIN[2] == item.get("content") for item in hits)


def test_another_model_embeds_every_episode(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    embedder = Counting(model_id="another-model-384")
    with Grimoire.open(tmp_path / "b", embedder=embedder) as g:
        embedder.texts.clear()
        import_bundle(g.context, str(bundle), "predecessor")
    assert all(embedder.texts.count(t) == 1 for t in PLAIN)


def test_a_changed_vector_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    lines = _lines(bundle)
    # changed without its checksums: the manifest refuses the whole bundle
    raw = (bundle / FILE).read_text()
    (bundle / FILE).write_text(raw.replace(str(lines[0]["codes"])[:8], "////////", 1))
    with Grimoire.open(tmp_path / "b", embedder=HashEmbedder()) as g:
        with pytest.raises(ValidationError, match=r"sha256 differs|bytes"):
            import_bundle(g.context, str(bundle), "predecessor")
        assert g.context.episodes.count() == 0
    (bundle / FILE).write_text(raw)
    # a forger who rewrites the checksums too: each vector shifted to another text
    codes = [line["codes"] for line in lines]
    scales = [line["scale"] for line in lines]
    for i, line in enumerate(lines):
        line["codes"], line["scale"] = codes[i - 1], scales[i - 1]
    _rewrite(bundle, lines)
    with Grimoire.open(tmp_path / "c", embedder=HashEmbedder()) as g:
        with pytest.raises(ValidationError, match="not what hash-384 makes of its words"):
            import_bundle(g.context, str(bundle), "predecessor")
        assert g.context.episodes.count() == 0
        assert g.entry_list(limit=10)["entries"] == []
    # through the installed command: refused, and no data directory is created
    fresh = tmp_path / "fresh"
    proc = cli("import", str(bundle), "--provenance", "predecessor", "--data", str(fresh))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "not what hash-384 makes of its words" in proc.stderr
    assert "Traceback" not in proc.stderr and not fresh.exists()


def test_a_vector_for_no_text_of_the_bundle_is_refused(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    lines = _lines(bundle)
    lines[0]["text_sha256"] = hashlib.sha256(os.urandom(8)).hexdigest()
    _rewrite(bundle, lines)
    with Grimoire.open(tmp_path / "b", embedder=HashEmbedder()) as g, \
            pytest.raises(ValidationError, match="names no text of the bundle"):
        import_bundle(g.context, str(bundle), "predecessor")
