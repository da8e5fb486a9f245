"""The domain's words, one line each: ``grimoire --help`` lists them all, and PLAYBOOK.md's
header explains those that appear in the file (so an owner never meets a word unexplained).

Pure data and one pure function; imports nothing from Grimoire.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["GLOSSARY", "PLAYBOOK_WORDS", "words_used"]

GLOSSARY: dict[str, str] = {
    "episode": "one thing that happened, as the agent wrote it (raw memory)",
    "entry": "a piece of knowledge distilled from episodes: warning, heuristic, insight…",
    "curator": "the periodic cycle that validates, promotes, decays and retires entries",
    "PLAYBOOK.md": "the curator's summary of what the agent has learned, for agent and owner",
    "regime": "the market's state when something happened (bull, high_vol, crisis…)",
    "bloodstain": "a warning from a predecessor's testament (its costliest failures): paid "
                  "for by a death, so it decays 3x slower, ranks 1.2x higher, is never pruned",
    "testament": "what an agent leaves at its death (grimoire testament): its active "
                 "knowledge, causal graph, lessons, generation and lifetime figures",
    "generation": "0 for an original agent; a successor started from a testament is its "
                  "predecessor's + 1",
    "clade": "the agent's sibling agents; what they share starts at a discounted confidence",
    "predecessor": "an earlier generation of this agent; what it left is inherited, discounted",
    "replicant": "a copy of this agent running a trial; its reports count as its own",
    "styx": "the shared knowledge service; a predecessor's death bundle comes through it",
    "lethe": "Styx's public commons; entries from there are trusted least",
    "dream": "replay without a model while the heartbeat is idle: a rule re-judged on older "
             "episodes it was not found on, and on what happened without the action it is "
             "about; confirmed, it decays 2x slower (dreams.enabled, off by default)",
    "TCMF": "temporal-causal memory fusion: retrieval boosts items causally linked to the query",
    "Mattar-Daw": "replay choice by expected learning value (Mattar & Daw 2018)",
    "seed 00N": "the design documents Grimoire implements (000 TCMF … 004 the main spec)",
}

# (The discounts themselves are configuration, decay.provenance_weight: never printed here.)

# The words PLAYBOOK.md may print without its preamble explaining them already; each with
# the forms in which a line can show it.
PLAYBOOK_WORDS: dict[str, tuple[str, ...]] = {
    "bloodstain": ("bloodstain",),
    "clade": ("clade",),
    "replicant": ("replicant",),
    "styx": ("styx",),
    "lethe": ("lethe",),
    "dream": ("dreamt", "dream"),
}


def words_used(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(word, meaning) for each of ``PLAYBOOK_WORDS`` that appears in ``lines``, in order."""
    text = "\n".join(lines).lower()
    found = []
    for word, forms in PLAYBOOK_WORDS.items():
        if any(re.search(rf"\b{re.escape(form)}\b", text) for form in forms):
            found.append((word, GLOSSARY[word]))
    return found
