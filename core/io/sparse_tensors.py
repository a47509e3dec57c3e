"""Sparse tensors ONNX Runtime can densify, with a bound on what densifying them takes.

Why: a sparse tensor (a sparse initializer, a Constant's `sparse_value`, any sparse attribute)
declares a dense shape and ONNX Runtime allocates that shape on load: a 281-byte model declaring
[50000, 50000] made `bench` reach 10.5 GB, and export copied it through. Others ORT refuses on load
(values not rank 1, indices not matching, an index out of bounds) were exported with exit 0.

Contract: `check_sparse_tensors(model, prefix, file_bytes, folder)` checks every sparse tensor of
the model (main graph, If/Loop/Scan bodies, functions, training graphs) as ORT does: dense dims
>= 0; values rank 1, of a whole-byte number type; indices int8..int64 shaped [nnz] (linear
positions) or [nnz, rank] (coordinates), each inside the dense shape; and all dense forms together within
`budgets.sparse_dense_limit(file_bytes)`. Their external data (if any) was confined and bounded
by `external_data` first. Raises `CorruptFileError` with one line naming the file and the tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.util.budgets import human_bytes, sparse_dense_limit
from onnxport.core.util.errors import CorruptFileError

_T = onnx.TensorProto
INDEX_TYPES = (_T.INT8, _T.INT16, _T.INT32, _T.INT64)
_NOT_SPARSE = {getattr(_T, name) for name in ("UNDEFINED", "STRING", "COMPLEX64", "COMPLEX128", "INT4", "UINT4",
                                               "FLOAT4E2M1", "INT2", "UINT2") if hasattr(_T, name)}
_SHOWN = 120


def iter_sparse(model: onnx.ModelProto) -> Iterator[tuple[str, onnx.SparseTensorProto]]:
    """(where, sparse tensor) for every sparse tensor in `model`."""
    yield from _graph(model.graph)
    for fn in model.functions:
        yield from _nodes(fn.node)
    for info in model.training_info:
        yield from _graph(info.initialization)
        yield from _graph(info.algorithm)


def _graph(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.SparseTensorProto]]:
    for s in graph.sparse_initializer:
        yield "sparse initializer", s
    yield from _nodes(graph.node)


def _nodes(nodes) -> Iterator[tuple[str, onnx.SparseTensorProto]]:
    for node in nodes:
        for attr in node.attribute:
            where = f"attribute '{attr.name[:_SHOWN]}' of node '{(node.name or node.op_type)[:_SHOWN]}'"
            if attr.HasField("sparse_tensor"):
                yield where, attr.sparse_tensor
            for s in attr.sparse_tensors:
                yield where, s
            if attr.HasField("g"):
                yield from _graph(attr.g)
            for g in attr.graphs:
                yield from _graph(g)


def check_sparse_tensors(model: onnx.ModelProto, prefix: str, file_bytes: int | None,
                         folder: Path | None) -> None:
    """See the module docstring; `prefix` ("path: ") starts every message."""
    limit = sparse_dense_limit(file_bytes)
    total = 0
    for where, s in iter_sparse(model):
        label = f"{prefix}sparse tensor '{s.values.name[:_SHOWN]}' ({where})"
        dense = _check_shapes(s, label)
        total += dense
        if total > limit:
            raise CorruptFileError(f"{label}: its dense form takes {human_bytes(dense)} (all sparse tensors: "
                                   f"{human_bytes(total)}), more than {human_bytes(limit)} for a "
                                   f"{human_bytes(file_bytes or 0)} model; refused (a crafted file?)")
        _check_indices(s, label, folder)


def _check_shapes(s: onnx.SparseTensorProto, label: str) -> int:
    """The dense form's bytes, after the checks that need no values."""
    dims = list(s.dims)
    if any(d < 0 for d in dims):
        raise CorruptFileError(f"{label}: negative dimension in its dense shape {dims}")
    values, indices = s.values, s.indices
    if len(values.dims) != 1:
        raise CorruptFileError(f"{label}: its values have shape {list(values.dims)}; sparse values are rank 1")
    nnz = values.dims[0]
    numel = math.prod(dims)
    if nnz > numel:
        raise CorruptFileError(f"{label}: {nnz} values for a dense shape {dims} of {numel} elements")
    if indices.data_type not in INDEX_TYPES:
        raise CorruptFileError(f"{label}: its indices are not int8/16/32/64 (type {indices.data_type})")
    idims = list(indices.dims)
    if len(idims) not in (1, 2) or idims[0] != nnz or (len(idims) == 2 and idims[1] != len(dims)):
        raise CorruptFileError(f"{label}: indices of shape {idims} do not fit {nnz} values of a rank-"
                               f"{len(dims)} tensor ([{nnz}] or [{nnz}, {len(dims)}] expected)")
    bits = _value_bits(values.data_type)
    if bits is None:  # ORT densifies whole-byte numbers only (not strings, int4, float4, complex)
        raise CorruptFileError(f"{label}: its values are of type {values.data_type}, which ONNX Runtime "
                               f"cannot hold in a sparse tensor")
    return (numel * bits + 7) // 8


def _value_bits(data_type: int) -> int | None:
    """Bits per value of a type ORT holds in a sparse tensor; None for the others."""
    if data_type in _NOT_SPARSE:
        return None
    try:
        return 8 * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize
    except (KeyError, ValueError, TypeError):
        return None


def _check_indices(s: onnx.SparseTensorProto, label: str, folder: Path | None) -> None:
    if not s.values.dims[0]:
        return
    try:
        indices = numpy_helper.to_array(s.indices, str(folder) if folder is not None else "")
    except Exception:  # noqa: BLE001 - onnx raises many types for inconsistent tensors
        raise CorruptFileError(f"{label}: its indices cannot be read") from None
    dims = list(s.dims)
    if indices.ndim == 1:
        bad = (indices < 0) | (indices >= math.prod(dims))
    else:
        bad = ((indices < 0) | (indices >= np.array(dims, dtype=np.int64))).any(axis=1)
    if bad.any():
        at = int(np.argmax(bad))
        raise CorruptFileError(f"{label}: index {indices[at].tolist()} at position {at} is out of bounds of "
                               f"its dense shape {dims}")
