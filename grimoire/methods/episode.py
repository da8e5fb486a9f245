"""The episode write path: validate, embed, append durably, then run post-write hooks.

With ``privacy.redact`` set, each episode's secrets are removed while it is validated,
before anything embeds or stores it (``grimoire.guard.redact``); an episode whose text
instructs a model is marked then (``marks``: ``grimoire.guard.instructions``).

Validation happens on the caller's thread so bad input is refused before it
queues. Embedding runs on the embedding stage (``ctx.embed_stage``, a second
single thread in front of the writer), batched with the other writes waiting
there; the stage hands the embedded group to the writer as one job (one fsync'd
append) and goes straight on to the next group, while each caller waits on its
own ack. The two stages overlap: while the writer commits one group
(journal fsync, LanceDB, hooks) the model embeds the next, so a few clients
each waiting for their ack keep the model busy instead of leaving it idle for
every commit (issue 15: 8 clients sustained 0.79x the raw embedder when one
thread embedded and committed in turn). The ack still waits for the append:
durability is unchanged, and a caller whose episodes the model or the store
refuses gets its own error while the rest of its group is stored. Without a
stage (a bare Context) the writer embeds.
Post-write hooks (counters for distillation, Reflexion, auto-linking, entity
mentions) run after the append is durable; a hook failure is logged with the
episode ids and never un-acknowledges a durable write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from grimoire.context import Context
from grimoire.errors import NotFoundError, StoreError, ValidationError
from grimoire.guard.instructions import mark_episode
from grimoire.guard.redact import redact_episode, redactor
from grimoire.ids import new_id
from grimoire.logs import get_logger
from grimoire.methods.thread_context import embedding_texts
from grimoire.models.embedders import Vectors
from grimoire.records import Episode, episode_from_params

__all__ = ["MAX_BATCH", "FeedIngest", "count_for_distillation", "get_episode",
           "validate_episodes", "write_embedded_episodes", "write_episodes",
           "write_feed_episodes"]

log = get_logger(__name__)

MAX_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class FeedIngest:
    """What one tick's feed ingest did: the ids written and the params refused (index, why)."""

    ids: list[str]
    rejected: list[tuple[int, str]]


def count_for_distillation(ctx: Context, episodes: Sequence[Episode], _: np.ndarray) -> None:
    """Post-write hook: count new episodes per strategy for the distillation schedule."""
    with ctx.state_lock:
        for ep in episodes:
            key = ep.strategy or ""
            ctx.since_distill[key] = ctx.since_distill.get(key, 0) + 1


def validate_episodes(ctx: Context, params_list: Sequence[Mapping[str, Any]], *,
                      batch: bool = True) -> list[Episode]:
    """Build Episodes from untrusted params; the first bad one raises, naming its index.

    With ``batch`` (``episode.write_batch``) a bad field is named
    ``episodes[i].field``; a single ``episode.write`` names just ``field``.
    """
    if not isinstance(params_list, Sequence) or isinstance(params_list, str | bytes):
        raise ValidationError("must be a list of episode objects", field="episodes")
    if not params_list:
        raise ValidationError("must not be empty", field="episodes")
    if len(params_list) > MAX_BATCH:
        raise ValidationError(f"at most {MAX_BATCH} episodes per batch", field="episodes")
    now = ctx.now()
    out: list[Episode] = []
    secrets = redactor(ctx.config.privacy.redact, ctx.config.privacy.phone_region)
    for index, params in enumerate(params_list):
        try:
            out.append(mark_episode(redact_episode(
                episode_from_params(params, id=new_id(now), now_ms=now), secrets)))
        except ValidationError as exc:
            if not batch:
                raise
            where = f"episodes[{index}]" + (f".{exc.field}" if exc.field else "")
            raise ValidationError(str(exc).split(": ", 1)[-1], field=where) from None
    return out


@dataclass(slots=True)
class _Embedded:
    """One caller's episodes with their vectors, on the way to the writer; ``ack`` is
    answered with their ids once they are durable, or with this caller's own error."""

    episodes: list[Episode]
    vectors: Vectors
    ack: Future[list[str]]


