"""The stores: episodic (LanceDB), semantic (SQLite), graph (LMDB).

Stores never import each other, retrieval or the curator; the facade composes them.
"""
