"""Knowledge that outlives one process: backup/restore, export/import bundles, the Clade.

- ``backup`` / ``restore``: a consistent, verified snapshot of every store of a
  data directory, taken while a daemon serves writes (``snapshot.py`` reads the
  stores, ``manifest.py`` hashes and verifies).
- ``bundle`` / ``transfer``: export knowledge as a versioned JSONL bundle and import
  it through the admission gate at a provenance's discounted confidence.
- ``clade``: publish to / pull from one shared LanceDB table at a URI.
- ``testament`` / ``succession``: the death reflection (a final curator cycle and a
  verified bundle with lessons, generation and lifetime figures) and a successor started
  from it at generation + 1, its lessons' warnings as bloodstains.

Depends on the facade's context, the stores and the gate; nothing below depends on it.
"""
