"""Grimoire: a local, offline memory daemon for an autonomous agent.

The public surface is the ``Grimoire`` facade, the records, the error tree and
the embedders (``__all__``). ``Grimoire`` is imported lazily so that light
users of the package (records, config, the client) do not pay for LanceDB.
"""

import logging
import os
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Grimoire", "__version__"]

# The stdlib convention for a library: nothing is printed, not even warnings, unless the
# host configures logging (grimoire.logs; the daemon does it for itself).
for _name in ("grimoire", "playbook"):  # curator/__init__ does the same for "curator"
    logging.getLogger(_name).addHandler(logging.NullHandler())
# LanceDB's Rust core logs to stderr on its own (k-means on duplicate-heavy vectors: "empty
# clusters"; scanner deprecations), outside Python's logging. Its filter is read from
# LANCEDB_LOG when LanceDB is first imported: off unless the host asks for it (set
# LANCEDB_LOG=warn to see them). Every LanceDB import in the package comes after this one.
os.environ.setdefault("LANCEDB_LOG", "off")

if TYPE_CHECKING:
    from grimoire.grimoire import Grimoire


def __getattr__(name: str) -> Any:
    if name == "Grimoire":
        from grimoire.grimoire import Grimoire

        return Grimoire
    raise AttributeError(f"module 'grimoire' has no attribute {name!r}")
