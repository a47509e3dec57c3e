"""What a model takes: one `InputSpec` per graph input a caller feeds.

Contract: `input_specs(model)` lists the graph inputs that are not initializers, with dtype and
declared shape (an int per fixed axis, the symbol's name for a named one, None for an unnamed
one; -1 and 0 count as unnamed), plus what the graph says about their values: an integer input
used as indices (`Gather` of a table of known size, possibly through Cast/Unsqueeze/Reshape...)
gets the valid range `[0, rows)`; an integer input whose name says mask is a mask (ones).
Why a module of its own: shapes (input_shapes.py), values (input_values.py) and the file
sources (feeds.py) all read specs, and none of them may import another in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from onnxport.core.util.shapes import Dim, value_info_shape

_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Identity", "Flatten", "Expand", "Clip"}
_UNNAMED = {"?", "-1", "None", "none", "*", "", "dynamic"}
INT_TYPES = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16,
                       onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                       onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})


@dataclass(frozen=True)
class InputSpec:
    name: str
    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown
    int_range: tuple[int, int] | None = None  # [low, high) for index-like integer inputs
    mask: bool = False

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(helper.tensor_dtype_to_np_dtype(self.elem_type))

    def describe(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    static_shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info):
        dims = value_info_shape(vi)
        if dims is not None and all(isinstance(d, int) for d in dims):
            static_shapes.setdefault(vi.name, dims)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    specs = []
    for vi in graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        elem = vi.type.tensor_type.elem_type
        int_range, mask = None, False
        if elem in INT_TYPES:
            mask = "mask" in vi.name.lower()
            int_range = None if mask else _index_range(vi.name, consumers, static_shapes)
        specs.append(InputSpec(vi.name, elem, _declared(vi), int_range, mask))
    return specs


def _declared(vi: onnx.ValueInfoProto) -> tuple[Dim, ...] | None:
    """The declared shape with exporters' spellings of "dynamic" (sizes -1 and 0, names like '?')
    read as unnamed: two '?' axes are not one size."""
    shape = value_info_shape(vi)
    if shape is None:
        return None
    return tuple(None if (isinstance(d, int) and d <= 0) or (isinstance(d, str) and d.strip() in _UNNAMED)
                 else d for d in shape)


def _index_range(name: str, consumers, static_shapes, depth: int = 0) -> tuple[int, int] | None:
    """[0, rows) when `name` ends up as the indices of a Gather over a table of known size."""
    bounds = []
    for node, slot in consumers.get(name, []):
        if node.op_type == "Gather" and slot == 1:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = static_shapes.get(node.input[0])
            if shape and -len(shape) <= axis < len(shape) and shape[axis] > 0:
                bounds.append(int(shape[axis]))
        elif node.op_type in _PASS_THROUGH and slot == 0 and depth < 6:
            for out in node.output:
                found = _index_range(out, consumers, static_shapes, depth + 1)
                if found:
                    bounds.append(found[1])
    return (0, min(bounds)) if bounds else None
