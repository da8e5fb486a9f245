"""Candidate validation and the episode/entry factories."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grimoire.config import Config
from grimoire.errors import ValidationError
from grimoire.records import (
    PAD,
    Category,
    DecayClass,
    Episode,
    EpisodeType,
    GrimoireEntry,
    Importance,
    Provenance,
    Regime,
)
from grimoire.retrieval.candidates import from_entry, from_episode, unit_vector
from tests.retrieval.retrieval_support import DAY, HOUR, NOW, axis, make_candidate


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"id": ""}, "id"),
        ({"kind": "note"}, "kind"),
        ({"vector": np.ones(4, dtype=np.float32)}, "vector"),  # not normalised
        ({"vector": np.zeros((2, 2), dtype=np.float32)}, "vector"),
        ({"confidence": 1.5}, "confidence"),
        ({"quality": -0.1}, "quality"),
        ({"ranks": {"vector": 0}}, "ranks.vector"),
        ({"half_life_ms": 0.0}, "half_life_ms"),
    ],
)
def test_bad_candidate_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        make_candidate(**overrides)
    assert info.value.field == field


def test_unit_vector_normalises_and_refuses_zero() -> None:
    assert float(np.linalg.norm(unit_vector([3.0, 4.0]))) == pytest.approx(1.0)
    with pytest.raises(ValidationError, match="zero"):
        unit_vector([0.0, 0.0])
    with pytest.raises(ValidationError, match="finite"):
        unit_vector([float("nan"), 1.0])


def test_from_episode_uses_neutral_confidence_importance_and_48h() -> None:
    """Episodes: confidence 0.5, quality from importance, 48 h recency, provenance ref."""
    config = Config()
    episode = Episode(id="e1", text="swap 2 ETH", type=EpisodeType.ACTION, timestamp=NOW - HOUR,
                      importance=Importance.CRITICAL, regime=Regime.BULL, gain=-12.5,
                      ref="0xabc", strategy="dca")
    c = from_episode(episode, [1.0, 1.0], config, ranks={"vector": 2})
    assert (c.kind, c.confidence, c.quality) == ("episode", 0.5, 0.75)
    assert c.half_life_ms == 48 * HOUR
    assert (c.regime, c.gain, c.ref, c.strategy) == ("bull", -12.5, "0xabc", "dca")
    assert c.provenance["ref"] == "0xabc" and c.ranks == {"vector": 2}
    incident = Episode(id="e2", text="invariant broke", type=EpisodeType.SAFETY_INCIDENT,
                       timestamp=NOW)
    assert from_episode(incident, [1.0], config).confidence == 1.0


def test_from_entry_carries_decay_and_provenance() -> None:
    entry = GrimoireEntry(
        id="h1", category=Category.WARNING, content="Avoid swaps when gas > 80 gwei",
        confidence=0.8, quality_score=0.7, decay_class=DecayClass.REGIME_CONDITIONAL,
        provenance=Provenance.DEATH_REFLECTION, created_at=NOW - 9 * DAY,
        last_accessed_at=NOW - 2 * DAY, market_regime=Regime.HIGH_VOL,
        parent_episode_ids=("e1", "e2"), is_bloodstain=True,
        emotional_tag=PAD(-0.5, 0.6, -0.2), strategy="dca",
    )
    c = from_entry(entry, axis(1), effective_confidence=0.61, half_life_ms=28 * DAY)
    assert (c.kind, c.category, c.confidence, c.quality) == ("entry", "warning", 0.61, 0.7)
    assert c.timestamp == NOW - 2 * DAY and c.half_life_ms == 28 * DAY
    assert c.is_bloodstain and c.regime == "high_vol" and c.emotion == PAD(-0.5, 0.6, -0.2)
    assert c.provenance["parent_episode_ids"] == ["e1", "e2"]
    assert c.provenance["source"] == "death_reflection"
