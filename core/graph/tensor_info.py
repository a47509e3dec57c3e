"""What the index says about one tensor (`TensorInfo`), and how it reads that from a graph.

Shared by the tensor index of a graph (`index`) and of its If/Loop/Scan bodies (`index_bodies`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import onnx

from onnxport.core.io.parameter_set import dtype_name, elem_type_of

Dim = int | str | None


class TensorKind(str, Enum):
    INPUT = "input"  # a graph input the user feeds
    PARAMETER = "parameter"  # an initializer, or a graph input a checkpoint fills
    OUTPUT = "output"  # a graph output (produced by a node)
    INTERMEDIATE = "intermediate"  # any other node output


@dataclass
class TensorInfo:
    name: str
    kind: TensorKind
    dtype: str | None
    shape: tuple[Dim, ...] | None  # None: unknown rank
    producer: str | None = None  # node name
    producer_op: str | None = None
    consumers: list[str] = field(default_factory=list)  # node names
    scope: str = ""  # "encoder/layer.0/attention", "" at top level
    training_only: bool = False
    is_graph_output: bool = False
    nbytes: int | None = None  # parameters: bytes of their values
    subgraph: str = ""  # inside an If/Loop/Scan body: its path (`outer_if/then_branch`), else ""

    @property
    def shape_text(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


def scope_of(node_name: str) -> str:
    """Module scope from a node name: '/encoder/layer.0/attn/MatMul_1' -> 'encoder/layer.0/attn'."""
    if "/" not in node_name:
        return ""
    return node_name.strip("/").rpartition("/")[0]


def shape_of(vtype: onnx.TypeProto) -> tuple[str | None, tuple[Dim, ...] | None]:
    if not vtype.HasField("tensor_type"):
        kind = vtype.WhichOneof("value")
        return kind, None
    tt = vtype.tensor_type
    dtype = dtype_name(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dtype, tuple(dims)


def tensor_type(info: TensorInfo) -> onnx.TypeProto | None:
    """The tensor type `shape_of` read `info`'s dtype and shape from; None when its dtype is not
    known (or not a tensor's)."""
    elem_type = elem_type_of(info.dtype) if info.dtype is not None else None
    if elem_type is None:
        return None
    vtype = onnx.TypeProto()
    vtype.tensor_type.elem_type = elem_type
    if info.shape is not None:
        shape = vtype.tensor_type.shape
        shape.SetInParent()  # rank 0 is a shape too
        for d in info.shape:
            dim = shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
    return vtype
