"""Every setting of Grimoire, declared once with its default and help (SPEC.md's numbers).

``load_config(path, env)`` is the only function that reads YAML or the
environment: YAML first, then ``GRIMOIRE_<SECTION>__<KEY>`` (or
``GRIMOIRE_<KEY>`` for top-level keys) overrides. Unknown keys are errors.
Nothing here runs at import time.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grimoire.config.sections import (
    AccessConfig,
    AdmissionConfig,
    CladeConfig,
    CuratorConfig,
    DaemonConfig,
    DecayConfig,
    DistillerConfig,
    DreamConfig,
    EmbeddingConfig,
    EpisodesConfig,
    LLMConfig,
    PlaybookConfig,
    PrivacyConfig,
    QualityConfig,
    RetrievalConfig,
    SuccessionConfig,
    opt,
)
from grimoire.errors import ConfigError

__all__ = ["AccessConfig", "AdmissionConfig", "CladeConfig", "Config", "CuratorConfig",
           "DaemonConfig",
           "DecayConfig", "DistillerConfig", "DreamConfig", "EmbeddingConfig",
           "EpisodesConfig", "LLMConfig", "PlaybookConfig", "PrivacyConfig", "QualityConfig",
           "RetrievalConfig", "SuccessionConfig", "config_items", "load_config", "opt"]


@dataclass(frozen=True)
class Config:
    data_dir: str = opt("./data/grimoire", "directory holding every store (a relative path "
                        "is resolved once when the daemon starts, and logged)")
    socket_path: str | None = opt(None, "Unix socket (None = <data_dir>/grimoire.sock)")
    log_level: str = opt("info", "debug | info | warning | error",
                         choices=("debug", "info", "warning", "error"))
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    episodes: EpisodesConfig = field(default_factory=EpisodesConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    distiller: DistillerConfig = field(default_factory=DistillerConfig)
    curator: CuratorConfig = field(default_factory=CuratorConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    playbook: PlaybookConfig = field(default_factory=PlaybookConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    clade: CladeConfig = field(default_factory=CladeConfig)
    succession: SuccessionConfig = field(default_factory=SuccessionConfig)
    dreams: DreamConfig = field(default_factory=DreamConfig)
    access: AccessConfig = field(default_factory=AccessConfig)

    @property
    def socket(self) -> Path:
        return Path(self.socket_path) if self.socket_path else Path(self.data_dir) / "grimoire.sock"

    @property
    def playbook_path(self) -> Path:
        if self.playbook.path:
            return Path(self.playbook.path)
        return Path(self.data_dir) / "PLAYBOOK.md"

    def replace(self, **changes: Any) -> Config:
        """A copy with top-level or dotted (``"daemon.speed"``) keys changed and validated."""
        config: Config = _build(Config, _merge(dataclasses.asdict(self), _undot(changes)), "")
        return config


def _undot(changes: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in changes.items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict) and key in _SECTIONS:
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_SECTIONS = frozenset(
    name for name, hint in typing.get_type_hints(Config).items() if dataclasses.is_dataclass(hint)
)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{where}[]") for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"1", "true", "yes", "on", "0", "false",
                                                         "no", "off"}:
            return value.lower() in {"1", "true", "yes", "on"}
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return str(value)
    raise ConfigError(f"{where}: unsupported type {hint!r}")


def _build(cls: type[Any], values: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - known
    if unknown:
        where = f" in [{prefix.rstrip('.')}]" if prefix else ""
        raise ConfigError(f"unknown config key(s){where}: {', '.join(sorted(unknown))}")
    meta = {f.name: f.metadata for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            kwargs[name] = _check(_coerce(value, hint, f"{prefix}{name}"), meta[name],
                                  f"{prefix}{name}")
    return cls(**kwargs)


def _check(value: Any, meta: Mapping[str, Any], where: str) -> Any:
    """The field's range and choices (see ``opt``), nested numbers included."""
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{where}: {value!r} is not one of: {', '.join(choices)}")
    positive = bool(meta.get("positive"))

    def walk(v: Any, at: str) -> None:
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, int | float):
            if not math.isfinite(v) or v < 0 or (positive and v == 0):
                need = "a number > 0" if positive else "a finite number >= 0"
                raise ConfigError(f"{at}: must be {need}, got {v!r}")
        elif isinstance(v, Mapping):
            for k, x in v.items():
                walk(x, f"{at}.{k}")
        elif isinstance(v, list):
            for x in v:
                walk(x, f"{at}[]")

    walk(value, where)
    return value


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """``GRIMOIRE_DAEMON__SPEED=10`` → ``{"daemon": {"speed": "10"}}`` (YAML-parsed values)."""
    out: dict[str, Any] = {}
    reserved = {"GRIMOIRE_LLM_API_KEY", "GRIMOIRE_CONFIG"}
    for key, raw in env.items():
        if not key.startswith("GRIMOIRE_") or key in reserved:
            continue
        path = key[len("GRIMOIRE_"):].lower().split("__")
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from defaults, a YAML file, ``GRIMOIRE_*`` env vars and overrides."""
    values: dict[str, Any] = dataclasses.asdict(Config())
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if loaded is not None:
            if not isinstance(loaded, Mapping):
                raise ConfigError(f"config file {path} must hold a mapping")
            values = _merge(values, loaded)
    if env:
        values = _merge(values, _env_overrides(env))
    if overrides:
        values = _merge(values, _undot(overrides))
    config: Config = _build(Config, values, "")
    return config


def config_items(config: Config) -> Iterator[tuple[str, Any, str]]:
    """(dotted key, value, help) for every setting, in declaration order."""

    def walk(obj: Any, prefix: str) -> Iterator[tuple[str, Any, str]]:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                yield from walk(value, f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}", value, f.metadata.get("help", "")

    return walk(config, "")
