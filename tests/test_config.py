"""Config: every SPEC constant has a default and help; YAML and env override; bad keys fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire.config import Config, config_items, load_config
from grimoire.errors import ConfigError


def test_defaults_are_the_spec_numbers() -> None:
    c = Config()
    assert c.retrieval.weights == {
        "rrf": 0.30, "confidence": 0.25, "quality": 0.20, "recency": 0.15, "regime": 0.10
    }
    assert c.decay.upvote == 0.10 and c.decay.downvote == 0.15
    assert c.admission.skip_similarity == 0.95 and c.admission.merge_similarity == 0.90
    assert c.curator.every_ticks == 50 and c.daemon.tick_seconds is None
    assert c.retrieval.rrf_k == 60 and c.retrieval.mmr_lambda == 0.7


def test_every_setting_has_help() -> None:
    items = list(config_items(Config()))
    assert len(items) > 80
    missing = [key for key, _, help_text in items if not help_text]
    assert missing == []


def test_yaml_then_env_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("data_dir: /srv/g\ndaemon:\n  speed: 5\nretrieval:\n  rrf_k: 30\n")
    c = load_config(path, env={"GRIMOIRE_DAEMON__SPEED": "50", "OTHER": "x"},
                    overrides={"retrieval.mmr_lambda": 0.5})
    assert c.data_dir == "/srv/g"
    assert c.daemon.speed == 50.0
    assert c.retrieval.rrf_k == 30 and c.retrieval.mmr_lambda == 0.5
    assert c.socket == Path("/srv/g/grimoire.sock")
    assert c.retrieval.weights["rrf"] == 0.30  # untouched siblings keep their defaults


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("daemon:\n  sped: 3\n", "unknown config key"),
        ("retrieval:\n  rrf_k: fast\n", "retrieval.rrf_k"),
        ("llm:\n  retries: 1.5\n", "llm.retries"),
        ("- a\n- b\n", "must hold a mapping"),
        ("daemon: [1\n", "not valid YAML"),
        ("retrieval:\n  learn_weights: maybe\n", "true or false"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_env_unknown_key_rejected() -> None:
    with pytest.raises(ConfigError, match="tick_secs"):
        load_config(env={"GRIMOIRE_DAEMON__TICK_SECS": "1"})


@pytest.mark.parametrize("key, value", [
    ("GRIMOIRE_DECAY__HALF_LIFE_DAYS", "{tactical: 0}"),
    ("GRIMOIRE_DECAY__WARNING_MULTIPLIER", "0"),
    ("GRIMOIRE_ADMISSION__RECENCY_HALF_LIFE_DAYS", "0"),
])
def test_a_zero_half_life_is_refused_by_the_cli(key: str, value: str) -> None:
    """Issue 27: a zero half-life was accepted (every entry decays to the floor at once);
    the installed grimoire refuses it with a configuration error naming the setting."""
    import subprocess
    import sys

    from tests.service.daemon_support import daemon_env

    grimoire = Path(sys.executable).parent / "grimoire"
    p = subprocess.run([str(grimoire), "config", "show"], capture_output=True, text=True,
                       env=daemon_env(**{key: value}), timeout=60)
    assert p.returncode == 2 and "must be a number > 0" in p.stderr, p.stderr
    assert key.removeprefix("GRIMOIRE_").lower().replace("__", ".") in p.stderr
    assert "Traceback" not in p.stderr
