"""Hierarchical summaries (seed 002): L1 cluster summaries, L2 chapters, MUS pruning.

``summaries`` (the drafts, utility score and prune rule), ``summary_text``
(their wording), ``episode_clusters`` (coherent clusters of episodes) and
``kmeans`` (the clustering it uses), and ``regions`` (the region MDP fitted on
episode embeddings with the same clustering; its read side is
``grimoire.retrieval.regions``). Pure given episodes and vectors; the
cycle's ``summaries`` phase writes the results. May import records, config
and ``grimoire.retrieval.regions``; must not import the stores, the methods or ``curator.cycle``.
"""
