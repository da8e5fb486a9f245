"""Grimoire: a local, offline memory daemon for an autonomous agent.

The public surface is the ``Grimoire`` facade (``grimoire.grimoire``), the
records, the error tree and the embedders; everything else is internal.
"""

__version__ = "0.1.0"
