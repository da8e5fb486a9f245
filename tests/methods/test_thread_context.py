"""Neighbour context: a turn is embedded with the previous turn of its thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grimoire.models.embedders import HashEmbedder
from tests.retrieval.retrieve_support import ids, open_grimoire

QUESTION = "Did you go to the zanzibar jazz concert?"
ANSWER = "Yes, last Saturday, it was wonderful!"


def _vector(g: object, episode_id: str) -> np.ndarray:
    store = g.context.episodes  # type: ignore[attr-defined]
    return np.asarray(store.vectors_for([episode_id])[0])


def _same(held: np.ndarray, want: np.ndarray) -> bool:
    """The store holds int8 vectors: within a quantisation step (max |x| / 127)."""
    return bool(np.allclose(held, want, atol=float(np.abs(want).max()) / 127))


def test_a_turn_is_embedded_with_its_predecessor_in_the_thread(tmp_path: Path) -> None:
    emb = HashEmbedder()
    with open_grimoire(tmp_path / "d") as g:
        q = g.episode_write(text=QUESTION, thread="s1", actor="Mel")["id"]
        other = g.episode_write(text="unrelated chatter", thread="s2")["id"]
        a = g.episode_write(text=ANSWER, thread="s1", actor="Caroline")["id"]
        alone = g.episode_write(text=ANSWER)["id"]  # no thread: its own text only
        assert _same(_vector(g, a), emb.embed([f"{ANSWER}\n{QUESTION}"])[0])
        assert _same(_vector(g, q), emb.embed([QUESTION])[0])
        assert _same(_vector(g, other), emb.embed(["unrelated chatter"])[0])
        assert _same(_vector(g, alone), emb.embed([ANSWER])[0])
        assert g.episode_get(a)["text"] == ANSWER  # the stored text is unchanged


def test_the_context_survives_a_restart(tmp_path: Path) -> None:
    """After a reopen the previous turn is found in the store, not in process memory."""
    emb = HashEmbedder()
    with open_grimoire(tmp_path / "d") as g:
        g.episode_write(text=QUESTION, thread="s1")
    with open_grimoire(tmp_path / "d") as g:
        a = g.episode_write(text=ANSWER, thread="s1")["id"]
        assert _same(_vector(g, a), emb.embed([f"{ANSWER}\n{QUESTION}"])[0])


def _answer_found(tmp_path: Path, chars: int) -> bool:
    with open_grimoire(tmp_path, **{"retrieval.neighbour_context_chars": chars}) as g:
        for i in range(60):
            g.episode_write(text=f"note {i}: the weather was fine and we talked", thread="x")
        g.episode_write(text=QUESTION, thread="s1")
        a = g.episode_write(text=ANSWER, thread="s1")["id"]
        found = ids(g.retrieve(query="zanzibar jazz concert", kinds=["episode"], k=5,
                               mode="browse"))
        return a in found


def test_only_the_context_finds_the_answer_turn(tmp_path: Path) -> None:
    """"Yes, last Saturday" shares no word with the query: only its context brings it in."""
    assert _answer_found(tmp_path / "on", 200)
    assert not _answer_found(tmp_path / "off", 0)
