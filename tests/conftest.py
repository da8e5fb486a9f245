"""Shared fixtures: a frozen clock, the deterministic test embedder, the real model once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grimoire.clock import FrozenClock
from grimoire.models.embedders import FastEmbedEmbedder, HashEmbedder


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder(dim=384)


@pytest.fixture(scope="session")
def real_embedder() -> Iterator[FastEmbedEmbedder]:
    """The bundled offline model, loaded once per test session (about 1.5 s)."""
    yield FastEmbedEmbedder()
