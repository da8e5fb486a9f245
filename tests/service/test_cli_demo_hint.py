"""Right after the README's demo (which writes ``data/demo``), an owner command without
``--data`` says that the default directory holds nothing and ``data/demo`` does, instead of
"the curator has not run yet"; the README's owner commands carry ``--data``. Through the
installed ``grimoire``."""

from __future__ import annotations

from pathlib import Path

from grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from tests.service.daemon_support import REPO
from tests.service.test_cli_errors import assert_clear, cli


def _demo(cwd: Path) -> None:
    with Grimoire.open(cwd / "data" / "demo", embedder=HashEmbedder()) as g:
        g.episode_write(text="gas hit 80 gwei", type="action", outcome="negative")
        g.curator_run()
    assert (cwd / "data" / "demo" / "PLAYBOOK.md").exists()


def test_owner_commands_without_data_point_at_the_demo(tmp_path: Path) -> None:
    _demo(tmp_path)
    for args in (["playbook"], ["status"], ["explain", "0192ab3c"]):
        proc = cli(*args, cwd=tmp_path)
        assert_clear(proc, 1, "default data directory", "data/demo", "--data data/demo")
        assert "curator writes it on its first cycle" not in proc.stderr
    assert not (tmp_path / "data" / "grimoire").exists()
    # an empty store in the default directory is no memory either
    Grimoire.open(tmp_path / "data" / "grimoire", embedder=HashEmbedder()).close()
    assert_clear(cli("playbook", cwd=tmp_path), 1, "no daemon has run on", "--data data/demo")
    # with --data, the demo's own playbook
    proc = cli("playbook", "--data", "data/demo", cwd=tmp_path)
    assert proc.returncode == 0 and "# PLAYBOOK" in proc.stdout


def test_a_missing_directory_is_not_diagnosed_as_a_curator_that_has_not_run(
        tmp_path: Path) -> None:
    proc = cli("playbook", "--data", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert_clear(proc, 1, "does not exist", "--data DIR")
    assert "first cycle" not in proc.stderr


def test_the_readme_owner_commands_give_the_data_directory() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The owner's commands", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in section.splitlines()
                if line.strip().startswith("grimoire ")]
    assert len(commands) >= 5
    assert all("--data" in c for c in commands), commands
