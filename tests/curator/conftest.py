"""The curator tests' shared fixture: ``g``, a real Grimoire in ``tmp_path`` (frozen clock,
hash embedder). A module that needs other settings defines its own ``g``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from tests.curator.test_curator_support import grimoire_at


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    yield from grimoire_at(tmp_path, clock)
