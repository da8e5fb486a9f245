"""A Grimoire in a tmp directory with the hash embedder, for the scope tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder


@pytest.fixture
def g(tmp_path: Path) -> Iterator[Grimoire]:
    with Grimoire.open(tmp_path / "data", clock=FrozenClock(), embedder=HashEmbedder()) as opened:
        yield opened
