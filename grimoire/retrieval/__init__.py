"""The retrieval pipeline's stages as small pure functions (SPEC §9, §11).

    candidates ─▶ fusion.rrf_from_ranks ─▶ fusion.normalise_anchored ─▶ rerank.score_all
      ─▶ causal_boost.apply (ancestors from causal_boost.backward_bfs)
      ─▶ mmr.select ─▶ budget.fit ─▶ render.context_block

plus ``weights.HedgeWeights`` (rerank weights learned from outcome reports),
``decide`` (mode="auto", replay utility, contrarian injection), ``chain``
and ``render.narrative`` (seed 001's causal chain) and ``auto_link``
(inferred predecessors of a new event), and ``regions`` (the region MDP's read side:
a vector's region and P(success) per action there; the curator fits it).

Every stage takes plain data (candidates, vectors, mappings, callables) and
returns new values. None of these stage modules imports a store, reads a clock
or logs. ``pipeline`` runs ``retrieve`` end to end; its store-facing parts
(backends, records, the retrieval log) are in ``stages/``, which this module
does not import.
"""

from grimoire.retrieval.auto_link import Event, predecessors
from grimoire.retrieval.budget import Fitted, fit, truncate
from grimoire.retrieval.candidates import (
    Breakdown,
    Candidate,
    Kind,
    Vector,
    from_entry,
    from_episode,
    unit_vector,
)
from grimoire.retrieval.causal_boost import Ancestor, AncestorVector, backward_bfs, with_vectors
from grimoire.retrieval.causal_boost import apply as apply_causal_boost
from grimoire.retrieval.chain import ChainLink, walk_to_root
from grimoire.retrieval.decide import (
    RetrievalDecision,
    RetrievalMode,
    contrarian_due,
    contrarian_pick,
    curiosity_from_similarity,
    replay_rank,
    replay_utility,
    should_retrieve,
    valence,
)
from grimoire.retrieval.fusion import (
    normalise,
    normalise_anchored,
    ranked,
    rrf,
    rrf_from_candidates,
    rrf_from_ranks,
)
from grimoire.retrieval.mmr import select as mmr_select
from grimoire.retrieval.render import context_block, format_time, narrative
from grimoire.retrieval.rerank import (
    FACTORS,
    effective_weights,
    factor_values,
    pad_affinity,
    recency,
    regime_match,
    score,
    score_all,
)
from grimoire.retrieval.weights import HedgeWeights

__all__ = [
    "FACTORS",
    "Ancestor",
    "AncestorVector",
    "Breakdown",
    "Candidate",
    "ChainLink",
    "Event",
    "Fitted",
    "HedgeWeights",
    "Kind",
    "RetrievalDecision",
    "RetrievalMode",
    "Vector",
    "apply_causal_boost",
    "backward_bfs",
    "context_block",
    "contrarian_due",
    "contrarian_pick",
    "curiosity_from_similarity",
    "effective_weights",
    "factor_values",
    "fit",
    "format_time",
    "from_entry",
    "from_episode",
    "mmr_select",
    "narrative",
    "normalise",
    "normalise_anchored",
    "pad_affinity",
    "predecessors",
    "ranked",
    "recency",
    "regime_match",
    "replay_rank",
    "replay_utility",
    "rrf",
    "rrf_from_candidates",
    "rrf_from_ranks",
    "score",
    "score_all",
    "should_retrieve",
    "truncate",
    "unit_vector",
    "valence",
    "walk_to_root",
    "with_vectors",
]