def _embed_group(ctx: Context, batches: Sequence[list[Episode]]) -> list[Future[list[str]]]:
    """Embedding-stage handler: one embedding call for every waiting caller, then the whole
    group goes to the writer as one job and the stage is free for the next group at once.

    Returns each caller's ack future. The writer gets one job per group, so it needs no
    linger to gather the callers again (they used to re-queue one by one from their own
    threads). If the embedding call fails, each caller's texts are embedded alone, so a
    text the model refuses fails only its own write. ``embedding_texts`` runs here, in
    queue order: a thread's previous turn is the one embedded just before
    (``thread_context``)."""
    flat = [ep for batch in batches for ep in batch]
    texts = embedding_texts(ctx, flat)
    acks: list[Future[list[str]]] = [Future() for _ in batches]
    spans, start = [], 0
    for batch in batches:
        spans.append((start, start + len(batch)))
        start += len(batch)
    ready: list[_Embedded] = []
    try:
        vectors = ctx.embedder.embed(texts)
    except Exception as exc:
        if len(batches) == 1:
            acks[0].set_exception(exc)
        else:
            for batch, (a, b), ack in zip(batches, spans, acks, strict=True):
                try:
                    ready.append(_Embedded(batch, ctx.embedder.embed(texts[a:b]), ack))
                except Exception as own:
                    ack.set_exception(own)
    else:
        ready = [_Embedded(batch, vectors[a:b], ack)
                 for batch, (a, b), ack in zip(batches, spans, acks, strict=True)]
    if ready:
        _hand_to_writer(ctx, ready)
    return acks


def _hand_to_writer(ctx: Context, ready: list[_Embedded]) -> None:
    try:
        job = ctx.writer.submit_batched(
            "episodes.embedded", ready, lambda groups: _commit_groups(ctx, groups),
            weight=sum(len(part.episodes) for part in ready), linger=False)
    except BaseException as exc:  # a full queue, a writer shutting down: each caller hears
        for part in ready:
            part.ack.set_exception(exc)
        return

    def answer_the_rest(done: Future[Any]) -> None:
        # _commit_groups answers every ack itself; this covers an error it re-raised.
        exc = done.exception()
        for part in ready:
            if not part.ack.done():
                part.ack.set_exception(exc or StoreError("episode write was not committed"))

    job.add_done_callback(answer_the_rest)


def _commit_groups(ctx: Context, groups: Sequence[list[_Embedded]]) -> list[None]:
    """Writer-thread handler: one durable append for every embedded group, then each ack.

    The store checks a whole append before it writes anything; if that check refuses
    the group (ValidationError), each caller's episodes are appended alone, so one bad
    write gets its own error and the others are stored. Any other failure may have come
    after the journal write, so it is not retried: every caller in the group gets it."""
    parts = [part for group in groups for part in group]
    flat = [ep for part in parts for ep in part.episodes]
    vectors = (np.concatenate([part.vectors for part in parts]) if len(parts) > 1
               else parts[0].vectors)
    try:
        _append(ctx, flat, vectors)
    except ValidationError as exc:
        if len(parts) == 1:
            parts[0].ack.set_exception(exc)
            return [None] * len(groups)
        for part in parts:
            try:
                _append(ctx, part.episodes, part.vectors)
            except ValidationError as own:
                part.ack.set_exception(own)
            else:
                part.ack.set_result([ep.id for ep in part.episodes])
        return [None] * len(groups)
    for part in parts:
        part.ack.set_result([ep.id for ep in part.episodes])
    return [None] * len(groups)


def _append_batch(ctx: Context, batches: Sequence[list[Episode]]) -> list[list[str]]:
    """Writer-thread handler without a stage: one embedding call and one durable append."""
    flat = [ep for batch in batches for ep in batch]
    vectors = ctx.embedder.embed(embedding_texts(ctx, flat))
    _append(ctx, flat, vectors)
    return [[ep.id for ep in batch] for batch in batches]


def _append(ctx: Context, flat: list[Episode], vectors: Vectors) -> None:
    ctx.episodes.append(flat, vectors)
    ctx.events.emit("GrimoireWrite", ctx.now(), kind="episode", count=len(flat))
    for hook in ctx.post_write_hooks:
        try:
            hook(ctx, flat, vectors)
        except Exception as exc:
            # The episodes are already durable: failing the call would make the client
            # retry and store them twice. The failure is logged loudly with the ids instead.
            log.exception("ingest.hook.failed", hook=hook.__name__, error=str(exc),
                          ids=[ep.id for ep in flat][:20])


