"""The Grimoire facade: owns the stores and is what the server, the CLI and tests call.

One method per API.md method (``episode.write`` → ``episode_write``). Each
method is thin: it delegates to the module that owns that area (ingest,
knowledge, retrieval, feedback, graph, causal, curator), passing the shared
``Context``. Mutations run on the single writer thread; reads run on the
caller's thread.

Only one process may open a data directory for writing at a time (an
``flock`` on ``<data_dir>/LOCK``): a second daemon or a CLI that opened the
stores directly would otherwise be a second writer. ``read_only=True`` opens
take no lock and open every store read-only, so any number of them run beside
the writer (the daemon) or without one; see ``Grimoire.open``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from grimoire import __version__
from grimoire.clock import Clock, SystemClock
from grimoire.config import Config
from grimoire.context import Context, Lazy
from grimoire.errors import ConfigError, GrimoireError, NotAvailableError, StoreError
from grimoire.logs import EventLog, get_logger
from grimoire.models.embedders import Embedder
from grimoire.models.factory import LazyEmbedder, make_embedder
from grimoire.models.llm import LLM
from grimoire.runtime.memory import release_free_memory
from grimoire.runtime.writer import Writer
from grimoire.scopes.registry import close_scopes
from grimoire.scopes.route import scoped
from grimoire.stores.episodes.store import EpisodeStore
from grimoire.stores.graph.store import GraphStore
from grimoire.stores.marker import read_marker
from grimoire.stores.redo import attach as attach_redo
from grimoire.stores.redo import fresh_stores
from grimoire.stores.semantic.store import SemanticStore

__all__ = ["Grimoire", "ReadOnlyWriter", "embedder_for", "make_data_dir"]

log = get_logger(__name__)


def make_data_dir(data_dir: Path) -> None:
    """Create the data directory (owner-only) or say, naming it, why it cannot be used."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise ConfigError(f"data directory {data_dir} is a file, not a directory: choose "
                          "another one (--data DIR)") from None
    except NotADirectoryError:
        raise ConfigError(f"data directory {data_dir} cannot be created: part of its path is "
                          "a file; choose another one (--data DIR)") from None
    except OSError as exc:
        raise ConfigError(f"data directory {data_dir} cannot be created ({exc.strerror}); "
                          "choose a directory you can write (--data DIR)") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"data directory {data_dir} is not writable by this user "
                          f"(uid {os.getuid()}): fix its owner and permissions, or choose "
                          "another one (--data DIR)")


def embedder_for(config: Config) -> Embedder:
    """The embedding model the configuration names (loaded: its dimension is checked)."""
    e = config.embedding
    return make_embedder(e.model, e.model_dir, e.dim, e.threads, e.batch_size, e.max_tokens)


