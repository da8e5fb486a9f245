"""The ``grimoire`` command (console script ``grimoire.cli:main``).

- ``app``      the parser, ``main`` and the one place errors become messages;
- ``commands`` every subcommand: one ``register`` line each in ``COMMANDS``
  (a command is a function that adds its parser and sets its handler);
- ``access``   a read reaches the daemon over its socket when one listens,
  else opens the data directory itself (``Grimoire.open(read_only=True)``);
- ``render``   the short human views; ``--json`` prints the machine form;
- ``probe``    what a data directory shows without opening it: ``health``'s answer
  when no daemon runs (exit 3), the hint toward ``data/demo`` for the owner's reads.
"""

from grimoire.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
