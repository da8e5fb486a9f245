"""Clear errors for bad input and a bad environment: a message naming the value and what to
do, an exit code, and never a traceback. CLI cases run the installed ``grimoire``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import ConfigError, StoreError, ValidationError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.api import suggest
from tests.service.daemon_support import ServerThread, raw_connect, rpc, short_dir

GRIMOIRE = shutil.which("grimoire") or str(Path(sys.executable).parent / "grimoire")


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "GRIMOIRE_EMBEDDING__MODEL": "hash-384", **(env or {})}
    return subprocess.run([GRIMOIRE, *args], capture_output=True, text=True, timeout=120,
                          env=full, cwd=cwd, check=False)


def assert_clear(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


@pytest.mark.parametrize(("make", "needle"), [
    (lambda p: p / "plain-file", "is a file, not a directory"),
    (lambda p: p / "plain-file" / "below", "part of its path is a file"),
    (lambda p: Path("/sys/grimoire-test"), "cannot be created"),
    (lambda p: Path("/sys"), "is not writable"),
])
def test_an_unusable_data_directory_is_named(tmp_path: Path, make: object, needle: str) -> None:
    (tmp_path / "plain-file").write_text("x")
    data = make(tmp_path)  # type: ignore[operator]
    assert_clear(cli("run", "--feed", "none", "--data", str(data)), 2, str(data), needle)
    with pytest.raises(ConfigError, match=needle):
        Grimoire.open(data, embedder=HashEmbedder())


@pytest.mark.parametrize(("args", "env", "needles"), [
    (["run", "--speed", "0", "--feed", "none"], {}, ["daemon.speed", "> 0"]),
    (["config", "show"], {"GRIMOIRE_LOG_LEVEL": "chatty"}, ["log_level", "'chatty'", "debug"]),
    (["config", "show"], {"GRIMOIRE_RETRIEVAL__MAX_TOKENS": "-5"},
     ["retrieval.max_tokens", "> 0"]),
    (["config", "show"], {"GRIMOIRE_DECAY__HALF_LIFE_DAYS": "{tactical: .nan}"},
     ["decay.half_life_days.tactical"]),
])
def test_bad_settings_are_refused_naming_the_key(tmp_path: Path, args: list[str],
                                                  env: dict[str, str], needles: list[str]) -> None:
    assert_clear(cli(*args, "--data", str(tmp_path / "d"), env=env), 2, *needles)


def test_a_bad_number_on_the_command_line_names_the_argument(tmp_path: Path) -> None:
    proc = cli("kg", "at", "token", "ETH", "notanumber", "--data", str(tmp_path))
    assert_clear(proc, 1, "block", "'notanumber'")


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    proc = subprocess.run(f"'{GRIMOIRE}' config show --json | head -c 10",
                          shell=True, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stderr == ""


def test_text_with_a_lone_surrogate_is_a_validation_error(tmp_path: Path) -> None:
    with Grimoire.open(tmp_path / "d", clock=FrozenClock(), embedder=HashEmbedder()) as g:
        with pytest.raises(ValidationError, match=r"unpaired surrogate U\+D800") as err:
            g.episode_write(text="gas \ud800 spike")
        assert err.value.field == "text"
        with pytest.raises(ValidationError, match="unpaired surrogate") as err:
            g.entry_add(category="warning", content="avoid \udfff swaps when gas is high")
        assert err.value.field == "content"
        with pytest.raises(ValidationError, match="unpaired surrogate") as err:
            g.retrieve(query="\ud83d alone")
        assert err.value.field == "query"
        assert g.context.episodes.count() == 0
        g.episode_write(text="a real emoji \U0001F600 is fine")


def test_a_second_opener_is_told_which_process_holds_the_directory(tmp_path: Path) -> None:
    with (Grimoire.open(tmp_path / "d", embedder=HashEmbedder()),
          pytest.raises(StoreError, match=f"in use by process {os.getpid()}")):
        Grimoire.open(tmp_path / "d", embedder=HashEmbedder())


@pytest.fixture
def served() -> Iterator[Path]:
    with short_dir() as root, Grimoire.open(root / "data", clock=FrozenClock(),
                                            embedder=HashEmbedder()) as g:
        st = ServerThread(g, root / "data" / "grimoire.sock", data_dir=root / "data").start()
        try:
            yield root / "data" / "grimoire.sock"
        finally:
            st.stop()


def test_a_mistyped_method_gets_a_suggestion(served: Path) -> None:
    assert suggest("episode.wrte") == "episode.write" and suggest("zzz") is None
    with raw_connect(served) as sock:
        reply = rpc(sock, "episode.wrte", {"text": "x"})
    assert reply["error"]["code"] == -32601
    assert reply["error"]["message"].endswith("did you mean episode.write?")
    assert reply["error"]["data"]["did_you_mean"] == "episode.write"


def test_call_help_lists_every_method_with_its_params() -> None:
    from grimoire.service.api import METHODS

    out = cli("call", "--help").stdout
    for spec in METHODS.values():
        assert spec.name in out and f"params {spec.params[:20]}" in out.replace("\n", " ")
