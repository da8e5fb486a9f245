"""Hierarchical summaries (seed 002): L1 cluster summaries, L2 chapters, MUS pruning.

``summaries`` (the drafts, utility score and prune rule), ``summary_text``
(their wording), ``episode_clusters`` (coherent clusters of episodes) and
``kmeans`` (the clustering it uses). Pure given episodes and vectors; the
cycle's ``summaries`` phase writes the results. May import records and
config; must not import the stores, the methods or ``curator.cycle``.
"""