def _store(ctx: Context, episodes: list[Episode]) -> list[str]:
    """Embed (stage) then append (writer); returns the ids once they are durable."""
    stage = ctx.embed_stage
    if stage is None or ctx.writer.on_writer_thread():
        ids: list[str] = ctx.writer.call_batched(
            "episodes", episodes, lambda batches: _append_batch(ctx, batches),
            weight=len(episodes))
        return ids
    ack: Future[list[str]] = stage.call_batched(
        "embed", episodes, lambda batches: _embed_group(ctx, batches), weight=len(episodes))
    return ack.result()


def write_episodes(
    ctx: Context, params_list: Sequence[Mapping[str, Any]], *, atomic: bool = False
) -> list[str]:
    """Validate and store episodes; returns their ids once they are durable.

    A batch is all or nothing: it is validated completely before anything is
    written, and appended in one journal transaction.
    """
    # Every call is atomic (one validated list, one durable append); ``atomic`` marks a
    # caller's batch, whose errors name the item (episodes[i].field).
    episodes = validate_episodes(ctx, params_list, batch=atomic)
    return _store(ctx, episodes)


def write_embedded_episodes(ctx: Context, params_list: Sequence[Mapping[str, Any]],
                            vectors: Sequence[Any]) -> list[str]:
    """``write_episodes`` for episodes whose vectors the caller has (an imported bundle's,
    made by this model of these words), or None for one it has not: those are embedded
    here. An episode whose words the write changes (redaction) or that has a thread (its
    vector embeds the thread's previous words too) is embedded here as well. Validated
    whole, then one durable append on the writer; the ids once durable."""
    if len(vectors) != len(params_list):
        raise ValueError("one vector (or None) per episode")
    episodes = validate_episodes(ctx, params_list, batch=True)
    given = [vector if vector is not None and episode.thread is None
             and episode.text == params.get("text") else None
             for episode, params, vector in zip(episodes, params_list, vectors, strict=True)]

    def append() -> list[str]:
        todo = [i for i, vector in enumerate(given) if vector is None]
        made = ctx.embedder.embed(embedding_texts(ctx, [episodes[i] for i in todo])) \
            if todo else None
        rows = np.empty((len(episodes), ctx.episodes.dim), dtype=np.float32)
        for i, vector in enumerate(given):
            if vector is not None:
                rows[i] = vector
        if made is not None:
            rows[todo] = made
        _append(ctx, episodes, rows)
        return [ep.id for ep in episodes]

    ids: list[str] = ctx.writer.call(append)
    return ids


def write_feed_episodes(ctx: Context, params_list: Sequence[Mapping[str, Any]],
                        tick: int) -> FeedIngest:
    """Write a feed's episodes for one tick: each valid one is stored, each bad one refused.

    Unlike an agent's batch, a feed is not all or nothing: one malformed line
    from a tailed file must not cost the tick's other episodes. The refusals are
    logged (``ingest.feed.rejected``) and counted in the tick's IngestResult. An
    episode without a ``tick_id`` gets this tick's.
    """
    now = ctx.now()
    valid: list[Episode] = []
    rejected: list[tuple[int, str]] = []
    secrets = redactor(ctx.config.privacy.redact, ctx.config.privacy.phone_region)
    for index, params in enumerate(params_list):
        if isinstance(params, Mapping) and "tick_id" not in params:
            params = {**params, "tick_id": tick}
        try:
            valid.append(mark_episode(redact_episode(
                episode_from_params(params, id=new_id(now), now_ms=now), secrets)))
        except ValidationError as exc:
            rejected.append((index, str(exc)))
            log.warning("ingest.feed.rejected", tick=tick, index=index, error=str(exc))
    ids: list[str] = []
    for start in range(0, len(valid), MAX_BATCH):
        chunk = valid[start:start + MAX_BATCH]
        ids.extend(_store(ctx, chunk))
    return FeedIngest(ids, rejected)


def get_episode(ctx: Context, id: str) -> dict[str, Any]:
    if not isinstance(id, str) or not id:
        raise ValidationError("must be a non-empty string", field="id")
    episode = ctx.episodes.get(id)
    if episode is None:
        raise NotFoundError(f"no episode with id {id}")
    return episode.to_dict()
