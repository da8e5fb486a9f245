"""What the owner reads of the curator's work: claims in words, and one entry's whole story.

- ``render``: the owner-readable sentence of every distilled claim (insights, warnings,
  heuristics, causal links, contradictions), deterministic, with its numbers;
- ``explain``: ``entry.explain``, where an entry came from and everything that happened
  to it, as data and as text;
- ``playbook``: which entries PLAYBOOK.md lists, and the file compiled from them (by the
  pure ``playbook`` package) and replaced atomically.

Wording over records and the stores' reads: no statistics, and no entry is changed
(``playbook`` writes only the file and its listing record). May import
records, config, the stores' read types, ``grimoire.gate.decay``, the distiller's
``operations`` and the playbook compiler; must not import ``grimoire.methods`` or
``curator.cycle``.
"""
