"""The parser and ``main``: the one place where errors become messages and exit codes.

Exit codes: 0 done; 1 an error the user can act on (bad input, no daemon, a
data directory that cannot be used), with one line on stderr naming the
value or path; 2 bad configuration or arguments. No traceback reaches the
user for bad input or environment; a broken pipe (``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from grimoire import __version__
from grimoire.cli.commands import COMMANDS, methods_epilog
from grimoire.cli.common import refuse_unscoped
from grimoire.errors import ConfigError, GrimoireError, StoreError
from playbook.glossary import GLOSSARY

__all__ = ["GLOSSARY", "build_parser", "main"]

def _epilog() -> str:
    words = "\n".join(f"  {k:<12} {v}" for k, v in GLOSSARY.items())
    return f"{methods_epilog()}\n\nwords:\n{words}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grimoire",
        description="Grimoire: the local, offline memory daemon of an autonomous agent.",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"grimoire {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(sub)
    return parser


def _fail(message: str, code: int) -> int:
    print(f"grimoire: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    # OpenBLAS worker threads spin after each call and starve the daemon's other threads
    # (measured: SQLite reads 0.7-4 ms alone, 15-20 ms next to BLAS). numpy is first
    # imported below this line (by the daemon), so the setting takes effect.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = build_parser().parse_args(argv)
    try:
        refuse_unscoped(args)  # --scope where a command acts on the whole directory
        code: int = args.handler(args)
        return code
    except ConfigError as exc:
        return _fail(f"configuration error: {exc}", 2)
    except StoreError as exc:  # a damaged file among them: `grimoire check` names it
        return _fail(f"StoreError: {exc} (if a store file is damaged, `grimoire check --data "
                     "DIR` names it; README: Faults)", 1)
    except GrimoireError as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except BrokenPipeError:
        # The reader went away (`grimoire status --json | head`): end quietly; point stdout
        # at /dev/null so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # the environment: a path that cannot be read or written
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"{exc.strerror or exc}{where}", 1)
