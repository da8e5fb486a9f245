"""The optional LLM's five jobs in learning, each falling back to the rule-based path.

Installed by the facade only when an LLM is configured (``install_llm_paths``);
``paths_of(ctx)`` is None otherwise, and then nothing here runs and nothing
touches the network. With an LLM:

(a) admission's future utility (SPEC §5) for every candidate, passed to the
    gate as ``llm_scores`` (asked off the writer thread);
(b) Reflexion steps 3–5 (outcome comparison, counterfactual, insight
    extraction) for actions whose verdict calls for interpretation, on a
    worker thread with a bounded queue; candidate insights enter through the
    gate at confidence 0.5; then the knowledge-graph triples the episode states
    (seed 004's graph source 1, ``curator.learn.analysis_triples``);
(c) ExpeL prompt distillation: the model proposes claims, ``verify``
    keeps those the episodes support and gives them the data's numbers, and
    they become the same ``Operation`` objects as the rule-based extractor's
    (added to them: the extractor keeps its statistical guarantee and the
    model adds what it saw that the vocabulary scan did not rank);
(d) seed 001's causality judgement on each new causal link: "No." drops the
    link, "Yes: …" becomes the relationship text of its causal edges; the same
    judgement of a new event's auto-linked causes (``curator.learn.cause_judge``);
(e) seed 002's hierarchical summaries: ``write_summary`` is the
    ``curator.hierarchy.summaries.SummaryWriter`` the summaries phase passes as ``llm=``;
    the model rewrites the prose of an L1 / L2 summary from its measured facts
    and source texts, and a bad answer falls back to the extractive text (the
    provenance, tags and period are computed without the model either way).

Every failure (network, timeout, garbage) is an ``LLMError``: it is logged,
counted, and the rule-based result stands. Tokens and latency (the client's
``stats``) and per-path counts are published to ``ctx.extras["llm_stats"]``,
which ``status`` shows.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from curator.distiller.match import match_claims
from curator.distiller.operations import (
    NEGATIVE_RATE,
    POSITIVE_RATE,
    ExistingClaim,
    Operation,
    OpKind,
    category_for_claim,
)
from curator.learn.llm_prompts import (
    causality_messages,
    expel_messages,
    parse_causality,
    parse_claims,
    parse_summary,
    parse_utility,
    summary_messages,
    utility_messages,
)
from curator.learn.reflexion import Invariants, reflect
from curator.learn.verify import verify_proposals
from curator.views.render import render_claim
from grimoire.config import DistillerConfig, LLMConfig
from grimoire.context import Context
from grimoire.errors import GrimoireError, LLMError
from grimoire.gate.admit import MAX_CONTENT_CHARS, Proposal, admit
from grimoire.guard.instructions import is_marked
from grimoire.logs import get_logger
from grimoire.models.llm import LLM
from grimoire.records import Category, Episode, Provenance, Regime

__all__ = ["PATHS_KEY", "STATS_KEY", "LLMPaths", "LLMWorker", "install_llm_paths", "paths_of"]

log = get_logger(__name__)

PATHS_KEY = "llm_paths"
STATS_KEY = "llm_stats"
_PATHS = ("utility", "reflexion", "expel", "causality", "summary", "graph", "causes")
_CACHE = 512  # answers remembered per path (the same ADD recurs until the gate settles it)
_SUMMARY_EXCERPTS = 12  # source texts quoted in a summary prompt (evenly spread)
_INSIGHTS_PER_EPISODE = 3


def paths_of(ctx: Context) -> LLMPaths | None:
    paths = ctx.extras.get(PATHS_KEY)
    return paths if isinstance(paths, LLMPaths) else None


class LLMWorker:
    """One daemon thread running LLM jobs from a bounded queue; a full queue drops the job."""

    def __init__(self, max_pending: int, name: str = "grimoire-llm") -> None:
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=max(1, max_pending))
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> bool:
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            return False
        return True

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted job has finished (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0 or not self._queue.all_tasks_done.wait(left):
                    return not self._queue.unfinished_tasks
        return True

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception:  # the worker must outlive a bad job; logged loudly below
                # The deterministic Reflexion record is already durable; only the LLM's
                # advisory view of this one episode is lost, and the log says which.
                log.exception("llm.worker.job.failed")
            finally:
                self._queue.task_done()


class _PromptLLM:
    """curator.learn.reflexion's one-prompt protocol over the chat client."""

    def __init__(self, paths: LLMPaths) -> None:
        self._paths = paths

    def complete(self, prompt: str) -> str:
        return self._paths.ask("reflexion", [{"role": "user", "content": prompt}])


