"""Entries: round trip, update, archive, lists, claim look-up, BM25, counts, bad input."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grimoire.errors import NotFoundError, StoreError, ValidationError
from grimoire.records import (
    PAD,
    Category,
    Claim,
    DecayClass,
    EntrySource,
    EntryStatus,
    Provenance,
    Regime,
)
from grimoire.stores.semantic.codec import ENTRY_COLUMNS
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.semantic.types import EntryFilter
from tests.stores.semantic.test_semantic_support import (
    DIM,
    clock,
    dump,
    fts_in_sync,
    hash_store,
    make_entry,
    open_store,
    rng,
    store,
    unit,
)

__all__ = ["clock", "rng", "store"]  # fixtures

_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda s: s.strip() != "")
_ids = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
                max_size=3).map(tuple)
_unit_float = st.floats(0.0, 1.0, allow_nan=False)
_ms = st.integers(0, 2**53)
_claims = st.builds(
    Claim,
    condition=st.dictionaries(st.text(min_size=1, max_size=8),
                              st.one_of(st.integers(-5, 5), st.text(max_size=5),
                                        st.lists(st.integers(0, 23), max_size=2)),
                              max_size=3),
    target=_text, direction=st.sampled_from(["higher", "lower"]),
    effect=st.floats(-1e6, 1e6), baseline=st.floats(-1e6, 1e6), support=st.integers(0, 1000),
    p_value=_unit_float, strategy=st.none() | _text,
    band_cut=st.none() | st.floats(-1e6, 1e6),
)
_entries = st.builds(
    make_entry,
    category=st.sampled_from(Category), content=_text, confidence=_unit_float,
    quality_score=_unit_float, decay_class=st.sampled_from(DecayClass),
    provenance=st.sampled_from(Provenance), created_at=_ms, last_accessed_at=_ms,
    validated_count=st.integers(0, 10**6), contradicted_count=st.integers(0, 10**6),
    market_regime=st.none() | st.sampled_from(Regime), parent_episode_ids=_ids, tags=_ids,
    source=st.builds(EntrySource, golem_id=_text,
                     generation_number=st.none() | st.integers(0, 100),
                     owner_address=st.none() | _text),
    emotional_tag=st.none() | st.builds(PAD, st.floats(-1, 1), st.floats(-1, 1),
                                        st.floats(-1, 1)),
    strength=st.floats(0.001, 100), status=st.sampled_from(EntryStatus),
    consecutive_low_confidence=st.integers(0, 10), access_count=st.integers(0, 10**6),
    strategy=st.none() | _text, is_bloodstain=st.booleans(), dream_validated=st.booleans(),
    claim=st.none() | _claims, parent_entry_ids=_ids, updated_at=_ms,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=_entries)
def test_any_valid_entry_round_trips_exactly(store: SemanticStore, entry: Any) -> None:
    """What is inserted is what get returns, field for field, whatever its status."""
    store.insert_entry(entry, np.ones(DIM, np.float32))
    assert store.get_entry(entry.id) == entry
    if entry.claim is not None:
        hit = store.find_by_claim_key(entry.claim.key, EntryFilter(statuses=tuple(EntryStatus)))
        # The examples share one store: an earlier entry may hold a claim with the same key
        # (same condition, target and direction, other numbers), and the lookup may name it.
        assert hit is not None and hit.claim is not None and hit.claim.key == entry.claim.key
        if hit.id == entry.id:
            assert hit.claim == entry.claim


def test_embedding_is_stored_normalised(store: SemanticStore) -> None:
    entry = make_entry()
    store.insert_entry(entry, np.full(DIM, 3.0))
    stored = store.get_embedding(entry.id)
    assert stored is not None and stored.dtype == np.float32
    assert np.allclose(stored, np.full(DIM, 1 / math.sqrt(DIM)))
    assert store.get_embedding("nope") is None
    assert store.get_entry("nope") is None


def test_update_replaces_the_record_and_optionally_the_vector(
    store: SemanticStore, rng: np.random.Generator
) -> None:
    entry = make_entry()
    v1, v2 = unit(rng), unit(rng)
    store.insert_entry(entry, v1)
    changed = dataclasses.replace(entry, confidence=0.9, content="slippage spikes above 50 bps",
                                  tags=("gas",), updated_at=entry.updated_at + 5)
    store.update_entry(changed)
    assert store.get_entry(entry.id) == changed
    assert np.allclose(store.get_embedding(entry.id), v1)  # type: ignore[arg-type]
    store.update_entry(changed, v2)
    assert np.allclose(store.get_embedding(entry.id), v2)  # type: ignore[arg-type]
    assert [e.id for e, _ in store.bm25("slippage", 5)] == [entry.id]
    assert store.bm25("cheap", 5) == []  # the old content left the full-text index
    assert fts_in_sync(store._db.path)


def test_the_entries_mark_moves_with_entries_and_not_with_logs(
        store: SemanticStore, rng: np.random.Generator) -> None:
    """What is derived from entries alone (the active rules) stays valid across commits
    that wrote only a retrieval's log; any insert, update or delete of an entry moves it."""
    entry = make_entry()
    store.insert_entry(entry, unit(rng))
    first = store.entries_mark()
    store.log_retrieval("r1", query="gas", mode="deciding", items=[{"id": entry.id}])
    assert store.entries_mark() == first  # data_version moved; the entries did not
    assert store.read_mark() is not None
    store.update_entry(dataclasses.replace(entry, confidence=0.9))
    second = store.entries_mark()
    assert second is not None and second != first
    with store.transaction():
        assert store.entries_mark() is None  # the writer's own uncommitted rows
    store.bump_entry_access([entry.id])  # a served entry's count: no reader of rules shows it
    assert store.entries_mark() == second
    other = make_entry()
    store.insert_entry(other, unit(rng))
    third = store.entries_mark()
    assert third is not None and third != second
    (sql,) = store._db.read().execute(
        "SELECT sql FROM sqlite_master WHERE name = 'entries_version_update'").fetchone()
    watched = sql[sql.index("UPDATE OF") + len("UPDATE OF"):sql.index(" ON ")]
    assert {c.strip() for c in watched.split(",")} == set(ENTRY_COLUMNS) - {"access_count"}


