"""The one exception tree of Grimoire.

Every error Grimoire raises on purpose is a ``GrimoireError``. Library errors
(apsw, lmdb, lancedb, pyarrow) are converted at the store boundary with
``raise … from exc`` so callers never need to know which backend failed::

    GrimoireError
    ├── ConfigError            bad or unknown configuration key / value
    ├── ValidationError        bad input (field named); nothing was written
    ├── NotFoundError          no such episode / entry / triple / retrieval
    ├── StoreError             a backend failed (I/O, corruption, lock)
    │   ├── SchemaVersionError store written by a newer version of Grimoire
    │   └── EmbeddingMismatchError store built with another embedding model
    ├── EmbedderError          the embedding model could not be loaded or run
    ├── NotAvailableError      a method whose machinery is not configured/built
    ├── BusyError              the writer queue is full; retry later
    ├── LLMError               the optional LLM endpoint failed
    ├── ScopeDeniedError       the socket peer may not use that scope (access.scopes)
    └── ProtocolError          malformed JSON-RPC traffic

``code`` is the JSON-RPC error code the server answers with.
"""

from __future__ import annotations

__all__ = [
    "BusyError",
    "ConfigError",
    "EmbedderError",
    "EmbeddingMismatchError",
    "GrimoireError",
    "LLMError",
    "NotAvailableError",
    "NotFoundError",
    "ProtocolError",
    "SchemaVersionError",
    "ScopeDeniedError",
    "StoreError",
    "ValidationError",
]


class GrimoireError(Exception):
    """Base of every error Grimoire raises on purpose."""

    code: int = -32000


class ConfigError(GrimoireError):
    """A configuration file, key or value is wrong."""

    code = -32001


class ValidationError(GrimoireError, ValueError):
    """Input failed validation. ``field`` names the offending field; nothing was written."""

    code = -32602

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class NotFoundError(GrimoireError, KeyError):
    """The requested episode, entry, triple or retrieval does not exist."""

    code = -32004

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


class StoreError(GrimoireError):
    """A storage backend failed."""

    code = -32010


class SchemaVersionError(StoreError):
    """The store was written by a newer Grimoire than this one."""

    code = -32011


class EmbeddingMismatchError(StoreError):
    """The store was built with a different embedding model or dimension."""

    code = -32012


class EmbedderError(GrimoireError):
    """The embedding model could not be loaded or failed to run."""

    code = -32020


class NotAvailableError(GrimoireError):
    """The method exists but its machinery is not available in this build or config."""

    code = -32030


class BusyError(GrimoireError):
    """The writer is saturated; the request was not accepted and may be retried."""

    code = -32040


class LLMError(GrimoireError):
    """The optional LLM endpoint failed (timeout, HTTP error, bad answer)."""

    code = -32050


class ScopeDeniedError(GrimoireError):
    """The socket peer's uid may not use the scope it asked for (``access.scopes``)."""

    code = -32060


class ProtocolError(GrimoireError):
    """Malformed JSON-RPC traffic."""

    code = -32600
