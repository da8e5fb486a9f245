"""The semantic store (SPEC §1, §3): knowledge entries in SQLite (apsw + sqlite-vec + FTS5).

``store`` is the public ``SemanticStore``; ``base`` holds the tables it shares with its
parts; the parts, one job each: ``entries`` (entries, quarantine, cold storage),
``vectors`` (the vec0 table and its numpy mirror for KNN), ``causal`` (causal edges and
their walks), ``evidence`` (the distinct episodes each entry was judged on), ``history``
(what happened to an entry), ``logs`` (admission, retrieval and curator logs),
``mentions`` (entity mentions), ``codec`` (rows ↔ records), ``schema`` (tables and
migrations) and ``types`` (the filters and result records callers pass and get).

A package because these modules share one database and change together. May import
records, config, errors, clock, logs and ``grimoire.stores.sqlite``; must not import the
other stores, retrieval, the gate, the methods or the curator.
"""