def test_update_of_an_unknown_entry_is_not_found(store: SemanticStore) -> None:
    with pytest.raises(NotFoundError):
        store.update_entry(make_entry())
    assert store.counts().total == 0


def test_archived_entries_stay_readable_but_leave_default_queries(
    store: SemanticStore, rng: np.random.Generator, clock: Any
) -> None:
    keep, gone = make_entry(content="gas cheap at night"), make_entry(content="gas cheap at dawn")
    store.insert_entry(keep, unit(rng))
    vec = unit(rng)
    store.insert_entry(gone, vec)
    archived = store.archive(gone.id, now=clock() + 10)
    assert archived.status is EntryStatus.ARCHIVED and archived.updated_at == clock() + 10
    assert store.get_entry(gone.id) == archived
    assert [e.id for e in store.list_entries()] == [keep.id]
    assert gone.id not in {e.id for e, _ in store.knn(vec, 5)}
    assert gone.id not in {e.id for e, _ in store.knn(vec, 5, source="vec0")}
    assert {e.id for e, _ in store.bm25("gas", 5)} == {keep.id}
    everything = EntryFilter(statuses=tuple(EntryStatus))
    assert store.knn(vec, 1, everything)[0][0].id == gone.id
    assert {e.id for e, _ in store.bm25("gas", 5, everything)} == {keep.id, gone.id}
    with pytest.raises(NotFoundError):
        store.archive("missing")


