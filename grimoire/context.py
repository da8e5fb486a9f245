"""The running state the facade's parts share: config, clock, embedder, stores, writer.

The ``Grimoire`` facade builds one ``Context`` and hands it to the modules
that implement each area of the API (ingest, knowledge, retrieval, feedback,
graph, curator). Those modules take a Context instead of the facade, so the
dependency arrow stays facade → areas → stores.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from grimoire.clock import Clock
from grimoire.config import Config
from grimoire.logs import EventLog
from grimoire.models.embedders import Embedder
from grimoire.runtime.writer import Writer
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.graph.store import GraphStore
from grimoire.stores.semantic.store import SemanticStore

__all__ = ["Context", "CuratorHook", "CycleHook", "DistillHook", "EpisodeWriter", "Lazy",
           "PostWriteHook"]

T = TypeVar("T")

#: After each durable episode append, on the writer thread: (ctx, episodes, vectors).
PostWriteHook = Callable[["Context", Sequence[Any], Any], None]
#: Distil one strategy ("" = global → None): (ctx, strategy, now) -> summary.
DistillHook = Callable[["Context", "str | None", int], Mapping[str, Any]]
#: One curator cycle: (ctx, now) -> summary.
CuratorHook = Callable[["Context", int], Mapping[str, Any]]
#: A step the curator cycle runs after its own phases: (ctx, now, cycle number) -> counts.
CycleHook = Callable[["Context", int, int], Mapping[str, Any]]
#: The API's episode write path: (ctx, params list) -> ids, once durable.
EpisodeWriter = Callable[["Context", Sequence[Mapping[str, Any]]], list[str]]


class Lazy(Generic[T]):
    """A value made on first use (once, whichever thread asks first), or given ready.

    A read-only open (an owner's ``grimoire status`` with no daemon) makes its episode
    store this way: opening LanceDB and loading the table costs seconds, and most owner
    views never read an episode."""

    def __init__(self, make: Callable[[], T] | None = None, *, value: T | None = None
                 ) -> None:
        if (make is None) == (value is None):
            raise TypeError("Lazy takes a maker or a value, one of them")
        self._make = make
        self._value = value
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    if self._error is not None:  # the prefetch failed: say why, here
                        error, self._error = self._error, None
                        raise error
                    assert self._make is not None
                    self._value = self._make()
                value = self._value
        return value

    def prefetch(self) -> None:
        """Start making the value on a thread of its own, so that the caller's other slow
        step (loading the embedding model) runs beside it; ``get`` waits for it and
        raises what it raised."""
        if self._value is not None or self._lock.locked():
            return

        def make() -> None:
            try:
                self.get()
            except BaseException as exc:  # handed to the next get()
                self._error = exc

        threading.Thread(target=make, name="grimoire-open", daemon=True).start()

    def peek(self) -> T | None:
        """The value if it was made, else None (nothing is made)."""
        return self._value


@dataclass
class Context:
    config: Config
    clock: Clock
    # The facade's read-only open loads the model on the first embed (factory.LazyEmbedder).
    embedder: Embedder
    data_dir: Path
    # The episode store, opened on first use (``episodes``); ``episode_store.peek()`` tells
    # whether it was.
    episode_store: Lazy[EpisodeStore]
    semantic: SemanticStore
    graph: GraphStore
    writer: Writer
    events: EventLog = field(default_factory=EventLog)
    # The episode write path's embedding stage, in front of the writer (methods.episode);
    # None: the writer embeds too.
    embed_stage: Writer | None = None
    started_monotonic: float = field(default_factory=time.monotonic)
    tick: int = 0
    # Per-strategy count of episodes written since that strategy was last distilled.
    since_distill: dict[str, int] = field(default_factory=dict)
    state_lock: threading.Lock = field(default_factory=threading.Lock)
    extras: dict[str, Any] = field(default_factory=dict)
    # Wired by the facade at open; the heartbeat and the write path call them.
    post_write_hooks: list[PostWriteHook] = field(default_factory=list)
    distill_hook: DistillHook | None = None
    curator_hook: CuratorHook | None = None
    # One bounded dream slot (curator.cycle.dream), when dreams.enabled: the daemon runs
    # one on its learning thread while the heartbeat is idle between ticks.
    dream_hook: CuratorHook | None = None
    # Steps the curator cycle runs after its phases, by name (the Clade exchange when
    # clade.uri is set): the parts above the curator that it must not import.
    cycle_hooks: list[tuple[str, CycleHook]] = field(default_factory=list)
    # The API's own episode write path (methods.episode.write_episodes), wired by the
    # facade, for the parts below the methods that write episodes (Reflexion's incidents).
    write_episodes: EpisodeWriter | None = None
    # Read-outs a part publishes for status's health metrics, by name (the curator fills
    # its own when it is installed, so the metrics never import the curator).
    stats: dict[str, Callable[..., Any]] = field(default_factory=dict)
    # Opened with Grimoire.open(read_only=True): the stores refuse writes, and work that
    # only writes on the side of a read (retrieve's log and mention indexing) is skipped.
    read_only: bool = False
    # The data directory's FEED.json as read at open (grimoire.stores.marker): simulated or
    # real memory; None when no daemon ever marked it.
    memory: dict[str, Any] | None = None

    @property
    def episodes(self) -> EpisodeStore:
        return self.episode_store.get()

    def newest_episode_time(self) -> int | None:
        """The newest stored episode's timestamp (None: no episode), without opening the
        episode store when it is not open yet (its journal keeps the figure)."""
        store = self.episode_store.peek()
        if store is None:
            known, newest = EpisodeStore.newest_on_disk(self.data_dir / "episodes")
            if known:
                return newest
            store = self.episodes
        found = store.recent(1)
        return found[0].timestamp if found else None

    def now(self) -> int:
        return int(self.clock())

    @property
    def simulated(self) -> bool:
        """The memory comes from the market simulator: its times are simulated time."""
        return self.memory is not None and self.memory.get("kind") == "simulated"