def _lock_data_dir(data_dir: Path) -> IO[str]:
    try:
        handle = open(data_dir / "LOCK", "a+", encoding="utf-8")  # noqa: SIM115 - held open
    except OSError as exc:
        raise ConfigError(f"data directory {data_dir} is not writable ({exc.strerror}): "
                          "choose a directory you can write (--data DIR), or fix its "
                          "owner and permissions") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        who = f"process {holder}" if holder.isdigit() else "another Grimoire process"
        raise StoreError(
            f"{data_dir} is in use by {who} (a running daemon?); talk to it over its "
            "socket (grimoire call …) or stop it first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


class ReadOnlyWriter(Writer):
    """The writer of a read-only Grimoire: no thread, and every job refused.

    Write paths that reach the writer without passing the facade's own check (a
    method's side write) get NotAvailableError naming what was asked."""

    def __init__(self) -> None:  # no queue, no thread: nothing may be written
        self.jobs_done = 0
        self.batches_done = 0

    def _refuse(self, what: str) -> NotAvailableError:
        return NotAvailableError(f"{what}: this Grimoire was opened read-only; writes go "
                                 "through the daemon (grimoire call …) or a writable open")

    def call(self, fn: Any) -> Any:
        raise self._refuse(getattr(fn, "__qualname__", "a write"))

    def call_batched(self, batch_key: str, payload: Any, handler: Any, *,
                     weight: int = 1) -> Any:
        raise self._refuse(batch_key)

    def on_writer_thread(self) -> bool:
        return False

    def qsize(self) -> int:
        return 0

    def stop(self, timeout: float = 30.0) -> bool:
        return True


def _wire(ctx: Context) -> None:
    """Connect the areas that react to writes and ticks (post-write hooks, distiller, curator).

    The curator is reached through its one entry point, ``curator.api``."""
    from curator import api as curator_api
    from grimoire.methods.causal import link_new_episodes
    from grimoire.methods.episode import count_for_distillation, write_episodes
    from grimoire.methods.health import register_health_metrics
    from grimoire.retrieval.stages.mentions import record_episode_mentions
    from grimoire.retrieval.stages.terms import observe_episode_terms

    ctx.write_episodes = write_episodes
    ctx.post_write_hooks.append(count_for_distillation)
    # Retrieval's write-time work: entity mentions (graph backend), causal hints and
    # regime-shift auto-links, and the word sample that keeps BM25 selective.
    ctx.post_write_hooks.append(record_episode_mentions)
    ctx.post_write_hooks.append(link_new_episodes)
    ctx.post_write_hooks.append(observe_episode_terms)
    register_health_metrics()
    # Learning: Reflexion on each action (after the hooks above), the distiller on the
    # heartbeat, the optional LLM paths, the curator cycle, and the curator's read-outs.
    curator_api.install(ctx)
    if ctx.config.clade.uri and not ctx.read_only:
        # The Clade by itself: each curator cycle exchanges with the shared table.
        from grimoire.portable.clade import exchange

        ctx.cycle_hooks.append(("clade", exchange))


class Grimoire:
    """The agent's memory. Open with ``Grimoire.open(data_dir)``; use as a context manager."""

    def __init__(self, ctx: Context, lock_handle: IO[str] | None,
                 read_only: bool = False) -> None:
        self._ctx = ctx
        self._lock = lock_handle
        self._closed = False
        self.read_only = read_only

    def _writable(self, method: str) -> None:
        if self.read_only:
            raise NotAvailableError(f"{method}: this Grimoire was opened read-only")

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: str | Path | None = None,
        config: Config | None = None,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
        *,
        read_only: bool = False,
    ) -> Grimoire:
        """Open (creating if needed) the data directory's stores.

        ``read_only=True`` is for inspection (the CLI's reads, ``grimoire report`` and
        ``export``, the MCP server's read tools, an owner's script), beside a running
        daemon or with none: the directory must already hold a Grimoire; no lock is
        taken (the daemon keeps its own) and nothing in the directory is created or
        changed; every method that changes memory raises ``NotAvailableError``, and
        ``retrieve`` skips its side writes (the retrieval log, access counts, mention
        indexing). What it sees: the episodes as of the open (a snapshot: reopen to see
        newer ones); entries, logs, causal edges, meta and the knowledge graph live
        (each read sees the daemon's last commit); PLAYBOOK.md as last written.
        """
        config = config or Config()
        if data_dir is not None:
            config = config.replace(data_dir=str(data_dir))
        root = Path(config.data_dir)
        clock = clock or SystemClock()
        if read_only:
            return cls._open_read_only(root, config, clock, embedder)
        # The model first: a setting it refuses (embedding.dim, a model that cannot load)
        # must leave no directory behind; then the directory, its lock, the stores.
        emb = embedder or embedder_for(config)
        make_data_dir(root)
        memory = read_marker(root)  # simulated or real (a damaged marker: a clear error)
        lock = _lock_data_dir(root)
        opened: list[Any] = []
        fresh = fresh_stores(root)  # a store made now: its redo log covers all of it
        try:
            episodes = EpisodeStore.open(
                root / "episodes", model_id=emb.model_id, dim=emb.dim,
                config=config.episodes, clock=clock,
            )
            opened.append(episodes)
            semantic = SemanticStore.open(
                root / "semantic.sqlite", model_id=emb.model_id, dim=emb.dim, clock=clock
            )
            opened.append(semantic)
            graph = GraphStore.open(root / "graph.lmdb", clock=clock)
            opened.append(graph)
            # The second copy of each write until a backup covers it (stores.redo).
            redo = attach_redo(root, semantic._db, graph._env, fresh)
        except BaseException:
            for store in reversed(opened):
                store.close()
            lock.close()
            raise
        ctx = Context(
            config=config, clock=clock, embedder=emb, data_dir=root,
            episode_store=Lazy(value=episodes),
            semantic=semantic, graph=graph, writer=Writer(max_queue=config.daemon.write_queue),
            events=EventLog(),
            embed_stage=Writer(max_queue=config.daemon.write_queue, linger_fraction=0.0,
                             name="grimoire-embed"),
        )
        ctx.tick = int(semantic.get_meta("tick", 0))
        ctx.memory = memory
        ctx.extras["stores.redo"] = redo
        if llm is not None:
            ctx.extras["llm"] = llm
        _wire(ctx)
        release_free_memory()  # the index rebuild's scan of the episode table is freed now
        from grimoire.forget import resume_pending

        opened_g = cls(ctx, lock, read_only)
        try:
            resume_pending(ctx)  # a forget a crash interrupted is finished before any read
        except BaseException:
            opened_g.close()
            raise
        log.info("grimoire.open", data_dir=str(root), model=emb.model_id, dim=emb.dim,
                 episodes=episodes.count(), tick=ctx.tick)
        return opened_g

    @classmethod
    def _open_read_only(cls, root: Path, config: Config, clock: Clock,
                        embedder: Embedder | None) -> Grimoire:
        """Open only what answers cheaply: the semantic store and the graph now; the
        episode store (LanceDB's import and the table's load: seconds) on the first read
        of an episode, and the embedding model on the first embedding. An owner's
        ``entry list``, ``playbook`` or ``explain`` without a daemon pays for neither."""
        if not (root / "semantic.sqlite").is_file():
            raise StoreError(f"no Grimoire data in {root}: nothing to read (check --data DIR)")
        memory = read_marker(root)
        emb = embedder or LazyEmbedder(
            config.embedding.model, config.embedding.model_dir, config.embedding.dim,
            config.embedding.threads, config.embedding.batch_size,
            config.embedding.max_tokens,
        )
        opened: list[Any] = []
        try:
            # The semantic store first: its checks (schema, embedding model) are the
            # cheapest and say the most; then the graph. The episodes' identity is checked
            # when they are opened.
            semantic = SemanticStore.open(root / "semantic.sqlite", model_id=emb.model_id,
                                          dim=emb.dim, clock=clock, read_only=True)
            opened.append(semantic)
            graph = GraphStore.open(root / "graph.lmdb", clock=clock, read_only=True)
            opened.append(graph)
        except BaseException:
            for store in reversed(opened):
                store.close()
            raise

        def open_episodes() -> EpisodeStore:
            return EpisodeStore.open(root / "episodes", model_id=emb.model_id, dim=emb.dim,
                                     config=config.episodes, clock=clock, read_only=True)

        ctx = Context(
            config=config, clock=clock, embedder=emb, data_dir=root,
            episode_store=Lazy(open_episodes), semantic=semantic, graph=graph,
            writer=ReadOnlyWriter(), events=EventLog(), read_only=True,
        )
        ctx.tick = int(semantic.get_meta("tick", 0))
        ctx.memory = memory
        _wire(ctx)
        log.info("grimoire.open", data_dir=str(root), model=emb.model_id, dim=emb.dim,
                 tick=ctx.tick, read_only=True)
        return cls(ctx, None, read_only=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ctx = self._ctx
        scope_errors = close_scopes(ctx)  # the other scopes' Grimoires first (scopes/)
        from grimoire.retrieval.stages.sources import settle_reads
        from grimoire.retrieval.stages.writes import drain

        try:  # retrieval log writes wait a few ms before queueing: land them first
            drain(ctx, timeout_s=10.0)
        except GrimoireError as exc:
            log.warning("grimoire.close.retrieval_logs_pending", error=str(exc))
        if not settle_reads(ctx, timeout_s=10.0):  # a backend a caller did not wait for
            log.warning("grimoire.close.retrieval_reads_pending")
        if ctx.embed_stage is not None:
            ctx.embed_stage.stop()  # what it accepted goes on to the writer before that stops
        ctx.writer.stop()
        from grimoire.methods import status_cache

        figures = None if self.read_only else status_cache.take_at_close(ctx)
        errors: list[BaseException] = scope_errors
        for store in (ctx.episode_store.peek(), ctx.semantic, ctx.graph):
            if store is None:  # a read-only open that never read an episode
                continue
            try:
                store.close()
            except GrimoireError as exc:  # keep closing the others; report after
                errors.append(exc)
            if store is ctx.episode_store.peek() and figures is not None and not errors:
                status_cache.keep_at_close(ctx, figures)
        if self._lock is not None:
            self._lock.close()
        log.info("grimoire.close", data_dir=str(ctx.data_dir))
        if errors:
            raise errors[0]

    def __enter__(self) -> Grimoire:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def context(self) -> Context:
        return self._ctx

    @property
    def events(self) -> EventLog:
        return self._ctx.events

    # -- health and status ----------------------------------------------------------------

    @scoped
    def health(self, *, scope: str | None = None) -> dict[str, Any]:
        import time

        return {
            "ok": True,
            "version": __version__,
            "tick": self._ctx.tick,
            "uptime_s": round(time.monotonic() - self._ctx.started_monotonic, 3),
        }

    @scoped
    def status(self, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.status import status

        return status(self._ctx)

    # -- episodes -------------------------------------------------------------------------

    @scoped
    def episode_write(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        self._writable("episode.write")
        from grimoire.methods.episode import write_episodes

        return {"id": write_episodes(self._ctx, [params])[0]}

    @scoped
    def episode_write_batch(self, episodes: Sequence[Mapping[str, Any]], *,
                            scope: str | None = None) -> dict[str, Any]:
        self._writable("episode.write_batch")
        from grimoire.methods.episode import write_episodes

        return {"ids": write_episodes(self._ctx, episodes, atomic=True)}

    @scoped
    def episode_get(self, id: str, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.episode import get_episode

        return get_episode(self._ctx, id)

    # -- entries --------------------------------------------------------------------------

    @scoped
    def entry_add(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        self._writable("entry.add")
        from grimoire.methods.entry import add_entry

        return add_entry(self._ctx, params)

    @scoped
    def entry_get(self, id: str, *, scope: str | None = None) -> dict[str, Any]:
        """One entry by its id or a unique prefix of it (PLAYBOOK.md's short ids)."""
        from curator.api import resolve_entry
        from grimoire.methods.entry import get_entry

        return get_entry(self._ctx, resolve_entry(self._ctx, id).id)

    @scoped
    def entry_list(self, category: str | None = None, status: str | None = None,
                   strategy: str | None = None, limit: int = 100,
                   kind: str = "knowledge", *, scope: str | None = None) -> dict[str, Any]:
        """Entries; the curator's L1/L2 summaries only when asked for (``kind``)."""
        from grimoire.methods.entry import list_entries

        return list_entries(self._ctx, category=category, status=status, strategy=strategy,
                            limit=limit, kind=kind)

    @scoped
    def entry_explain(self, id: str, *, scope: str | None = None) -> dict[str, Any]:
        from curator.api import explain_entry

        return explain_entry(self._ctx, id)

    # -- retrieval and feedback -----------------------------------------------------------

    @scoped
    def retrieve(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        """``retrieve``; with ``situation`` (the fields of an action episode) the rules that
        apply to it come first (``rules_applicable``), and without ``query`` the situation
        in words is the query."""
        from grimoire.retrieval.pipeline import retrieve

        if self.read_only:  # open the episodes beside the model's load (both take seconds)
            self._ctx.episode_store.prefetch()
        from grimoire.methods.advise import advice_for, covering
        from grimoire.methods.entry import add_short_ids

        def coverage(entries: Collection[str], episodes: Sequence[str]
                     ) -> dict[str, list[str]]:
            return covering(self._ctx, entries, episodes)

        if params.get("situation") is None:
            params.pop("situation", None)
            result = retrieve(self._ctx, params, coverage=coverage)
        else:
            advice, params = advice_for(self._ctx, params)
            result = retrieve(self._ctx, params, advice, coverage)
        add_short_ids(self._ctx, result.get("items") or [])
        return result

    @scoped
    def rules_applicable(self, situation: Any, categories: Any = None, limit: Any = 10,
                         may_apply: Any = True, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.advise import rules_applicable
        from grimoire.methods.entry import add_short_ids

        result = rules_applicable(self._ctx, situation, categories=categories, limit=limit,
                                  may_apply=may_apply)
        places = result.get("rules") or []
        add_short_ids(self._ctx, [r for p in places for r in (p, *p.get("also", ()))], kind=None)
        return result

    @scoped
    def outcome_report(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        self._writable("outcome.report")
        from grimoire.methods.outcome import outcome_report

        return outcome_report(self._ctx, params)

    # -- knowledge graph ------------------------------------------------------------------

    @scoped
    def kg_assert(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        self._writable("kg.assert")
        from grimoire.methods.kg import kg_assert

        return kg_assert(self._ctx, params)

    @scoped
    def kg_invalidate(self, id: str, at: int, *, scope: str | None = None) -> dict[str, Any]:
        self._writable("kg.invalidate")
        from grimoire.methods.kg import kg_invalidate

        return kg_invalidate(self._ctx, id, at)

    @scoped
    def kg_at(self, subject: Any, block: int, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.kg import kg_at

        return kg_at(self._ctx, subject, block)

    @scoped
    def kg_known_at(self, subject: Any, time: int, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.kg import kg_known_at

        return kg_known_at(self._ctx, subject, time)

    @scoped
    def kg_neighbors(self, subject: Any, block: int, max_hops: int = 3,
                     direction: str = "out", *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.kg import kg_neighbors

        return kg_neighbors(self._ctx, subject, block, max_hops, direction)

    # -- causality ------------------------------------------------------------------------

    @scoped
    def causal_link(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        self._writable("causal.link")
        from grimoire.methods.causal import causal_link

        return causal_link(self._ctx, params)

    @scoped
    def causal_chain(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        from grimoire.methods.causal import causal_chain

        return causal_chain(self._ctx, params)

    @scoped
    def causal_consequences(self, *, scope: str | None = None, **params: Any) -> dict[str, Any]:
        from grimoire.methods.causal import causal_consequences

        return causal_consequences(self._ctx, params)

    # -- curator, playbook, heartbeat -----------------------------------------------------

    @scoped
    def playbook_get(self, *, scope: str | None = None) -> dict[str, Any]:
        from grimoire.methods.playbook import playbook_get

        return playbook_get(self._ctx)

    @scoped
    def curator_run(self, *, scope: str | None = None) -> dict[str, Any]:
        self._writable("curator.run")
        from curator.api import run_cycle

        return run_cycle(self._ctx)

    @scoped
    def tick(self, now: int | None = None, feed_episodes: Sequence[Mapping[str, Any]] = (),
             *, scope: str | None = None) -> dict[str, Any]:
        """One heartbeat: write the feed's episodes, distil and curate when due."""
        self._writable("tick")
        from grimoire.service.heartbeat import run_tick

        return run_tick(self._ctx, now=now, feed_episodes=feed_episodes)

    # -- forgetting (grimoire/forget) ----------------------------------------------------

    @scoped
    def forget(self, episode: str | None = None, actor: str | None = None,
               thread: str | None = None, entity: str | None = None,
               matching: str | None = None, dry_run: bool = False, *,
               scope: str | None = None) -> dict[str, Any]:
        """Erase one episode, an actor's, a thread's, an entity's or a phrase's every trace
        (``grimoire.forget``); ``dry_run`` lists what would go and changes nothing."""
        if dry_run is not True:
            self._writable("forget")
        from grimoire.forget import forget

        return forget(self._ctx, {"episode": episode, "actor": actor, "thread": thread,
                                  "entity": entity, "matching": matching,
                                  "dry_run": dry_run})

    # -- knowledge exchange (grimoire/portable) -------------------------------------------

    @scoped
    def clade_publish(self, uri: str, agent: str | None = None, *,
                      scope: str | None = None) -> dict[str, Any]:
        from grimoire.portable.clade import publish

        return publish(self._ctx, uri, agent)

    @scoped
    def clade_pull(self, uri: str, agent: str | None = None,
                   allow_mixed: bool = False, *, scope: str | None = None) -> dict[str, Any]:
        self._writable("clade.pull")
        from grimoire.portable.clade import pull

        return pull(self._ctx, uri, agent, allow_mixed=allow_mixed)
