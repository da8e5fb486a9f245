"""The parts of the top-level benchmarks: each module here is one part of a ``scripts/bench_*.py``.

A top-level script measures one concern; its detail parts live here and are reached with
``--part NAME`` (``bench_stores.py --part episodes``, ``bench_speed.py --part memory``,
``bench_curator.py --part pure``). Every other argument goes to the part unchanged, so each
part keeps its own options (``--part NAME --help`` lists them). The modules are not run on
their own: the top-level script puts ``scripts/`` on ``sys.path`` (it is the script's folder)
and imports them as ``benches.NAME``.

Three helpers are shared: :func:`dispatch` (the ``--part`` switch), :func:`apply_quick`
(``--quick``: smaller sizes for every option left at its default) and :func:`json_settings`
(``--set KEY=JSON`` config overrides).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Main = Callable[[Sequence[str] | None], object]


def dispatch(script: str, parts: Mapping[str, str | Main],
             argv: Sequence[str] | None = None) -> int:
    """Run the part ``--part NAME`` names (the first one when absent) with the other arguments.

    A part is a ``main(argv)`` callable or the name of a module under ``benches`` that has one
    (imported only when chosen, so a part never pays for another's imports).
    """
    names = list(parts)
    parser = argparse.ArgumentParser(prog=script, add_help=False, allow_abbrev=False)
    parser.add_argument("--part", choices=names, default=names[0])
    args, rest = parser.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(f"{script} [--part {{{','.join(names)}}}] (default: {names[0]}); the options "
              f"below are the part's\n")
    target = parts[args.part]
    main: Main = importlib.import_module(target).main if isinstance(target, str) else target
    sys.argv[0] = f"{script} --part {args.part}"  # the part's usage line names its switch
    result = main(rest)
    return result if isinstance(result, int) else 0


def apply_quick(parser: argparse.ArgumentParser, args: argparse.Namespace,
                sizes: Mapping[str, Any]) -> None:
    """``--quick``: each option in ``sizes`` the caller left at its default takes the small
    value; an option given on the command line keeps the caller's value."""
    for name, value in sizes.items():
        if getattr(args, name) == parser.get_default(name):
            setattr(args, name, value)


def json_settings(items: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=JSON`` arguments as config overrides (``{"retrieval.mmr_lambda": 1.0}``);
    an argument without ``=`` or with a value that is not JSON stops the run, naming it."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set wants KEY=JSON, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--set {key.strip()}: the value is not JSON ({exc})") from None
    return out