class LLMPaths:
    def __init__(self, llm: LLM, cfg: LLMConfig, extras: dict[str, Any]) -> None:
        self.llm = llm
        self.cfg = cfg
        self._extras = extras
        self._lock = threading.Lock()
        self._counts = {p: {"calls": 0, "fallbacks": 0} for p in _PATHS}
        self._utility: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._judged: OrderedDict[str, tuple[bool, str | None]] = OrderedDict()
        self._summaries: OrderedDict[str, str] = OrderedDict()
        self._runs: dict[str, int] = {}  # distillations seen per strategy ("" = global)
        self.worker = LLMWorker(cfg.max_pending)
        self.publish()

    # -- plumbing -------------------------------------------------------------------------

    def publish(self) -> None:
        """Refresh ``ctx.extras["llm_stats"]`` (tokens, latency, per-path counts)."""
        stats = getattr(self.llm, "stats", None)  # ChatClient counts tokens and latency
        base: dict[str, Any] = stats.to_dict() if stats is not None and hasattr(
            stats, "to_dict") else {}
        with self._lock:
            paths = {p: dict(c) for p, c in self._counts.items()}
        self._extras[STATS_KEY] = {"configured": True, **base, "paths": paths}

    def ask(self, path: str, messages: Sequence[Mapping[str, str]]) -> str:
        with self._lock:
            self._counts[path]["calls"] += 1
        try:
            return self.llm.complete(messages, max_tokens=self.cfg.max_tokens, temperature=0.0)
        finally:
            self.publish()

    def _fallback(self, path: str, exc: LLMError, **fields: Any) -> None:
        with self._lock:
            self._counts[path]["fallbacks"] += 1
        log.warning("llm.fallback", path=path, error=str(exc), **fields)
        self.publish()

    def _recall(self, cache: OrderedDict[Any, Any], key: Any) -> Any:
        with self._lock:  # the heartbeat and the Reflexion worker share the caches
            return cache.get(key)

    def _remember(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        with self._lock:
            cache[key] = value
            while len(cache) > _CACHE:
                cache.popitem(last=False)

    # -- (a) admission's future utility ---------------------------------------------------

    def utility_scores(self, proposal: Proposal) -> dict[str, float] | None:
        key = (proposal.category.value, proposal.content)
        known = self._recall(self._utility, key)
        if known is not None:
            return {"future_utility": known}
        try:
            score = parse_utility(self.ask("utility", utility_messages(*key)))
        except LLMError as exc:
            self._fallback("utility", exc)
            return None  # the gate's rule-based future utility
        self._remember(self._utility, key, score)
        return {"future_utility": score}

    # -- (b) Reflexion steps 3-5 ----------------------------------------------------------

    def submit_reflexion(self, ctx: Context, episode: Episode, invariants: Invariants) -> bool:
        queued = self.worker.submit(functools.partial(self._reflect, ctx, episode, invariants))
        if not queued:
            log.warning("reflexion.llm.dropped", episode_id=episode.id, reason="queue full")
        return queued

    def _reflect(self, ctx: Context, episode: Episode, invariants: Invariants) -> None:
        result = reflect(episode, invariants, llm=_PromptLLM(self))
        if "error" in result.llm_notes:
            self._fallback("reflexion", LLMError(result.llm_notes["error"]),
                           episode_id=episode.id)
        log.info("reflexion.llm.result", episode_id=episode.id, verdict=result.verdict.value,
                 insights=len(result.candidate_insights))
        self._graph(ctx, episode)
        for text in result.candidate_insights[:_INSIGHTS_PER_EPISODE]:
            if len(text) > MAX_CONTENT_CHARS:
                log.warning("reflexion.insight.dropped", episode_id=episode.id,
                            reason="too long")
                continue
            proposal = Proposal(
                category=Category.INSIGHT, content=text, provenance=Provenance.SELF_LEARNED,
                confidence=0.5, tags=("reflexion", "llm"), strategy=episode.strategy,
                regime=episode.regime, parent_episode_ids=(episode.id,),
                event_time=episode.timestamp)
            scores = self.utility_scores(proposal)
            vector = ctx.embedder.embed([text])[0]
            try:
                decision = ctx.writer.call(
                    functools.partial(admit, ctx, proposal, vector, llm_scores=scores))
            except GrimoireError as exc:  # e.g. BusyError while shutting down: logged, dropped
                log.warning("reflexion.insight.failed", episode_id=episode.id, error=str(exc))
                continue
            log.info("reflexion.insight", episode_id=episode.id,
                     decision=decision["decision"], entry_id=decision["id"])

    def _graph(self, ctx: Context, episode: Episode) -> None:
        """Seed 004's graph source 1: the facts the analysed episode states
        (``analysis_triples``)."""
        from curator.learn.analysis_triples import assert_llm_triples

        try:
            assert_llm_triples(ctx, functools.partial(self.ask, "graph"), episode)
        except LLMError as exc:
            self._fallback("graph", exc, episode_id=episode.id)
        except GrimoireError as exc:  # e.g. BusyError while shutting down: logged, dropped
            log.warning("graph.llm.failed", episode_id=episode.id, error=str(exc))

    # -- (c) ExpeL prompt distillation + (d) causality judgement --------------------------

    def refine(
        self, ops: list[Operation], episodes: Sequence[Episode],
        existing: Sequence[ExistingClaim], cfg: DistillerConfig, strategy: str | None,
    ) -> tuple[list[Operation], dict[str, int], dict[str, str]]:
        """The rule-based operations plus verified LLM claims, minus links judged not causal;
        with counts and the relationship sentences of judged links (by claim key)."""
        counts = {"llm_claims": 0, "llm_dropped_claims": 0, "llm_rejected_links": 0}
        added = self._expel(ops, episodes, existing, cfg, strategy, counts)
        relationships: dict[str, str] = {}
        by_id = {ep.id: ep for ep in episodes}
        kept: list[Operation] = []
        for op in ops + added:
            if op.op is OpKind.ADD and op.category is Category.CAUSAL_LINK:
                verdict = self._judge(op, by_id)
                if verdict is not None and not verdict[0]:
                    counts["llm_rejected_links"] += 1
                    log.info("causal.llm.rejected", claim=op.claim.key)
                    continue
                if verdict is not None and verdict[1]:
                    relationships[op.claim.key] = verdict[1]
            kept.append(op)
        return kept, counts, relationships

    def _expel(self, ops: Sequence[Operation], episodes: Sequence[Episode],
               existing: Sequence[ExistingClaim], cfg: DistillerConfig, strategy: str | None,
               counts: dict[str, int]) -> list[Operation]:
        with self._lock:
            run = self._runs.get(strategy or "", 0)
            self._runs[strategy or ""] = run + 1
        # A prompt per distillation (every 10 episodes) would keep a local model busy for
        # little news: the window moves by 10 of 2,000 episodes between runs.
        if run % max(1, self.cfg.expel_every) or len(episodes) < 2 * cfg.min_support:
            return []
        messages = expel_messages(
            episodes, strategy, max_claims=self.cfg.expel_max_claims,
            sample=self.cfg.expel_sample_episodes, min_support=cfg.min_support,
            skip_metrics=set(cfg.derived_metrics))
        try:
            proposals = parse_claims(self.ask("expel", messages), self.cfg.expel_max_claims)
        except LLMError as exc:
            self._fallback("expel", exc, strategy=strategy)
            return []  # the rule-based extractor's operations stand alone
        checked, dropped = verify_proposals(proposals, episodes, cfg, strategy=strategy)
        counts["llm_dropped_claims"] = dropped
        if dropped:
            log.info("expel.llm.dropped", strategy=strategy, dropped=dropped,
                     proposed=len(proposals))
        mine = [ex for ex in existing if ex.claim.strategy == strategy
                and (ex.claim.target.startswith("metric:")
                     or ex.claim.target in (NEGATIVE_RATE, POSITIVE_RATE))]
        matches, _ = match_claims([c.claim for c in checked], mine, cfg.edit_change)
        known = {op.claim.key for op in ops}
        targets = {op.target_entry_id for op in ops if op.target_entry_id}
        out: list[Operation] = []
        for item, match in zip(checked, matches, strict=True):
            target = match.existing.entry_id if match.existing else None
            if item.claim.key in known or (target is not None and target in targets):
                continue  # the extractor found it too: one operation per claim
            out.append(Operation(
                op=match.kind, category=category_for_claim(item.claim), claim=item.claim,
                content=render_claim(item.claim, item.evidence), target_entry_id=target,
                parent_episode_ids=_parents(episodes, item.rows, cfg.max_parent_episodes),
                tags=("distiller", "llm", item.claim.target.split(":", 1)[1]),
                strategy=strategy, regime=_regime(item.claim.condition),
                evidence=item.evidence))
        counts["llm_claims"] = len(out)
        return out

    def _judge(self, op: Operation, by_id: Mapping[str, Episode]) -> tuple[bool, str | None] | None:
        """(linked, sentence) for a new causal link, None when the LLM could not judge it."""
        known: tuple[bool, str | None] | None = self._recall(self._judged, op.claim.key)
        if known is not None:
            return known
        pairs = [p for p in op.evidence.get("pairs", ()) if len(p) == 2
                 and p[0] in by_id and p[1] in by_id]
        if not pairs:
            return None
        cause, effect = by_id[pairs[-1][0]], by_id[pairs[-1][1]]
        if is_marked(cause.marks) or is_marked(effect.marks):
            return None  # marked text is not shown to the model; the statistical link stands
        try:
            verdict = parse_causality(self.ask("causality",
                                               causality_messages(cause.text, effect.text)))
        except LLMError as exc:
            self._fallback("causality", exc, claim=op.claim.key)
            return None  # the statistical link stands
        self._remember(self._judged, op.claim.key, verdict)
        return verdict

    def judge_causality(self, cause: str, effect: str, path: str = "causes", **fields: Any
                        ) -> tuple[bool, str | None] | None:
        """Seed 001's "did X directly lead to Y?": (linked, relationship sentence), or None
        when the LLM could not judge (logged and counted under ``path``; the rule-based
        link stands)."""
        try:
            return parse_causality(self.ask(path, causality_messages(cause, effect)))
        except LLMError as exc:
            self._fallback(path, exc, **fields)
            return None

    # -- (e) hierarchical summaries -------------------------------------------------------

    def write_summary(self, level: int, facts: str, excerpts: Sequence[str]) -> str:
        """``SummaryWriter``: the model's summary, or ``LLMError`` (counted) to keep the
        extractive text ``facts``. Called on the curator's thread, never the writer's."""
        messages = summary_messages(level, facts, excerpts, max_excerpts=_SUMMARY_EXCERPTS)
        prompt = messages[-1]["content"]
        known: str | None = self._recall(self._summaries, prompt)
        if known is not None:
            return known
        try:
            text = parse_summary(self.ask("summary", messages), prompt)
        except LLMError as exc:
            self._fallback("summary", exc, level=level)
            raise  # curator.hierarchy.summaries keeps the extractive text
        self._remember(self._summaries, prompt, text)
        return text


def _parents(episodes: Sequence[Episode], rows: np.ndarray, limit: int) -> tuple[str, ...]:
    idx = np.flatnonzero(rows)
    chosen = sorted(idx.tolist(), key=lambda i: episodes[i].timestamp)[-limit:]
    return tuple(episodes[i].id for i in sorted(chosen))


def _regime(condition: Mapping[str, Any]) -> Regime | None:
    value = condition.get("regime")
    try:
        return Regime(value) if isinstance(value, str) else None
    except ValueError:
        return None


def install_llm_paths(ctx: Context, llm: LLM) -> LLMPaths:
    """Give the context its LLM paths: learning (paths_of) and entry.add's admission scorer."""
    paths = LLMPaths(llm, ctx.config.llm, ctx.extras)
    ctx.extras[PATHS_KEY] = paths
    ctx.extras["admission_scorer"] = paths.utility_scores
    return paths
