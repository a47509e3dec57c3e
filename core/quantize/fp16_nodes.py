"""What the float16 converter (fp16_convert.py) reads of one node: its float slots, label, values.

Why the schema: a converter must know, per slot, whether a tensor has to follow the node into
float16 (`T` of `Add`, `Conv`, `Clip`'s bounds...), may be read in whatever type it has (`Shape`'s
input, `Cast`'s input, `Resize`'s `roi`), or has a declared type of its own (`Resize`'s `scales`,
`LayerNormalization`'s `Mean`). Guessing by op name is what sent ONNX Runtime's converter wrong.

Contract: `node_slots(node, opset)` -> `Slots` (FOLLOW, FREE, FIXED, or ATTR for outputs an
attribute types, per input and output; `half_ok` False when the node cannot run in float16), or
None without a standard schema (all its float tensors stay float32). `node_label(node, index)`:
how a node is named in `keep` and reports (its name, or `OpType#index`); `topological_order(graph)`
node indices with each after its producers, bodies' captures included (a cycle's nodes last);
`constant_array(node)`: a float32 Constant's value (else None); `finite_max(array)`: its largest
finite magnitude; `detached(node)`: a copy that outlives `del graph.node[:]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnx
from onnx import defs, numpy_helper

from onnxport.core.graph.runnable import topological_order as graph_topological_order

FOLLOW, FREE, FIXED, ATTR = "follow", "free", "fixed", "attr"
_HALF, _FLOAT = "tensor(float16)", "tensor(float)"
ATTR_TYPED = {"Cast", "ConstantOfShape"}  # outputs typed by an attribute the converter rewrites
_VARIADIC = defs.OpSchema.FormalParameterOption.Variadic


@dataclass(frozen=True)
class Slots:
    inputs: tuple[str, ...]  # class of each formal input; the last repeats for variadic inputs
    outputs: tuple[str, ...]
    half_ok: bool

    def input(self, index: int) -> str:
        return self.inputs[min(index, len(self.inputs) - 1)] if self.inputs else FIXED

    def output(self, index: int) -> str:
        return self.outputs[min(index, len(self.outputs) - 1)] if self.outputs else FIXED


def node_slots(node: onnx.NodeProto, opset: int) -> Slots | None:
    if node.domain not in ("", "ai.onnx"):
        return None
    return _schema_slots(node.op_type, opset)


@lru_cache(maxsize=512)
def _schema_slots(op_type: str, opset: int) -> Slots | None:
    try:
        schema = defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - onnx raises SchemaError (a RuntimeError subclass) for unknown ops
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    in_params = [p.type_str for p in schema.inputs]
    out_params = [p.type_str for p in schema.outputs]

    def can_be_half(param: str) -> bool:
        return param in allowed and {_HALF, _FLOAT} <= allowed[param]

    inputs = []
    for i, param in enumerate(in_params):
        shared = in_params.count(param) > 1 or param in out_params or (
            schema.inputs[i].option == _VARIADIC)
        inputs.append((FOLLOW if shared else FREE) if can_be_half(param) else FIXED)
    outputs = []
    half_ok = True
    for param in out_params:
        if param not in allowed:
            outputs.append(FIXED)  # a declared type such as tensor(float)
        elif param not in in_params:
            half_ok = half_ok and op_type in ATTR_TYPED  # RandomNormal, EyeLike...: typed by an attribute
            outputs.append(ATTR if op_type in ATTR_TYPED else FIXED)
        else:
            outputs.append(FOLLOW if can_be_half(param) else FIXED)
    half_ok = half_ok and (FOLLOW in inputs or FOLLOW in outputs or ATTR in outputs)
    return Slots(tuple(inputs), tuple(outputs), half_ok)


# --- node pieces -------------------------------------------------------------------------------

FLOAT = onnx.TensorProto.FLOAT
FP16_MAX = float(np.finfo(np.float16).max)


def node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def topological_order(graph: onnx.GraphProto) -> list[int]:
    """Node indices in an order where each node comes after the producers of what it reads
    (sub-graph captures included); the given order when it already is one."""
    nodes = list(graph.node)
    order = graph_topological_order(nodes)
    placed = set(order)
    return order + [i for i in range(len(nodes)) if i not in placed]  # a cycle: left for the checks to refuse


def constant_array(node: onnx.NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def finite_max(array: np.ndarray) -> float:
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


def detached(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy of a node that outlives `del graph.node[:]` (protobuf clears the originals' fields)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy
