"""The admission gate (SPEC §6): what may enter the semantic store, and how it enters.

- ``admission``: the gate itself: quality, duplicates and merges,
  contradiction, quarantine, the decision and its logged factors;
- ``quality``: the rule-based quality score of a candidate text;
- ``agreement``: how far a candidate agrees with or contradicts what is stored;
- ``decay``: what an admitted entry is worth over time (SPEC §4): initial confidence by
  provenance, half-lives per decay class, retention and effective confidence, votes,
  strength. Here because the gate sets the confidence an entry starts at and every
  later reader (the curator's decay phase, retrieval's confidence factor, the views)
  applies the same math to it.

Pure given their look-ups: callers pass the store reads in. May import
records, config and errors; must not import the stores' writers, retrieval,
the methods or the curator.
"""
