"""Shared fixtures: a frozen clock, the deterministic test embedder, the real model once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from grimoire.clock import FrozenClock
from grimoire.models.embedders import FastEmbedEmbedder, HashEmbedder


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    """A CLI or MCP entry point run in-process configures structlog for its host (stderr,
    warnings only); a later test that captures info logs must not inherit that."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


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
