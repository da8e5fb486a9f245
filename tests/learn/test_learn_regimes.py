"""Actions written without a regime are learned in the regime their moment's record names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curator.claims.regimes import placed, with_market_regimes
from curator.learn.hook import distill, strategy_window
from grimoire.clock import MS_PER_DAY, FrozenClock
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType, Regime
from tests.learn.learn_support import MINUTE, T0, entries, open_grimoire, write

NOW = T0 + 3 * MS_PER_DAY


def _episode(i: int, ts: int, kind: EpisodeType, regime: Regime | None) -> Episode:
    return Episode(id=f"e{i}", text=f"e{i}", type=kind, timestamp=ts, regime=regime)


def test_an_unlabelled_action_takes_the_newest_label_at_or_before_it_within_the_gap() -> None:
    obs = [_episode(0, T0, EpisodeType.OBSERVATION, Regime.HIGH_VOL),
           _episode(1, T0 + 10 * MINUTE, EpisodeType.OBSERVATION, Regime.SIDEWAYS)]
    acts = [_episode(2, T0 + 5 * MINUTE, EpisodeType.ACTION, None),  # after high_vol's label
            _episode(3, T0 + 10 * MINUTE, EpisodeType.ACTION, None),  # same moment: sideways
            _episode(4, T0 - MINUTE, EpisodeType.ACTION, None),  # only a later label: none
            _episode(5, T0 + 90 * MINUTE, EpisodeType.ACTION, None),  # label too old: none
            _episode(6, T0 + 5 * MINUTE, EpisodeType.ACTION, Regime.BULL)]  # keeps its own
    out = placed(acts, obs, 60 * MINUTE)
    assert [e.regime for e in out] == [Regime.HIGH_VOL, Regime.SIDEWAYS, None, None,
                                       Regime.BULL]
    assert [e.id for e in out] == [e.id for e in acts]
    assert all(e.regime is None for e in acts[:4])  # the episodes given are not changed
    assert [e.regime for e in placed(acts, obs, 0)] == [None, None, None, None, Regime.BULL]


def test_the_newest_labels_vote_back_to_the_newest_regime_shift() -> None:
    obs, bull, side = EpisodeType.OBSERVATION, Regime.BULL, Regime.SIDEWAYS
    labels = [_episode(0, T0, obs, bull), _episode(1, T0 + MINUTE, obs, bull),
              _episode(2, T0 + 2 * MINUTE, obs, Regime.CRISIS),  # one estimate wrong
              _episode(3, T0 + 3 * MINUTE, obs, bull),
              _episode(4, T0 + 4 * MINUTE, obs, Regime.BEAR)]  # and another
    act = _episode(9, T0 + 4 * MINUTE, EpisodeType.ACTION, None)
    assert placed([act], labels, 60 * MINUTE, votes=5)[0].regime is bull  # 3 of 5
    assert placed([act], labels, 60 * MINUTE)[0].regime is Regime.BEAR  # the newest alone
    # a shift announces a new market: what came before it does not vote
    shifted = [*labels[:3], _episode(5, T0 + 3 * MINUTE, EpisodeType.REGIME_SHIFT, side),
               _episode(6, T0 + 4 * MINUTE, obs, side)]
    assert placed([act], shifted, 60 * MINUTE, votes=5)[0].regime is side
    # a tie goes to the newest of the tied; labels older than the gap do not vote
    tied = [_episode(0, T0, obs, bull), _episode(1, T0 + MINUTE, obs, side)]
    later = _episode(9, T0 + MINUTE, EpisodeType.ACTION, None)
    assert placed([later], tied, 60 * MINUTE, votes=5)[0].regime is side
    old = [_episode(0, T0, obs, bull), _episode(1, T0 + MINUTE, obs, bull),
           _episode(2, T0 + 50 * MINUTE, obs, side)]
    late = _episode(9, T0 + 61 * MINUTE, EpisodeType.ACTION, None)
    assert placed([late], old, 60 * MINUTE, votes=5)[0].regime is side
    with pytest.raises(ValueError, match="votes"):
        placed([act], labels, 60 * MINUTE, votes=0)


def test_votes_place_fewer_actions_wrongly_under_noisy_labels() -> None:
    """Labels 15% wrong, scattered over the other regimes; regimes that last ~40 labels."""
    rng = np.random.default_rng(7)
    regimes = list(Regime)
    true, labels, acts, trues = Regime.SIDEWAYS, [], [], []
    truth: dict[str, Regime] = {}
    for i in range(4000):
        ts = T0 + i * MINUTE
        if rng.random() < 0.025:
            true = regimes[int(rng.integers(len(regimes)))]
        said = true if rng.random() >= 0.15 else \
            [r for r in regimes if r is not true][int(rng.integers(len(regimes) - 1))]
        labels.append(_episode(i, ts, EpisodeType.OBSERVATION, said))
        trues.append(true)
        if i % 3 == 0:
            acts.append(_episode(10_000 + i, ts, EpisodeType.ACTION, None))
            truth[acts[-1].id] = true

    def wrong(votes: int) -> float:
        out = placed(acts, labels, 60 * MINUTE, votes=votes)
        return sum(e.regime is not truth[e.id] for e in out) / len(out)

    assert wrong(1) > 0.10 and wrong(5) < wrong(1) / 3
    # the same market labelled right: a vote would lag every change; the newest label places
    clean = [_episode(i, e.timestamp, EpisodeType.OBSERVATION, regime)
             for i, (e, regime) in enumerate(zip(labels, trues, strict=True))]
    assert placed(acts, clean, 60 * MINUTE, votes=5) == placed(acts, clean, 60 * MINUTE)


def _stream(seed: int) -> list[dict[str, Any]]:
    """Two days: observations every 5 minutes labelled with the market's regime (high_vol in
    alternate 3-hour stretches, else sideways), and LP rebalances that carry no regime and
    lose 90% of the time in high_vol, 20% otherwise."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for i in range(2 * 24 * 12):
        ts = T0 + i * 5 * MINUTE
        regime = "high_vol" if (i // 36) % 2 else "sideways"
        out.append({"type": "observation", "text": f"market {i}", "timestamp": ts,
                    "regime": regime, "metrics": {"gas_gwei": float(rng.lognormal(3, 0.1))}})
        if i % 2 == 0:
            lose = rng.random() < (0.9 if regime == "high_vol" else 0.2)
            out.append({"type": "action", "text": f"rebalance {i}", "timestamp": ts,
                        "strategy": "lp", "actions": ["rebalance"], "tool": "uniswap_v3",
                        "outcome": "negative" if lose else "positive"})
    return out


def _regime_claims(tmp_path: Path, embedder: HashEmbedder, gap_ms: int) -> list[Any]:
    g = open_grimoire(tmp_path, FrozenClock(NOW), embedder,
                      changes={"distiller.regime_context_ms": gap_ms})
    try:
        write(g, _stream(3))
        distill(g.context, "lp", NOW)
        return [e.claim for e in entries(g) if e.claim is not None
                and e.claim.condition.get("regime") == "high_vol"]
    finally:
        g.close()


def test_a_regime_effect_on_unlabelled_actions_is_learned_from_the_observations(
        tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    """The rebalances name no regime; the observations of the same moments do. The learner
    reads each rebalance in its moment's regime and finds that they lose in high_vol; with
    no placement (regime_context_ms 0) no claim can name a regime at all."""
    found = _regime_claims(tmp_path / "placed", hash_embedder, 3_600_000)
    assert any(c.condition.get("action") == "rebalance"
               and ((c.target == "outcome:negative_rate") == (c.direction == "higher"))
               for c in found), found
    assert _regime_claims(tmp_path / "bare", hash_embedder, 0) == []


def test_an_action_is_placed_once_then_only_new_actions_are_read_around(
        tmp_path: Path, hash_embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner reads the same window run after run: the labels around an action are
    read from the store the first time only; a new action reads around itself alone."""
    g = open_grimoire(tmp_path, FrozenClock(NOW), hash_embedder)
    try:
        write(g, _stream(4))
        ctx = g.context
        window = strategy_window(ctx, "lp", 10_000)
        first = with_market_regimes(ctx, window)
        assert all(e.regime is not None for e in first)
        reads: list[dict[str, Any]] = []
        recent = ctx.episodes.recent

        def spy(n: int, **kwargs: Any) -> list[Episode]:
            reads.append(kwargs)
            return recent(n, **kwargs)

        monkeypatch.setattr(ctx.episodes, "recent", spy)
        assert [e.regime for e in with_market_regimes(ctx, window)] == \
            [e.regime for e in first]
        assert reads == []
        late = T0 + 2 * MS_PER_DAY + 5 * MINUTE
        # three new labels of five: the market turned bull (the voting placement)
        write(g, [*({"type": "observation", "text": f"market late {m}",
                     "timestamp": late - m * MINUTE, "regime": "bull"} for m in range(3)),
                  {"type": "action", "text": "rebalance late", "timestamp": late,
                   "strategy": "lp", "actions": ["rebalance"], "outcome": "positive"}])
        monkeypatch.setattr(ctx.episodes, "recent", recent)
        window = strategy_window(ctx, "lp", 10_000)
        monkeypatch.setattr(ctx.episodes, "recent", spy)
        placed_now = with_market_regimes(ctx, window)
        assert placed_now[-1].regime is Regime.BULL
        assert len(reads) == 1 and reads[0]["since"] == late - 3_600_000
    finally:
        g.close()


def test_an_action_s_own_label_is_its_newest_vote() -> None:
    obs, bear, side = EpisodeType.OBSERVATION, Regime.BEAR, Regime.SIDEWAYS
    said = [side, side, Regime.BULL, side, side]  # labels wrong now and then: a vote pays
    market = [_episode(i, T0 + (i - 1) * MINUTE, obs, r) for i, r in enumerate(said)]
    stray = _episode(9, T0 + 3 * MINUTE, EpisodeType.ACTION, bear)  # a wrong estimate
    sure = _episode(8, T0 + 3 * MINUTE, EpisodeType.ACTION, side)
    out = placed([stray, sure], market, 60 * MINUTE, votes=5)
    assert [e.regime for e in out] == [side, side]
    assert stray.regime is bear  # the episode given is not changed
    assert placed([stray], market, 60 * MINUTE)[0].regime is bear  # votes 1: its own
    # its own label and the market's agree, or no market label: its own
    assert placed([stray], [], 60 * MINUTE, votes=5)[0].regime is bear
    turned = [*market[:3], _episode(5, T0 + 2 * MINUTE, EpisodeType.REGIME_SHIFT, bear),
              _episode(6, T0 + 3 * MINUTE, obs, bear)]
    assert placed([stray], turned, 60 * MINUTE, votes=5)[0].regime is bear
    # where the market's labels are right, an action keeps its own: no vote
    clean = [_episode(i, T0 + (i - 1) * MINUTE, obs, side) for i in range(5)]
    assert placed([stray], clean, 60 * MINUTE, votes=5)[0].regime is bear


def test_the_held_out_check_counts_as_the_vote_itself_does() -> None:
    """``_vote_predicts_better`` (all labels at once) agrees with ``_vote`` asked per label,
    over labels with regime shifts, gaps older than the context and noise."""
    from curator.claims.regimes import _vote, _vote_predicts_better

    rng = np.random.default_rng(3)
    regimes = list(Regime)
    outcomes: set[bool] = set()
    for trial in range(40):
        noise, gap = [0.0, 0.1, 0.3][trial % 3], int(rng.integers(2, 12)) * MINUTE
        marks: dict[tuple[int, str], tuple[Regime, bool]] = {}
        ts, true = T0, regimes[0]
        for i in range(int(rng.integers(2, 120))):
            ts += int(rng.integers(1, 8)) * MINUTE
            shift = rng.random() < 0.05
            if shift or rng.random() < 0.03:
                true = regimes[int(rng.integers(len(regimes)))]
            said = true if rng.random() >= noise else regimes[int(rng.integers(len(regimes)))]
            marks[(ts, f"m{i}")] = (true if shift else said, shift)
        keys = sorted(marks)
        times = [t for t, _ in keys]
        for votes in (2, 3, 5):
            by_vote = by_newest = 0
            for i in range(1, len(keys)):
                said = marks[keys[i]][0]
                if times[i - 1] < times[i] - gap:
                    continue
                by_newest += marks[keys[i - 1]][0] is said
                by_vote += _vote(marks, keys, times, i - 1, times[i] - gap, votes, None) is said
            expected = by_vote > by_newest
            outcomes.add(expected)
            assert _vote_predicts_better(marks, keys, times, gap, votes) == expected
    assert outcomes == {True, False}  # both answers were checked