def test_list_filters_and_orders(store: SemanticStore, rng: np.random.Generator) -> None:
    a = make_entry(category=Category.WARNING, confidence=0.9, strategy="eth-dca",
                   created_at=1)
    b = make_entry(category=Category.WARNING, confidence=0.5, created_at=3)
    c = make_entry(category=Category.HEURISTIC, confidence=0.7, strategy="lp",
                   market_regime=Regime.BULL, created_at=2)
    d = make_entry(category=Category.HEURISTIC, status=EntryStatus.CANDIDATE, confidence=0.2,
                   created_at=4)
    for e in (a, b, c, d):
        store.insert_entry(e, unit(rng))
    ids = lambda es: [e.id for e in es]  # noqa: E731
    assert ids(store.list_entries()) == [a.id, c.id, b.id, d.id]
    assert ids(store.list_entries(order="created_at")) == [d.id, b.id, c.id, a.id]
    assert ids(store.list_entries(limit=2)) == [a.id, c.id]
    assert ids(store.list_entries(limit=2, offset=2)) == [b.id, d.id]
    assert ids(store.list_entries(EntryFilter(categories=("warning",)))) == [a.id, b.id]
    assert ids(store.list_entries(EntryFilter(statuses=("candidate",)))) == [d.id]
    assert ids(store.list_entries(EntryFilter.for_strategy("eth-dca"))) == [a.id, b.id, d.id]
    assert ids(store.list_entries(EntryFilter.for_strategy("eth-dca", include_global=False))) == [
        a.id]
    assert ids(store.list_entries(EntryFilter.for_strategy(None))) == [b.id, d.id]
    assert ids(store.list_entries(EntryFilter(regimes=(Regime.BULL,)))) == [c.id]
    assert ids(store.list_entries(EntryFilter(regimes=(None,)))) == [a.id, b.id, d.id]
    assert store.list_entries(EntryFilter(categories=())) == []
    with pytest.raises(ValidationError, match="categories"):
        EntryFilter(categories=("nonsense",))
    with pytest.raises(ValidationError, match="order"):
        store.list_entries(order="random")  # type: ignore[arg-type]


def test_find_by_claim_key_prefers_the_live_entry(store: SemanticStore,
                                                  rng: np.random.Generator) -> None:
    claim = Claim({"hour_window": [2, 4]}, "metric:gas_gwei", "lower", 12.0, 30.0, 9)
    old = make_entry(claim=claim, updated_at=5)
    store.insert_entry(old, unit(rng))
    store.archive(old.id, now=6)
    assert store.find_by_claim_key(claim.key) is None
    new = make_entry(claim=claim, updated_at=7)
    store.insert_entry(new, unit(rng))
    found = store.find_by_claim_key(claim.key)
    assert found is not None and found.id == new.id
    assert store.find_by_claim_key("*|{}|x|higher") is None


@pytest.mark.parametrize("query", [
    'gas "cheap', "gas AND OR NOT", "NEAR(gas cheap)", "gas*", "content:gas", "(((", "^gas",
    "-gas", "'; DROP TABLE grimoire_entries; --", "\x00gas", "gas\u200bcheap", "",
    "   ", "***", "ガス",
])
def test_bm25_accepts_any_text_safely(store: SemanticStore, rng: np.random.Generator,
                                      query: str) -> None:
    store.insert_entry(make_entry(content="gas is cheap at night"), unit(rng))
    result = store.bm25(query, 5)
    assert all(score > 0 for _, score in result)
    if "gas" in query.lower() and "\x00" not in query:
        assert len(result) == 1
    assert store.counts().total == 1


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=60))
def test_bm25_never_raises_on_arbitrary_text(store: SemanticStore, query: str) -> None:
    store.bm25(query, 3)


def test_bm25_ranks_and_filters(tmp_path: Path) -> None:
    store, embedder = hash_store(tmp_path / "s.sqlite")
    texts = {
        "gas": "gas fees are lowest between 02:00 and 04:00 UTC on weekdays",
        "gas2": "gas gas gas: batching swaps saves gas",
        "slip": "slippage on WETH/USDC exceeds 50 bps in high volatility",
    }
    made = {}
    for key, text in texts.items():
        cat = Category.WARNING if key == "slip" else Category.INSIGHT
        made[key] = make_entry(content=text, category=cat)
        store.insert_entry(made[key], embedder.embed([text])[0])
    ranked = [e.id for e, _ in store.bm25("gas", 5)]
    assert ranked == [made["gas2"].id, made["gas"].id]
    assert [e.id for e, _ in store.bm25("swapping gas", 1)] == [made["gas2"].id]  # porter
    assert [e.id for e, _ in store.bm25("slippage gas", 5, EntryFilter(categories=("warning",)))
            ] == [made["slip"].id]
    assert store.bm25("gas", 0) == []
    store.close()


def test_counts_per_category_and_status(store: SemanticStore, rng: np.random.Generator) -> None:
    store.insert_entry(make_entry(category=Category.WARNING), unit(rng))
    store.insert_entry(make_entry(category=Category.WARNING, status=EntryStatus.CANDIDATE),
                       unit(rng))
    store.insert_entry(make_entry(), unit(rng))
    counts = store.counts()
    assert counts.total == 3
    assert counts.by_category == {"warning": 2, "insight": 1}
    assert counts.by_status == {"active": 2, "candidate": 1}
    assert counts.by_category_status["warning"] == {"active": 1, "candidate": 1}
    assert counts.to_dict()["total"] == 3


