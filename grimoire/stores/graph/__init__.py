"""The knowledge graph store (SPEC §10): bi-temporal triples on LMDB.

``store`` is the public ``GraphStore``; its parts: ``env`` (the LMDB environment and its
sub-databases), ``codec`` (keys and values on disk), ``versions`` (superseded versions of
a triple), ``adjacency`` (the in-memory neighbour index) and ``traverse`` (multi-hop walks).

A package because the on-disk format (``codec``) and every reader and writer of it change
together. May import records, errors, clock and logs; must not import the other stores,
retrieval, the gate, the methods or the curator.
"""
