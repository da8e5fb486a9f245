"""The project's own promises about set-up: README's test command is what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip().startswith("python3 -m venv .venv")]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    main, tests = _commands(setup)
    assert re.search(r"grimoire run --feed sim --data data/demo\b", main)
    assert "pytest" in tests and "'.[test]'" in tests
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in _commands(ci), "CI must run README's test command verbatim"
