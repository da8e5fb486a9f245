"""``thread`` and ``actor``: returned by retrieve and filterable (API.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire.errors import ValidationError
from tests.retrieval.retrieve_support import ids, open_grimoire


def test_retrieve_returns_and_filters_thread_and_actor(tmp_path: Path) -> None:
    with open_grimoire(tmp_path / "d") as g:
        a = g.episode_write(text="we hiked the ridge trail", thread="s1", actor="Mel")["id"]
        b = g.episode_write(text="the ridge trail was muddy", thread="s2", actor="Caroline")["id"]
        c = g.episode_write(text="ridge trail again next week", thread="s2", actor="Mel")["id"]
        everything = g.retrieve(query="ridge trail", mode="browse")
        assert set(ids(everything)) == {a, b, c}
        by_id = {i["id"]: i for i in everything["items"]}
        assert (by_id[b]["thread"], by_id[b]["actor"]) == ("s2", "Caroline")
        assert ids(g.retrieve(query="ridge trail", mode="browse", thread="s2")) in (
            [b, c], [c, b])
        assert ids(g.retrieve(query="ridge trail", mode="browse", actor="Mel",
                              thread="s2")) == [c]
        assert ids(g.retrieve(query="ridge trail", mode="browse", thread="none")) == []
        assert g.episode_get(a)["thread"] == "s1"
        with pytest.raises(ValidationError, match="thread"):
            g.retrieve(query="ridge trail", thread="")
