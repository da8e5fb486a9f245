"""Grimoire: a local, offline memory daemon for an autonomous agent.

The public surface is the ``Grimoire`` facade, the records, the error tree and
the embedders (``__all__``). ``Grimoire`` is imported lazily so that light
users of the package (records, config, the client) do not pay for LanceDB.
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Grimoire", "__version__"]

if TYPE_CHECKING:
    from grimoire.grimoire import Grimoire


def __getattr__(name: str) -> Any:
    if name == "Grimoire":
        from grimoire.grimoire import Grimoire

        return Grimoire
    raise AttributeError(f"module 'grimoire' has no attribute {name!r}")



def _silent_by_default() -> None:
    # A library prints nothing unless the host configures logging: our stdlib loggers get
    # a NullHandler here; structlog is routed to them when the facade is imported
    # (grimoire.logs.library_logging), so light imports do not pay for structlog.
    import logging

    for name in ("grimoire", "curator", "playbook"):
        logging.getLogger(name).addHandler(logging.NullHandler())


_silent_by_default()