_BAD: list[tuple[str, dict[str, Any], Any]] = [
    ("confidence", {"confidence": 1.5}, None),
    ("confidence", {"confidence": -0.1}, None),
    ("confidence", {"confidence": math.nan}, None),
    ("quality_score", {"quality_score": math.inf}, None),
    ("category", {"category": "rumour"}, None),
    ("status", {"status": "deleted"}, None),
    ("market_regime", {"market_regime": "moon"}, None),
    ("content", {"content": "   "}, None),
    ("content", {"content": None}, None),
    ("id", {"id": ""}, None),
    ("strength", {"strength": 0.0}, None),
    ("created_at", {"created_at": None}, None),
    ("access_count", {"access_count": -1}, None),
    ("tags", {"tags": "gas"}, None),
    ("valid_until", {"valid_from": 10, "valid_until": 5}, None),
    ("is_bloodstain", {"is_bloodstain": 1}, None),
    ("claim.direction", {"claim": Claim({}, "t", "sideways", 1.0, 1.0, 3)}, None),
    ("claim", {"claim": Claim({"x": {1, 2}}, "t", "lower", 1.0, 1.0, 3)}, None),
    ("claim.band_cut", {"claim": Claim({}, "t", "lower", 1.0, 1.0, 3, band_cut=math.nan)}, None),
    ("embedding", {}, np.ones(DIM + 1)),
    ("embedding", {}, np.full(DIM, np.nan)),
    ("embedding", {}, np.zeros(DIM)),
    ("embedding", {}, "not a vector"),
]


@pytest.mark.parametrize(("field", "overrides", "vector"), _BAD)
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    store: SemanticStore, rng: np.random.Generator, field: str, overrides: dict[str, Any],
    vector: Any,
) -> None:
    existing = make_entry()
    store.insert_entry(existing, unit(rng))
    before = dump(store._db.path)
    bad = make_entry(**overrides)
    with pytest.raises(ValidationError) as info:
        store.insert_entry(bad, unit(rng) if vector is None else vector)
    assert info.value.field == field
    if field != "id":  # the same bad value as an update of the existing entry
        with pytest.raises(ValidationError):
            store.update_entry(dataclasses.replace(bad, id=existing.id),
                               None if vector is None else vector)
    assert dump(store._db.path) == before
    assert store.get_entry(existing.id) == existing
    assert [e.id for e, _ in store.knn(unit(rng), 5)] == [existing.id]


def test_duplicate_id_is_refused_and_the_original_kept(store: SemanticStore,
                                                       rng: np.random.Generator) -> None:
    entry = make_entry()
    store.insert_entry(entry, unit(rng))
    before = dump(store._db.path)
    with pytest.raises(ValidationError, match="already exists") as info:
        store.insert_entry(dataclasses.replace(entry, content="other"), unit(rng))
    assert info.value.field == "id"
    assert dump(store._db.path) == before


def test_not_an_entry_is_refused(store: SemanticStore) -> None:
    with pytest.raises(ValidationError, match="GrimoireEntry"):
        store.insert_entry({"id": "x"}, np.ones(DIM))  # type: ignore[arg-type]


def test_transaction_batches_writes_and_rolls_back_all_of_them(
    store: SemanticStore, rng: np.random.Generator
) -> None:
    kept = [make_entry() for _ in range(3)]
    with store.transaction():
        for e in kept:
            store.insert_entry(e, unit(rng))
        # Inside the batch the writer sees its own uncommitted entries, KNN included.
        assert store.get_entry(kept[0].id) == kept[0]
        assert len(store.knn(unit(rng), 10)) == 3
    lost = make_entry()
    with pytest.raises(RuntimeError), store.transaction():
        store.insert_entry(lost, unit(rng))
        store.archive(kept[0].id)
        raise RuntimeError("abort the batch")
    assert store.get_entry(lost.id) is None
    assert store.get_entry(kept[0].id) == kept[0]
    assert {e.id for e, _ in store.knn(unit(rng), 10)} == {e.id for e in kept}
    assert {e.id for e, _ in store.knn(unit(rng), 10, source="vec0")} == {e.id for e in kept}


