"""The knowledge graph that fills itself (SPEC §13 "the graph fills itself", seed 004
"Graph Maintenance" sources 1 and 2): facts read from episodes, relations found in them.

- ``facts``: pure. An episode's structured fields and the entities its text names become
  facts: a pair's tokens, the venue (protocol, chain, pair) an action used, an oracle
  feed a text names with its pair. The predicates are listed there (``PREDICATES``).
- ``cooccur``: pure. Consolidation-time co-occurrence: the entities whose episodes keep
  occurring together within a short window, with their evidence and lift, and the
  relations that stopped holding.

The curator's ``graph`` phase (``curator.cycle.graph``) writes both into the graph store
each cycle, on the data's own time. May import records and ``grimoire.retrieval.stages
.mentions`` (one reading of what an episode names); must not touch a store.
"""
