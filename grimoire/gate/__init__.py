"""The admission gate (SPEC §6): what may enter the semantic store, and how it enters.

- ``admission``: the gate itself: quality, duplicates and merges,
  contradiction, quarantine, the decision and its logged factors;
- ``quality``: the rule-based quality score of a candidate text;
- ``agreement``: how far a candidate agrees with or contradicts what is stored;
- ``decay``: what an admitted entry is worth over time (SPEC §4): initial confidence by
  provenance, half-lives per decay class, retention and effective confidence, votes,
  strength. Here because the gate sets the confidence an entry starts at and every
  later reader (the curator's decay phase, retrieval's confidence factor, the views)
  applies the same math to it;
- ``admit``: the admission path every candidate entry takes (``entry.add``, the
  distiller, causal discovery, imports, derived rules): the gate run on the writer
  thread and its decision applied to the semantic store.

All but ``admit`` are pure given their look-ups: callers pass the store reads in.
``admit`` reads and writes the semantic store through the context. May import records,
config, errors, clock, ids, logs, the context and the stores; must not import retrieval,
the methods or the curator.
"""
