"""PLAYBOOK.md compiler: a pure function from entries to Markdown, and its atomic write.

Imports only ``grimoire.records`` (and the error tree records use). The
curator chooses the entries and their decayed confidence; this package lays
them out (``compile_playbook``) and replaces the file (``write_atomic``).
"""

from playbook.compiler import (
    FORMAT_VERSION,
    ConfidenceRule,
    compile_listing,
    compile_playbook,
    iso_utc,
    updated_line,
)
from playbook.io import write_atomic
from playbook.items import PlaybookItem

__all__ = ["FORMAT_VERSION", "ConfidenceRule", "PlaybookItem", "compile_listing",
           "compile_playbook", "iso_utc", "updated_line", "write_atomic"]
