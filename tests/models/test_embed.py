"""Embedders: the test double is deterministic; the bundled model runs offline and agrees."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from grimoire.errors import EmbedderError, ValidationError
from grimoire.models.embedders import FastEmbedEmbedder, HashEmbedder, count_tokens


def test_hash_embedder_is_deterministic_and_normalised(hash_embedder: HashEmbedder) -> None:
    a = hash_embedder.embed(["gas is cheap at night", "gas is cheap at night", "bananas"])
    assert a.dtype == np.float32 and a.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    assert np.array_equal(a[0], a[1])
    assert float(a[0] @ a[2]) < 0.3
    assert hash_embedder.embed([]).shape == (0, 384)


def test_hash_embedder_rejects_non_strings(hash_embedder: HashEmbedder) -> None:
    with pytest.raises(ValidationError):
        hash_embedder.embed(["ok", 3])  # type: ignore[list-item]


@pytest.mark.slow
def test_real_model_is_offline_and_semantic(real_embedder: FastEmbedEmbedder) -> None:
    """The pip-installed MiniLM loads with HF_HUB_OFFLINE and ranks meaning, not words."""
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    # tokenizers' thread pool is set (off, unless the host chose before loading)
    assert "TOKENIZERS_PARALLELISM" in os.environ
    assert real_embedder.dim == 384
    v = real_embedder.embed([
        "gas fees are very low tonight",
        "transaction costs are cheap right now",
        "the cat sat on the mat",
    ])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-4)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2


@pytest.mark.slow
def test_real_model_batch_invariant_and_truncates(real_embedder: FastEmbedEmbedder) -> None:
    texts = [f"swap {i} ETH on uniswap" for i in range(5)]
    batch = real_embedder.embed(texts)
    single = np.stack([real_embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    long_text = "liquidity " * 600
    assert count_tokens(real_embedder, long_text) > 256
    assert real_embedder.embed([long_text]).shape == (1, 384)


@pytest.mark.slow
def test_more_texts_than_a_batch_come_back_in_the_callers_order(
        real_embedder: FastEmbedEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over one model batch the texts are embedded shortest first (less padding); each
    row still belongs to its own text."""
    monkeypatch.setattr(real_embedder, "batch_size", 4)
    texts = [("a long note about the bridge being slow and fees rising " * (i % 4 + 1))
             + f"#{i}" for i in range(11)]
    assert sorted(texts, key=len) != texts  # the order really changes
    together = real_embedder.embed(texts)
    alone = np.stack([real_embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


@pytest.mark.slow
def test_real_model_truncates_at_the_configured_max_tokens(
        real_embedder: FastEmbedEmbedder) -> None:
    """Only the first ``embedding.max_tokens`` tokens count: at 256 (the default) two texts
    that differ after token ~300 embed identically; at 512 they differ. A value the model
    cannot honour is refused at load."""
    head = "gas cheap at night on mainnet " * 60  # ~360 tokens
    a, b = head + "swap now", head + "the bridge was exploited and drained"
    same = real_embedder.embed([a, b])
    assert float(same[0] @ same[1]) == pytest.approx(1.0, abs=1e-6)
    wide = FastEmbedEmbedder(max_tokens=512)
    apart = wide.embed([a, b])
    assert float(apart[0] @ apart[1]) < 0.9999
    with pytest.raises(EmbedderError, match="max_tokens"):
        FastEmbedEmbedder(max_tokens=0)


@pytest.mark.slow
def test_real_model_matches_reference_vectors(real_embedder: FastEmbedEmbedder) -> None:
    """The int8 ONNX model agrees with sentence-transformers' fp32 vectors (stored fixture)."""
    ref = json.loads((Path(__file__).parent.parent / "data" / "minilm_reference.json").read_text())
    ours = real_embedder.embed(ref["texts"])
    cosines = (ours * np.asarray(ref["vectors"], dtype=np.float32)).sum(axis=1)
    assert cosines.min() >= 0.99, cosines


def test_a_model_that_is_not_installed_is_refused_offline(tmp_path: Path) -> None:
    """Another fastembed model named in config but absent from the machine is refused with
    a message naming it, with the hub offline (a wrong path fails instead of downloading)."""
    with pytest.raises(EmbedderError, match=re.escape("nomic-ai/nomic-embed-text-v1.5")):
        FastEmbedEmbedder("nomic-ai/nomic-embed-text-v1.5", model_dir=str(tmp_path), dim=768)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


def test_lean_session_matches_the_default_one(real_embedder: FastEmbedEmbedder) -> None:
    """The session runs without an arena or spinning threads, on the int8-weight rewrite
    of the shipped model (grimoire/models/int8_graph.py); its vectors agree with a default fully
    optimised session's on the file as shipped (same tokenizer and pooling): short, long
    and truncated texts, cosine >= 0.999 (the rewrite quantises activations to int8)."""
    import onnxruntime as ort

    inner = real_embedder._model.model
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert real_embedder.model_path is not None
    reference = ort.InferenceSession(str(real_embedder.model_path), sess_options=options,
                                     providers=["CPUExecutionProvider"])
    texts = ["gas spiked to 180 gwei during the bridge congestion",
             "the swap reverted: slippage above 2% on the USDC/WETH pool " * 4, "ok",
             "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
             "What did Melanie paint recently?", "liquidity " * 600,
             " ".join(f"note {i}: the validator set rotated at epoch {i * 7}" for i in range(40))]
    lean = real_embedder.embed(texts)
    session, inner.model = inner.model, reference
    try:
        folded = real_embedder.embed(texts)
    finally:
        inner.model = session
    assert session is not reference
    cosines = (lean * folded).sum(axis=1)
    assert cosines.min() >= 0.999, cosines


def test_int8_rewrite_keeps_every_weight_int8() -> None:
    """Every dequantise-then-MatMul of the shipped model becomes an 8-bit MatMulNBits and
    both embedding lookups gather int8 rows; nothing of the pattern is left (a second pass
    finds none), and the dequantised weights equal the original ones exactly."""
    from grimoire.models import int8_graph as g
    from grimoire.models.embedders import _bundled_onnx

    original = _bundled_onnx().read_bytes()
    rewritten = g.rewrite_int8_weights(original)
    assert rewritten is not None
    assert g.rewrite_int8_weights(rewritten) is None

    def graph(model: bytes) -> tuple[list[g._Node], dict[str, g._Tensor]]:
        fields = g._fields(memoryview(model))
        body = next(v for n, _, v, _ in fields if n == g._MODEL_GRAPH)
        items = g._fields(body)
        return ([g._parse_node(v) for n, _, v, _ in items if n == g._GRAPH_NODE],
                {t.name: t for t in (g._parse_tensor(v) for n, _, v, _ in items
                                     if n == g._GRAPH_INIT)})

    nodes, tensors = graph(rewritten)
    old_nodes, old_tensors = graph(original)
    ops = [n.op for n in nodes]
    assert ops.count("MatMulNBits") == 36 and "Cast" in ops
    assert not any(t.dtype == g._FLOAT and len(t.dims) == 2 and min(t.dims) > 2
                   for t in tensors.values())  # no float weight matrix left
    node = next(n for n in nodes if n.op == "MatMulNBits")
    w, s = tensors[node.inputs[1]], tensors[node.inputs[2]]
    prefix = node.inputs[1].removesuffix("_nbits_w")
    q, scale = old_tensors[prefix], old_tensors[prefix.removesuffix("_q") + "_scale"]
    assert w.raw is not None and s.raw is not None and q.raw is not None and scale.raw is not None
    k, n = q.dims
    codes = np.frombuffer(w.raw, np.uint8).reshape(n, -1)[:, :k].astype(np.float32) - 128
    scales = np.frombuffer(s.raw, np.float32).reshape(n, -1)[:, :1]
    expected = (np.frombuffer(q.raw, np.int8).reshape(k, n).astype(np.float32)
                * np.frombuffer(scale.raw, np.float32).reshape(1, n))
    np.testing.assert_array_equal((codes * scales).T, expected)
    assert len([n for n in old_nodes if n.op == "MatMul"]) == 48
