"""Frozen records and enums for every type of SPEC §2–3 (and §10 in ``graph``).

Records are frozen, slotted dataclasses changed with ``dataclasses.replace``.
They import nothing from Grimoire but the error tree: every other module may
import them, they import no other module.
"""

from grimoire.records.entry import PAD, Claim, EntrySource, GrimoireEntry
from grimoire.records.enums import (
    TOLD_PROVENANCE,
    Category,
    DecayClass,
    EntryStatus,
    EpisodeType,
    Importance,
    Outcome,
    Provenance,
    Regime,
    parse_enum,
    parse_optional_enum,
)
from grimoire.records.episode import Episode, episode_from_params

__all__ = [
    "PAD",
    "TOLD_PROVENANCE",
    "Category",
    "Claim",
    "DecayClass",
    "EntrySource",
    "EntryStatus",
    "Episode",
    "EpisodeType",
    "GrimoireEntry",
    "Importance",
    "Outcome",
    "Provenance",
    "Regime",
    "episode_from_params",
    "parse_enum",
    "parse_optional_enum",
]
