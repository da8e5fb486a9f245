"""Neighbour context for embedding: a turn is embedded with a little of the turn before it.

In a conversation a turn often means something only beside the one before it ("Yes, last
Saturday!" answers "When did you go to the concert?"). The episode's stored text and its
BM25 index are unchanged; only the vector that represents it is computed from
``"<text>\\n<previous turn's text, at most retrieval.neighbour_context_chars>"`` (its own
text first, so a model's token limit cuts the context, never the turn).

The previous turn is the episode just before it in the same ``thread``: earlier in the
same batch, else the last one written to that thread by this process (kept per thread in
the context), else looked up among the store's newest episodes. Episodes without a thread
are embedded as they are. No LLM; deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

from grimoire.context import Context
from grimoire.records import Episode

__all__ = ["embedding_texts"]

_LAST = "thread_context.last"  # ctx.extras: thread → the last written turn's text
_MAX_THREADS = 10_000
_LOOKBACK = 256  # newest episodes searched for a thread's previous turn after a restart


def _previous_from_store(ctx: Context, thread: str) -> str | None:
    for episode in reversed(ctx.episodes.recent(_LOOKBACK)):
        if episode.thread == thread:
            return episode.text
    return None


def embedding_texts(ctx: Context, episodes: Sequence[Episode]) -> list[str]:
    """The text to embed for each episode (writer thread; updates the per-thread memory)."""
    chars = ctx.config.retrieval.neighbour_context_chars
    last: dict[str, str] = ctx.extras.setdefault(_LAST, {})
    out: list[str] = []
    for episode in episodes:
        thread = episode.thread
        if thread is None or chars <= 0:
            out.append(episode.text)
            continue
        previous = last.get(thread)
        if previous is None:
            previous = _previous_from_store(ctx, thread)
        out.append(episode.text if not previous
                   else f"{episode.text}\n{previous[:chars]}")
        if len(last) >= _MAX_THREADS and thread not in last:
            last.clear()
        last[thread] = episode.text
    return out
