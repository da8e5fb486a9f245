"""Factories and fixtures shared by the semantic-store tests (no tests here)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt
import pytest

from grimoire.clock import FrozenClock
from grimoire.models.embedders import HashEmbedder
from grimoire.records import (
    Category,
    DecayClass,
    EntryStatus,
    GrimoireEntry,
    Provenance,
)
from grimoire.stores.semantic.store import SemanticStore
from grimoire.stores.sqlite import connect

DIM = 32
MODEL = "test-model"
_counter = itertools.count(1)


def make_entry(**overrides: Any) -> GrimoireEntry:
    """A valid active insight; every field can be overridden."""
    n = next(_counter)
    base = GrimoireEntry(
        id=f"entry-{n:06d}",
        category=Category.INSIGHT,
        content=f"gas is cheap between 02:00 and 04:00 UTC (note {n})",
        confidence=0.6,
        quality_score=0.5,
        decay_class=DecayClass.TACTICAL,
        provenance=Provenance.SELF_LEARNED,
        created_at=1_767_225_600_000 + n,
        last_accessed_at=1_767_225_600_000 + n,
        status=EntryStatus.ACTIVE,
    )
    return dataclasses.replace(base, **overrides)


def unit(rng: np.random.Generator, dim: int = DIM) -> npt.NDArray[np.float32]:
    v = rng.normal(size=dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def open_store(path: Path, **kwargs: Any) -> SemanticStore:
    kwargs.setdefault("model_id", MODEL)
    kwargs.setdefault("dim", DIM)
    kwargs.setdefault("clock", FrozenClock())
    return SemanticStore.open(path, **kwargs)


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table that holds data, read through a separate connection.

    Used to show that a refused write left the store exactly as it was.
    """
    conn = connect(path, readonly=True)
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table, order in (
            ("grimoire_entries", "rid"), ("causal_edges", "id"), ("quarantined_entries",
                                                                  "entry_id"),
            ("admission_log", "id"), ("retrieval_log", "retrieval_id"),
            ("curator_deltas", "id"), ("episode_state", "episode_id"), ("meta", "key"),
        ):
            out[table] = [tuple(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
        out["entry_vectors"] = [
            tuple(r) for r in conn.execute(
                "SELECT rid, embedding, category, status, strategy, regime FROM entry_vectors "
                "ORDER BY rid")
        ]
        return out
    finally:
        conn.close()


def fts_in_sync(path: Path) -> bool:
    """FTS5's own check that the index matches grimoire_entries.content."""
    conn = connect(path)
    try:
        conn.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
        return True
    except apsw.CorruptError:
        return False
    finally:
        conn.close()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def store(tmp_path: Path, clock: FrozenClock) -> Iterator[SemanticStore]:
    with open_store(tmp_path / "semantic.sqlite", clock=clock) as s:
        yield s


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def hash_store(path: Path) -> tuple[SemanticStore, HashEmbedder]:
    """A 384-d store with the deterministic hash embedder, for text-level tests."""
    embedder = HashEmbedder(dim=384)
    return open_store(path, model_id=embedder.model_id, dim=384), embedder
