"""The learned reranker (``retrieval.reranker``): features, the tree ensemble, the shipped model.

    pooled candidates + what the pipeline already computed (backend ranks and scores, the
    rerank and relevance breakdowns, the temporal window, the query's term weights)
      ─▶ ``features.matrix`` (one row per candidate: the pipeline's factors plus cheap
         query–text interaction features)
      ─▶ ``forest.Forest.predict`` (gradient-boosted trees evaluated in numpy)
      ─▶ a probability per candidate that it is evidence for the query

``model`` loads the weights shipped beside this file (``reranker.json``: the trees, the
feature names they were trained on, the calibrated "nothing relevant" floor and a record
of how they were trained: command, data, date, seed). They are trained by
``scripts/train_reranker.py`` with LightGBM; LightGBM is needed to train, never to
predict.

Pure: nothing here reads a store, a clock or the embedder (``stages.learned`` gathers
what the features need and applies the scores).
"""

from grimoire.retrieval.learned.features import FEATURES, QueryInfo, matrix
from grimoire.retrieval.learned.forest import Forest
from grimoire.retrieval.learned.model import Reranker, load_reranker

__all__ = ["FEATURES", "Forest", "QueryInfo", "Reranker", "load_reranker", "matrix"]
