"""grimoire reembed: a copy of a store whose every vector comes from another model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grimoire.errors import EmbeddingMismatchError, ValidationError
from grimoire.models.embedders import HashEmbedder
from grimoire.portable.reembed import reembed
from tests.retrieval.retrieve_support import ids, open_grimoire, put_entry


def test_reembed_moves_every_vector_and_keeps_everything_else(tmp_path: Path) -> None:
    old, new = HashEmbedder(), HashEmbedder(model_id="hash-384-other")
    with open_grimoire(tmp_path / "d", embedder=old) as g:
        q = g.episode_write(text="did you go to the jazz concert?", thread="s1")["id"]
        a = g.episode_write(text="yes, last Saturday", thread="s1", actor="Mel")["id"]
        g.episode_write(text="unrelated chatter", thread="s2")
        entry = put_entry(g, "jazz concerts sell out early")
        config = g.context.config
    done = reembed(tmp_path / "d", tmp_path / "out", new, config)
    assert (done["episodes"], done["entries"]) == (3, 1)
    assert done["from_model"] == "hash-384" and done["to_model"] == "hash-384-other"
    with pytest.raises(EmbeddingMismatchError):
        open_grimoire(tmp_path / "out", embedder=old).close()
    with open_grimoire(tmp_path / "out", embedder=new) as g:
        store = g.context.episodes
        assert g.episode_get(a)["actor"] == "Mel"  # same ids and fields
        vector = store.vectors_for([a])[0]  # embedded as the writer does: with its context
        want = new.embed(["yes, last Saturday\ndid you go to the jazz concert?"])[0]
        # held as int8 in memory: within a quantisation step (max |x| / 127)
        assert np.allclose(vector, want, atol=float(np.abs(want).max()) / 127)
        found = ids(g.retrieve(query="jazz concert", kinds=["episode", "entry"], k=5,
                               mode="browse"))
        assert q in found and entry.id in found
    with open_grimoire(tmp_path / "d", embedder=old) as g:  # the source is untouched
        assert g.context.episodes.count() == 3
    with pytest.raises(ValidationError, match="exists"):
        reembed(tmp_path / "d", tmp_path / "out", new, config)
    with pytest.raises(ValidationError, match="dimension"):
        reembed(tmp_path / "d", tmp_path / "out2", HashEmbedder(dim=8), config)
