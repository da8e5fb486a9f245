"""Records validate untrusted episode parameters at the boundary and serialise cleanly."""

from __future__ import annotations

import json
import uuid

import pytest

from grimoire.errors import ValidationError
from grimoire.ids import id_time_ms, is_uuid, new_id
from grimoire.records import (
    Category,
    Claim,
    EpisodeType,
    Outcome,
    Regime,
    episode_from_params,
    parse_enum,
)


def make(**overrides: object) -> dict[str, object]:
    params: dict[str, object] = {"text": "swap 2 ETH for USDC", "type": "action"}
    params.update(overrides)
    return params


def test_defaults_fill_in() -> None:
    ep = episode_from_params({"text": "tick"}, id="x", now_ms=123)
    assert ep.type is EpisodeType.OBSERVATION
    assert ep.outcome is Outcome.DESCRIPTIVE
    assert ep.timestamp == 123
    assert ep.metrics == {}


def test_full_episode_round_trips_to_json() -> None:
    ep = episode_from_params(
        make(outcome="negative", regime="high_vol", metrics={"gas_gwei": 12}, gain=-3.5,
             actions=["swap"], ref="0xabc", prediction={"expected_return_bps": 20}),
        id="id1", now_ms=5,
    )
    assert ep.regime is Regime.HIGH_VOL
    assert ep.metrics == {"gas_gwei": 12.0}
    data = json.loads(json.dumps(ep.to_dict()))
    assert data["regime"] == "high_vol" and data["ref"] == "0xabc" and data["gain"] == -3.5


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": "action"}, "text"),
        (make(text="   "), "text"),
        (make(type="trade"), "type"),
        (make(outcome="great"), "outcome"),
        (make(regime="moon"), "regime"),
        (make(metrics={"gas": "high"}), "metrics.gas"),
        (make(metrics={"gas": float("nan")}), "metrics.gas"),
        (make(metrics=[1, 2]), "metrics"),
        (make(timestamp=-1), "timestamp"),
        (make(timestamp=True), "timestamp"),
        (make(gain="a lot"), "gain"),
        (make(actions="swap"), "actions"),
        (make(valid_from=10, valid_until=5), "valid_until"),
        (make(metric={"gas": 1}), "episode"),
        (make(tool=7), "tool"),
    ],
)
def test_bad_params_name_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        episode_from_params(params, id="x", now_ms=1)
    assert info.value.field == field
    assert field in str(info.value)


def test_parse_enum_lists_allowed_values() -> None:
    with pytest.raises(ValidationError, match="insight, heuristic"):
        parse_enum(Category, "rumour", "category")
    assert parse_enum(Category, "warning", "category") is Category.WARNING


def test_claim_key_ignores_numbers_and_key_order() -> None:
    a = Claim({"hour_window": [2, 4], "regime": "bull"}, "metric:gas_gwei", "lower", 6, 24, 40)
    b = Claim({"regime": "bull", "hour_window": [2, 4]}, "metric:gas_gwei", "lower", 7, 23, 90)
    assert a.key == b.key
    assert Claim.from_dict(a.to_dict()) == a


def test_a_band_claim_keeps_its_cut_and_older_claims_still_load() -> None:
    """The cut point is part of what a band claim says, not of what it is: the same band
    found again at another cut is the same claim. Claims stored before the cut was kept
    (and every other claim) have no ``band_cut`` in their JSON, and load with None."""
    band = {"action": "swap", "metric_band": ["gas_gwei", "upper"]}
    a = Claim(band, "outcome:negative_rate", "higher", 0.6, 0.3, 40, band_cut=31.2)
    b = Claim(band, "outcome:negative_rate", "higher", 0.7, 0.3, 50, band_cut=29.0)
    assert a.key == b.key
    assert a.to_dict()["band_cut"] == 31.2 and Claim.from_dict(a.to_dict()) == a
    stored = {key: value for key, value in a.to_dict().items() if key != "band_cut"}
    assert Claim.from_dict(stored).band_cut is None
    assert "band_cut" not in Claim({"regime": "bull"}, "metric:pnl", "lower", 1, 2, 3).to_dict()


def test_uuid7_ids_are_time_ordered() -> None:
    ids = [new_id(1_000 + i) for i in range(50)]
    assert ids == sorted(ids)
    assert all(is_uuid(i) for i in ids)
    assert id_time_ms(ids[7]) == 1_007
    assert not is_uuid("not-a-uuid") and not is_uuid(5)


def test_uuid7_ids_of_one_millisecond_sort_in_creation_order() -> None:
    """A frozen or replayed clock makes many ids in one millisecond: they must sort in the
    order they were made (readers order "oldest first" by (time, id)), not at random."""
    same = [new_id(2_000) for _ in range(500)]
    assert same == sorted(same) and len(set(same)) == 500
    assert {id_time_ms(i) for i in same} == {2_000}
    # interleaved with another millisecond (an entry dated in the past between two episodes)
    mixed = [new_id(t) for t in (3_000, 2_500, 3_000, 2_500, 3_000)]
    assert mixed[0] < mixed[2] < mixed[4] and mixed[1] < mixed[3] < mixed[0]
    assert [id_time_ms(i) for i in mixed] == [3_000, 2_500, 3_000, 2_500, 3_000]
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122
               for i in [*same, *mixed])
