"""Quality scenarios on hand-made vectors: the stages together rank what matters.

Each scenario runs the pipeline the facade will run
(rrf → normalise → rerank → causal boost → MMR) on a small deterministic
world and checks one behaviour the owner relies on.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from grimoire.config import RetrievalConfig
from grimoire.records import PAD
from grimoire.retrieval.candidates import Candidate
from grimoire.retrieval.causal_boost import AncestorVector, apply, backward_bfs, with_vectors
from grimoire.retrieval.fusion import normalise, rrf_from_candidates
from grimoire.retrieval.mmr import select
from grimoire.retrieval.rerank import factor_values, score_all
from grimoire.retrieval.weights import HedgeWeights
from tests.retrieval.retrieval_support import DAY, HOUR, NOW, axis, make_candidate, unit

CFG = RetrievalConfig()


def pipeline(
    candidates: Sequence[Candidate],
    ancestors: Sequence[AncestorVector] = (),
    query_regime: str | None = None,
    weights: dict[str, float] | None = None,
    mood: PAD | None = None,
    cfg: RetrievalConfig = CFG,
) -> tuple[list[str], dict[str, float], dict[str, dict[str, dict[str, float]]]]:
    rrf_norm = normalise(rrf_from_candidates(candidates, cfg.rrf_k))
    scores, factors = score_all(candidates, rrf_norm, NOW, query_regime,
                                weights or cfg.weights, mood, cfg)
    scores, factors = apply(scores, candidates, ancestors, cfg, factors)
    return select(candidates, scores, cfg.mmr_lambda, cfg.mmr_top, cfg.mmr_duplicate), \
        scores, factors


def episode(id: str, vector: object, ranks: dict[str, int], hours_ago: float = 1.0,
            quality: float = 0.25) -> Candidate:
    return make_candidate(id, kind="episode", vector=vector, ranks=ranks, quality=quality,
                          timestamp=NOW - int(hours_ago * HOUR), half_life_ms=48 * HOUR)


def outage_world() -> tuple[list[Candidate], list[AncestorVector]]:
    """Query "why do my swaps revert?" tied to the event revert_0917.

    Six symptom episodes read like the query (each a different facet, so
    MMR keeps them); the root cause, a gas spike two hours earlier, reads
    nothing like it and sits at vector rank 14 only. The causal graph says
    revert_0917 ← gas_spike (0.9) ← nft_mint (0.8).
    """
    symptoms = [
        episode(f"symptom{i}", unit((0, 1.0), (i + 1, 0.8)), {"vector": i, "bm25": i})
        for i in range(1, 7)
    ]
    distractors = [
        episode(f"other{i}", unit((0, 0.5), (i + 7, 1.0)), {"vector": 6 + i}) for i in range(1, 7)
    ]
    root = episode("gas_spike", axis(14), {"vector": 14}, hours_ago=2, quality=0.5)
    edges = {"revert_0917": [("gas_spike", 0.9)], "gas_spike": [("nft_mint", 0.8)]}
    found = backward_bfs(["revert_0917"], lambda n: edges.get(n, []), CFG.causal_max_depth)
    vectors = {"gas_spike": axis(14), "nft_mint": axis(15)}
    return [*symptoms, *distractors, root], with_vectors(found, vectors.get)


def test_root_cause_unlike_the_query_reaches_top3_only_with_the_causal_boost() -> None:
    candidates, ancestors = outage_world()
    without, _, _ = pipeline(candidates)
    with_boost, _, factors = pipeline(candidates, ancestors)
    assert "gas_spike" not in without[:3]
    assert "gas_spike" in with_boost[:3]
    assert factors["gas_spike"]["causal"]["value"] == pytest.approx(0.9)  # depth 1, itself
    assert factors["gas_spike"]["rrf"]["value"] == 0.0  # it really was the weakest match


def test_mmr_drops_near_duplicates_from_the_answer() -> None:
    """Three copies of one observation (cos ≥ 0.98) collapse to one; distinct items fill in."""
    copies = [episode(f"copy{i}", unit((0, 1.0), (1, 0.02 * i)), {"vector": i + 1, "bm25": i + 1})
              for i in range(3)]
    distinct = [episode(f"d{i}", unit((0, 0.6), (i + 2, 1.0)), {"vector": i + 4})
                for i in range(8)]
    order, _, _ = pipeline(copies + distinct)
    assert sum(x.startswith("copy") for x in order) == 1
    assert order[0] == "copy0" and len(order) == 9  # 11 candidates, 2 copies dropped


def test_an_entry_decayed_to_the_floor_ranks_below_a_fresh_one() -> None:
    """The stale one even ranked better in the vector search; it was last confirmed
    four months ago and its effective confidence sits at the 0.05 floor."""
    fresh = make_candidate("fresh", vector=axis(0), ranks={"vector": 2}, confidence=0.7,
                           timestamp=NOW - DAY, half_life_ms=14 * DAY)
    stale = make_candidate("stale", vector=axis(1), ranks={"vector": 1},
                           confidence=0.05, timestamp=NOW - 120 * DAY, half_life_ms=14 * DAY)
    filler = [make_candidate(f"f{i}", vector=axis(i + 2), ranks={"vector": i + 3})
              for i in range(4)]
    order, scores, _ = pipeline([stale, fresh, *filler])
    assert scores["fresh"] > scores["stale"]
    assert order.index("fresh") < order.index("stale")


def test_regime_match_lifts_matching_entries() -> None:
    """Identical entries but for their regime: bull > regime-free > bear in a bull query."""
    items = [make_candidate(name, vector=axis(n), ranks={"vector": 1},
                            regime=None if name == "any" else name)
             for n, name in enumerate(["bear", "any", "bull"])]
    order, scores, _ = pipeline(items, query_regime="bull")
    assert order == ["bull", "any", "bear"]
    assert scores["bull"] - scores["any"] == pytest.approx(0.05)
    assert scores["any"] - scores["bear"] == pytest.approx(0.05)


def test_bloodstain_lifts_an_otherwise_equal_warning() -> None:
    plain = make_candidate("plain", vector=axis(0), ranks={"vector": 1}, category="warning")
    stained = make_candidate("stained", vector=axis(1), ranks={"bm25": 1},
                             category="warning", is_bloodstain=True)
    order, scores, factors = pipeline([plain, stained])
    assert order == ["stained", "plain"]
    assert scores["stained"] == pytest.approx(1.2 * scores["plain"])
    assert factors["stained"]["bloodstain"]["multiplier"] == 1.2


def test_hedge_learns_that_confidence_predicts_good_outcomes() -> None:
    """The agent keeps succeeding with confident entries and failing with merely relevant
    ones: confidence gains weight, rrf loses it, and the confident entry overtakes."""
    relevant = make_candidate("relevant", vector=axis(0), ranks={"vector": 1, "bm25": 1},
                              confidence=0.3)
    trusted = make_candidate("trusted", vector=axis(1), ranks={"vector": 4}, confidence=0.95)
    filler = make_candidate("filler", vector=axis(2), ranks={"vector": 9})
    world = [relevant, trusted, filler]
    hw = HedgeWeights.from_config(CFG)
    before, _, factors = pipeline(world, weights=dict(hw.weights))
    assert before[0] == "relevant"
    for _ in range(15):
        hw = hw.update([factor_values(factors["trusted"])], +1)
        hw = hw.update([factor_values(factors["relevant"])], -1)
    assert hw.weights["confidence"] > CFG.weights["confidence"]
    assert hw.weights["rrf"] < CFG.weights["rrf"]
    after, _, _ = pipeline(world, weights=dict(hw.weights))
    assert after[0] == "trusted"
