"""The pipeline's parts between the stores and the pure ranking functions, one job each.

``params`` (the validated request), ``sources`` (vector, BM25 and graph
candidates from the stores), ``terms`` (which words BM25 looks for),
``pool`` (candidates, backend ranks, causal ancestors), ``records``
(cached episode and entry records), ``region`` (the query's region),
``support`` (record times, PAD tags, caches), ``log`` and ``writes`` (the
retrieval log and access bookkeeping, written off the caller's path), and
``mentions`` (which episodes and entries name which entities: recorded after
each write, walked by the graph backend and ``hop``).

``grimoire.retrieval.pipeline`` runs them. Unlike the pure stage functions
one level up, these may read the stores (through the context) and the
clock; they must not import the methods, the service or the curator.
"""