def test_a_failed_write_inside_a_batch_undoes_only_itself(store: SemanticStore,
                                                          rng: np.random.Generator) -> None:
    first, second = make_entry(), make_entry()
    with store.transaction():
        store.insert_entry(first, unit(rng))
        with pytest.raises(ValidationError):
            store.insert_entry(first, unit(rng))  # duplicate
        store.insert_entry(second, unit(rng))
    assert store.counts().total == 2


def test_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.sqlite")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_entry("x")
    with pytest.raises(StoreError, match="closed"):
        store.insert_entry(make_entry(), np.ones(DIM))


def test_every_entry_field_has_a_column() -> None:
    """A field added to GrimoireEntry must get a column (and a migration), not be dropped."""
    from grimoire.records import GrimoireEntry
    from grimoire.stores.semantic.codec import ENTRY_COLUMNS

    fields = [f.name for f in dataclasses.fields(GrimoireEntry)]
    assert [c for c in ENTRY_COLUMNS if c != "claim_key"] == fields


def test_events_are_logged_with_stable_names(tmp_path: Path, rng: np.random.Generator) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        store = open_store(tmp_path / "s.sqlite")
        entry = make_entry()
        store.insert_entry(entry, unit(rng))
        store.archive(entry.id)
        store.close()
    events = [e["event"] for e in logs]
    migrations = [e for e in events if e == "semantic.migrate"]
    assert migrations and events == [*migrations, "semantic.open", "semantic.archive"]
    opened = logs[len(migrations)]
    assert opened["model"] == "test-model" and opened["dim"] == DIM


