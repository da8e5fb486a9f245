"""The episodic store (SPEC §1): every episode, append-only, in LanceDB with a durable journal.

``store`` is the public ``EpisodeStore``; the rest are its private parts, one job each:
``journal`` (the fsync'd write-ahead journal in SQLite), ``lance`` (the LanceDB table and
its compaction), ``index`` (the in-memory id/time/vector index and exact int8 search),
``quantized`` (the int8 codes), ``text`` (BM25 postings), ``schema`` (the row format and
its validation) and ``recovery`` (the open procedure: journal replay, read-only snapshots).

A package because these parts change together and nothing outside reads them but through
``store``. May import records, config, errors, clock, logs, ``grimoire.runtime`` and
``grimoire.stores.sqlite``; must not import the other stores, retrieval, the gate, the
methods or the curator.
"""
