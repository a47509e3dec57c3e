"""A model's weights by tensor name, read in bounded pieces: initializers, Constant nodes, parameters.

Why: many exported models (PP-OCR's among them) hold every weight in a Constant node, and an eval
graph's weights live in its checkpoint; a comparison names each weight by its tensor, wherever it
lives. Contract: `model_weights(model, folder, params)` maps tensor name -> `WeightRef` for the
main graph's initializers, the value of its Constant nodes (`value` attribute) and, over both, the
parameters of `params` that name a graph input or initializer. `WeightRef.values()` is a flat
sliceable view (numpy for inline and memory-mapped tensors; external data is read with `pread`,
one slice at a time, so a 2 GB tensor never sits in memory whole); `digest()` hashes the bytes in
pieces of `PIECE_BYTES`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.io.external_data import external_reference
from onnxport.core.io.mapped import storage_dtype
from onnxport.core.io.parameter_set import ParameterSet, ParamTensor, dtype_name
from onnxport.core.util.errors import CorruptFileError

PIECE_BYTES = 16 << 20
INITIALIZER, CONSTANT, PARAMETER = "initializer", "constant", "parameter"


class _FileValues:
    """Elements of a tensor stored in a file, read slice by slice (never mapped whole)."""

    def __init__(self, path: Path, offset: int, dtype: np.dtype, count: int) -> None:
        self.path, self.offset, self.dtype, self.count = path, offset, dtype, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, piece: slice) -> np.ndarray:
        start, stop, _ = piece.indices(self.count)
        size = self.dtype.itemsize
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, (stop - start) * size, self.offset + start * size)
        finally:
            os.close(fd)
        if len(data) != (stop - start) * size:
            raise CorruptFileError(f"{self.path}: truncated while reading a tensor")
        return np.frombuffer(data, self.dtype)


@dataclass
class WeightRef:
    name: str
    kind: str  # INITIALIZER | CONSTANT | PARAMETER
    elem_type: int
    dims: tuple[int, ...]
    tensor: onnx.TensorProto | None = None
    folder: Path | None = None
    param: ParamTensor | None = None

    @property
    def dtype(self) -> str:
        return dtype_name(self.elem_type)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= int(d)
        return n

    def values(self):
        """The elements, flat: a numpy array, or a `_FileValues` for external data."""
        if self.param is not None:
            return np.asarray(self.param.array()).reshape(-1)
        t = self.tensor
        if t.data_location == onnx.TensorProto.EXTERNAL:
            ref = external_reference(t, self.folder, self.name)
            dtype = storage_dtype(t.data_type)
            if dtype is None or dtype == np.dtype(object):
                raise CorruptFileError(f"{self.name}: external data of type {self.dtype} cannot be compared")
            return _FileValues(ref.path, ref.offset, dtype, self.numel)
        return numpy_helper.to_array(t).reshape(-1)

    def digest(self) -> bytes:
        """A hash of the type, shape and values (bytes as stored)."""
        h = hashlib.blake2b(f"{self.elem_type}:{self.dims}".encode(), digest_size=20)
        t = self.tensor
        if t is not None and t.data_location != onnx.TensorProto.EXTERNAL and t.HasField("raw_data"):
            h.update(t.raw_data)
            return h.digest()
        values = self.values()
        if values.dtype == np.dtype(object):
            h.update(repr(values.tolist()).encode())
            return h.digest()
        step = max(1, PIECE_BYTES // max(values.dtype.itemsize, 1))
        for start in range(0, len(values), step):
            h.update(np.ascontiguousarray(values[start:start + step]).tobytes())
        return h.digest()


def model_weights(model: onnx.ModelProto, folder: Path | None, params: ParameterSet | None = None) -> dict[str, WeightRef]:
    """See the module docstring."""
    graph = model.graph
    weights = graph_weights(graph, folder)
    if params is not None:
        names = {i.name for i in graph.input} | set(weights)
        for name, p in params.params.items():
            if name in names:
                weights[name] = WeightRef(name, PARAMETER, p.elem_type, tuple(p.shape), param=p)
    return weights


def graph_weights(graph: onnx.GraphProto, folder: Path | None = None) -> dict[str, WeightRef]:
    """The initializers and Constant values of one graph (a body's, or the main graph's)."""
    weights: dict[str, WeightRef] = {}
    for t in graph.initializer:
        weights[t.name] = WeightRef(t.name, INITIALIZER, t.data_type, tuple(t.dims), tensor=t, folder=folder)
    for node in graph.node:
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
            continue
        for a in node.attribute:
            if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                t = a.t
                weights[node.output[0]] = WeightRef(node.output[0], CONSTANT, t.data_type, tuple(t.dims),
                                                    tensor=t, folder=folder)
    return weights
