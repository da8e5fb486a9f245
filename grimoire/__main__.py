"""``python -m grimoire``: the same command line as the ``grimoire`` console script."""

from __future__ import annotations

import sys

from grimoire.cli import main

if __name__ == "__main__":
    sys.exit(main())