def test_a_failing_mirror_is_dropped_and_reads_fall_back_to_vec0(
    store: SemanticStore, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mirror is derived data: if updating it fails after a commit, the write stands
    and KNN keeps answering from vec0."""
    first, second = make_entry(), make_entry()
    store.insert_entry(first, unit(rng))
    assert store._cache is not None

    def broken(ops: object) -> None:
        raise MemoryError("no room for the mirror")

    monkeypatch.setattr(store._cache, "apply", broken)
    v = unit(rng)
    store.insert_entry(second, v)
    assert store._cache is None
    assert store.get_entry(second.id) == second
    assert store.knn(v, 1)[0][0] == second


def test_limit_and_offset_validation(store: SemanticStore, rng: np.random.Generator) -> None:
    for _ in range(3):
        store.insert_entry(make_entry(), unit(rng))
    assert len(store.list_entries(limit=None, offset=5000)) == 0
    with pytest.raises(ValidationError, match="limit"):
        store.list_entries(limit=-1)
    with pytest.raises(ValidationError, match="offset"):
        store.list_entries(offset=-1)


def test_public_surface() -> None:
    """The store's public methods are the documented API, nothing more."""
    public = {name for name in dir(SemanticStore) if not name.startswith("_")}
    assert public == {
        "open", "close", "transaction", "insert_entry", "update_entry", "archive",
        "get_entry", "get_embedding", "list_entries", "find_by_claim_key", "knn", "bm25",
        "counts", "quarantine", "get_quarantine", "list_quarantine", "release_quarantine",
        "reject_quarantine", "upsert_edge", "get_edge", "edges_from", "edges_to",
        "list_edges", "causal_bfs", "log_admission", "list_admissions", "admission_counts",
        "log_retrieval", "get_retrieval", "set_retrieval_outcome", "retrieval_counts",
        "prune_logs", "add_curator_delta", "list_curator_deltas",
        "record_evidence", "list_evidence", "count_evidence", "episode_states",
        "get_episode_state", "set_episode_state", "mark_consolidated", "touch_episodes",
        "get_meta", "set_meta",
        # entity mentions and the retrieval pipeline's incremental reads (migration 2)
        "add_mentions", "mentions_of", "max_entry_rid", "entries_after", "entry_vectors",
        "bump_entry_access",
        # the retrieval pipeline's cached reads: row versions for its entry cache, batch get
        "knn_versions", "get_entries",
        # the learners' read of asserted causal edges into a window of episodes
        "edges_into",
        # history for grimoire report: PLAYBOOK.md's listings per cycle, retrieval latencies
        "record_playbook_listing", "playbook_listings", "playbook_cycles", "retrieval_series",
        # opened with read_only=True (a reader beside the daemon)
        "read_only",
        # causal edges earn their place: bounded fan-in, uses, pruning of unused edges
        "bound_fan_in", "mark_edges_used", "prune_unused_edges",
        # the curator's pooled judging: when a claim's evidence was last counted
        "last_evidence_at",
        # forget: what cites or quotes an episode, and erasing it for good
        "rows_referencing", "entries_quoting", "entries_citing", "scrub", "erase",
        # an LLM's cause judgement drops the auto-linked causes it rejected
        "delete_edges",
        # the owner's tables print each id's shortest prefix unique in the store (issue 27)
        "short_ids",
        # the curator's sentences phase merges the full-text index's segments (issue 24)
        "merge_text_index",
        # callers keep what they read between commits (rules.applicable's active rules)
        "read_mark",
        # ... and what they derived from entries alone across commits that wrote only logs
        "entries_mark",
    }


def test_short_ids_are_unique_in_the_whole_store(store: SemanticStore,
                                                 rng: np.random.Generator) -> None:
    """Issue 27: entries made in one millisecond share their first 13 characters (UUIDv7);
    each id's prefix is lengthened past its neighbours', never below the minimum."""
    from grimoire.ids import new_id

    made = [new_id(1_767_225_600_000) for _ in range(40)]  # one millisecond
    for id_ in made:
        store.insert_entry(make_entry(id=id_, content=f"note {id_}"), unit(rng))
    alone = new_id(1_767_225_900_000)
    store.insert_entry(make_entry(id=alone, content="alone"), unit(rng))
    shorts = store.short_ids([*made[:5], alone], 8)
    assert shorts[alone] == alone[:8]
    every = [*made, alone]
    for id_, short in shorts.items():
        assert (id_.startswith(short) and len(short) > 13) or id_ == alone
        assert [e for e in every if e.startswith(short)] == [id_]


def test_evidence_counts_each_episode_once_per_entry(store: SemanticStore) -> None:
    """Issue 11: an episode is evidence for an entry at most once, whatever the verdict."""
    assert store.record_evidence("e1", ["a", "b", "a"], "confirm", cycle=1, now=10) == ["a", "b"]
    assert store.record_evidence("e1", ["b", "c"], "contradict", cycle=2, now=20) == ["c"]
    assert store.record_evidence("e2", ["a"], "confirm", cycle=2, now=20) == ["a"]
    assert store.count_evidence("e1") == (2, 1)
    assert [r[:2] for r in store.list_evidence("e1")] == [
        ("a", "confirm"), ("b", "confirm"), ("c", "contradict")]
    with pytest.raises(ValidationError):
        store.record_evidence("e1", ["d"], "maybe", cycle=3, now=30)
    assert store.count_evidence("e1") == (2, 1)


def index_pages(path: Path) -> int:
    """Pages of the entries' full-text index (rows of its data table), read beside the store."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute("SELECT count(*) FROM entries_fts_data").fetchone()[0])
    finally:
        conn.close()


def test_merging_the_text_index_keeps_every_answer_and_reads_fewer_pages(tmp_path: Path
                                                                         ) -> None:
    path = tmp_path / "s.sqlite"
    store, embedder = hash_store(path)
    words = ["gas", "swap", "bridge", "slippage", "oracle", "regime", "volume", "spread"]
    made = []
    for i in range(60):  # one transaction each, as the curator's writes are
        text = f"{words[i % 8]} {words[(i * 3) % 8]} note {i}"
        made.append(make_entry(content=text))
        store.insert_entry(made[-1], embedder.embed([text])[0])
    for i, entry in enumerate(made):  # a cycle re-stating every sentence
        text = f"{entry.content} restated {words[(i * 5) % 8]}"
        store.update_entry(dataclasses.replace(entry, content=text), embedder.embed([text])[0])
    queries = ["gas oracle", "swap volume spread", "restated bridge", "note 17"]
    before = [[(e.id, round(s, 9)) for e, s in store.bm25(q, 20)] for q in queries]
    pages = index_pages(path)
    store.merge_text_index()
    merged = index_pages(path)
    assert merged < pages
    assert [[(e.id, round(s, 9)) for e, s in store.bm25(q, 20)] for q in queries] == before
    store.merge_text_index()  # one segment already: nothing to do
    assert index_pages(path) == merged
    store.close()
