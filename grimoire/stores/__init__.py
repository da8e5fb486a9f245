"""The stores (SPEC §1): episodic (LanceDB), semantic (SQLite), graph (LMDB), one package each.

``sqlite`` stays here, beside the packages, because two of them use it: the episodic
store's journal and the semantic store open SQLite through it.

``marker`` reads ``FEED.json``, the data directory's record of simulated or real memory.

Stores never import each other, retrieval or the curator; the facade composes them.
"""
