"""The curator's 50-tick cycle (SPEC §8): one module per group of phases.

``run`` (the cycle and its hook), ``state`` (the cycle's persisted state,
its episode window and how changes apply), and the phases: ``evidence``
(validate predictions, cross-reference causal links), ``learn`` (distil,
compress), ``promote`` (promote, parameterize), ``lifecycle`` (decay,
demote/prune, quarantine, compaction), ``summaries`` (hierarchical summaries,
regions), ``sentences`` (each entry's words re-stated from its current numbers).
Each phase reads a snapshot and applies short write transactions.
The rules the phases apply: ``transitions`` (promote, demote, prune: one entry
and its effective confidence in, a reason out) and ``derive`` (an insight
parameterised into a heuristic or warning), both pure and store-free, and
``rule_gate`` (the admission gate as it applies to a derived rule).

May import every other curator part, the stores, the gate and
the playbook compiler; nothing in ``curator`` below it imports this package.
"""
