"""The public surface of grimoire.retrieval and its dependency rule."""

from __future__ import annotations

import subprocess
import sys

import grimoire.retrieval as retrieval

EXPECTED = {
    "FACTORS", "Ancestor", "AncestorVector", "Breakdown", "Candidate", "ChainLink", "Event",
    "Fitted", "HedgeWeights", "Kind", "RetrievalDecision", "RetrievalMode", "Vector",
    "apply_causal_boost", "backward_bfs", "context_block", "contrarian_due", "contrarian_pick",
    "curiosity_from_similarity", "effective_weights", "factor_values", "fit", "format_time",
    "from_entry", "from_episode", "mmr_select", "narrative", "normalise", "normalise_anchored",
    "pad_affinity",
    "predecessors", "ranked", "recency", "regime_match", "replay_rank", "replay_utility", "rrf",
    "rrf_from_candidates", "rrf_from_ranks", "score", "score_all", "should_retrieve", "truncate",
    "unit_vector",
    "valence", "walk_to_root", "with_vectors",
}


def test_public_surface_is_what_was_meant() -> None:
    assert set(retrieval.__all__) == EXPECTED
    for name in retrieval.__all__:
        assert hasattr(retrieval, name), name


def test_importing_retrieval_pulls_in_no_store_or_backend() -> None:
    """Retrieval is pure: stores and their libraries stay out of its import graph."""
    code = (
        "import sys, grimoire.retrieval\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('grimoire.stores', 'lancedb',"
        " 'apsw', 'lmdb', 'sqlite_vec', 'fastembed', 'onnxruntime', 'structlog')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
