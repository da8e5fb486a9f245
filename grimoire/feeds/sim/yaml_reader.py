"""Typed look-ups into a parsed YAML document for the simulator's scenario loader.

Each look-up checks one value and, on a problem, raises a ``ConfigError`` that
names the source file and the dotted key (``regularities[1].hours``) and says
what was expected. Knows nothing of scenarios beyond regimes and hours; builds
no records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from typing import Any

from grimoire.errors import ConfigError
from grimoire.records.enums import Regime

__all__ = ["YamlReader"]


class YamlReader:
    """Typed look-ups into the raw YAML that raise ConfigError naming the dotted key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"scenario {self.source}: {key or '(top level)'}: {message}")

    def mapping(self, value: Any, key: str, allowed: Set[str], required: Set[str] = frozenset()
                ) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {value!r}")
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            where = f"{key}." if key else ""
            raise self.fail(f"{where}{unknown[0]}",
                            f"unknown key (allowed: {', '.join(sorted(allowed))})")
        missing = sorted(required - set(value))
        if missing:
            raise self.fail(f"{key}.{missing[0]}" if key else missing[0], "is required")
        return value

    def number(self, value: Any, key: str, lo: float | None = None, hi: float | None = None,
               *, strict_lo: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                value):
            hint = " (YAML reads 2.5e6 as text: write 2.5e+6 or 2500000)" if isinstance(
                value, str) else ""
            raise self.fail(key, f"expected a finite number, got {value!r}{hint}")
        if lo is not None and (value < lo or (strict_lo and value == lo)):
            raise self.fail(key, f"must be {'>' if strict_lo else '>='} {lo}, got {value!r}")
        if hi is not None and value > hi:
            raise self.fail(key, f"must be <= {hi}, got {value!r}")
        return float(value)

    def prob(self, value: Any, key: str) -> float:
        return self.number(value, key, 0.0, 1.0)

    def integer(self, value: Any, key: str, lo: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise self.fail(key, f"expected an integer >= {lo}, got {value!r}")
        return value

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return value

    def regime(self, value: Any, key: str, within: tuple[Regime, ...] | None = None) -> Regime:
        allowed = within or tuple(Regime)
        if not isinstance(value, str) or value not in {r.value for r in allowed}:
            names = ", ".join(r.value for r in allowed)
            raise self.fail(key, f"{value!r} is not a regime of this scenario (one of: {names})")
        return Regime(value)

    def hours(self, value: Any, key: str) -> tuple[int, int]:
        if (not isinstance(value, list | tuple) or len(value) != 2
                or any(isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= 24
                       for h in value)
                or value[0] % 24 == value[1] % 24):
            raise self.fail(key, f"expected [start, end) as two different integer UTC hours "
                                 f"0..24, got {value!r}")
        return int(value[0]) % 24, int(value[1]) % 24

    def pair_range(self, value: Any, key: str, *, integer: bool = False) -> tuple[float, float]:
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise self.fail(key, f"expected [low, high], got {value!r}")

        def read(v: Any, k: str) -> float:
            return float(self.integer(v, k, 1)) if integer else self.number(v, k, 0.0,
                                                                            strict_lo=True)

        lo, hi = read(value[0], f"{key}[0]"), read(value[1], f"{key}[1]")
        if hi < lo:
            raise self.fail(key, f"low {value[0]!r} is above high {value[1]!r}")
        return lo, hi

    def weights(self, value: Any, key: str) -> tuple[tuple[str, float], ...]:
        if not isinstance(value, Mapping) or not value:
            raise self.fail(key, f"expected a non-empty mapping of name: weight, got {value!r}")
        return tuple((self.text(k, f"{key}"), self.number(w, f"{key}.{k}", 0.0, strict_lo=True))
                     for k, w in value.items())

    def template(self, value: Any, key: str, fields: Mapping[str, object]) -> str:
        text = self.text(value, key)
        try:
            text.format_map(fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise self.fail(key, f"bad template ({exc!r}); usable fields: "
                                 f"{', '.join('{' + f + '}' for f in fields)}") from None
        return text
