"""``at``: a retrieval as of a past instant never returns anything recorded after it.

Recorded means written to memory (an episode's UUIDv7 time, an entry's
``created_at``), not the time an episode says it happened: a backfilled
episode with an old ``timestamp`` was still unknown before it was written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from grimoire.clock import FrozenClock
from tests.retrieval.retrieve_support import HOUR, ids, open_grimoire, put_entry

WORDS = ["gas", "swap", "revert", "pool", "bridge", "mint", "oracle", "fee"]

op = st.tuples(
    st.sampled_from(["episode", "backfill", "entry", "link"]),
    st.integers(min_value=0, max_value=90),  # minutes to advance first
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=4),
)


# No shrinking phase: every example opens real stores, and a shrink ran for minutes.
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(ops=st.lists(op, min_size=3, max_size=9),
       cuts=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=3),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_at_never_returns_later_records(ops: list[tuple[str, int, list[str]]],
                                        cuts: list[float], query: list[str]) -> None:
    clock = FrozenClock()
    start = clock.now
    recorded: dict[str, int] = {}
    with open_grimoire(Path(tempfile.mkdtemp()), clock) as g:
        for n, (kind, minutes, words) in enumerate(ops):
            clock.advance(minutes * 60_000 + 1)
            text = " ".join(words) + f" #{n}"
            if kind == "entry":
                recorded[put_entry(g, text).id] = clock.now
            elif kind == "link" and len(recorded) >= 2:
                found = [e for i in recorded if (e := g.context.episodes.get(i)) is not None]
                found.sort(key=lambda e: (e.timestamp, recorded[e.id]))
                if len(found) >= 2:  # the link itself is recorded now: later than both
                    g.causal_link(cause_id=found[0].id, effect_id=found[-1].id)
            else:
                params = {"text": text}
                if kind == "backfill":  # happened long ago, learned only now
                    params["timestamp"] = start - 10 * HOUR
                recorded[g.episode_write(**params)["id"]] = clock.now
        end = clock.now
        for cut in cuts:
            at = start + int(cut * (end - start))
            known = [i for i, t in recorded.items() if t <= at]
            for event in [None, *known[:1]]:
                result = g.retrieve(query=" ".join(query), at=at, mode="browse", k=20,
                                    event_id=event)
                assert all(recorded[i] <= at for i in ids(result)), (at, ids(result))
                chain = result.get("causal_chain", {}).get("chain", [])
                assert all(recorded[link["id"]] <= at for link in chain)
