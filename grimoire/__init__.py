"""Grimoire: a local, offline memory daemon for an autonomous agent.

The public surface is the ``Grimoire`` facade, the records, the error tree and
the embedders (``__all__``). ``Grimoire`` is imported lazily so that light
users of the package (records, config, the client) do not pay for LanceDB.
"""

import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Grimoire", "__version__"]

# The stdlib convention for a library: nothing is printed, not even warnings, unless the
# host configures logging (grimoire.logs; the daemon does it for itself).
for _name in ("grimoire", "playbook"):  # curator/__init__ does the same for "curator"
    logging.getLogger(_name).addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from grimoire.grimoire import Grimoire


def __getattr__(name: str) -> Any:
    if name == "Grimoire":
        from grimoire.grimoire import Grimoire

        return Grimoire
    raise AttributeError(f"module 'grimoire' has no attribute {name!r}")
