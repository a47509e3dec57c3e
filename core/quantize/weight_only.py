"""Int8 weights for the convolutions a static QDQ model keeps in float: the size without the error.

Why: the static search keeps whole stages in float because their *activations* do not survive
uint8 (PP-OCRv4's detector: 178 nodes, 0.46 of the weights, 0.63x the size). Their weights do:
stored as int8 (8-bit symmetric, one scale per output channel), the node still computes in float.
Cast + Mul, not DequantizeLinear: ONNX Runtime folds those into a float initializer when it loads
the model (it keeps every DequantizeLinear, which then runs each time: docs/performance.md),
so the float nodes run as fast as before. 8 bits, not the CPU path's 7: no int8 kernel reads them.

Contract: `int8_weights(model, nodes, min_values=0)`, a checked pass (passes.py): in place, each
Conv/ConvTranspose/MatMul/Gemm named in `nodes` that reads a float32 initializer weight (2-D or
more, read by that node only, at least `MIN_VALUES` and `min_values` values) reads it as
Mul(Cast(int8), scale) instead; those nodes are the result's REWRITTEN changes. Main graph only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.graph.passes import ADDED, REWRITTEN, NodeChange, PassResult
from onnxport.core.quantize.passes import checked

WEIGHT_OPS = {"Conv": 0, "ConvTranspose": 1, "MatMul": 1, "Gemm": None}  # op -> channel axis of its weight
MIN_VALUES = 256


def _axis(node: onnx.NodeProto) -> int | None:
    axis = WEIGHT_OPS[node.op_type]
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        axis = 0 if trans_b else 1
    return axis


@checked
def int8_weights(model: onnx.ModelProto, nodes: Iterable[str], min_values: int = 0) -> PassResult:
    """See the module docstring."""
    graph = model.graph
    wanted = set(nodes)
    inits = {t.name: t for t in graph.initializer}
    uses = Counter(name for n in graph.node for name in n.input)
    changes: list[NodeChange] = []
    kept_inits = []
    dropped: set[str] = set()
    dequantize: list[tuple[int, list[onnx.NodeProto]]] = []
    for index, node in enumerate(graph.node):
        if node.name not in wanted or node.op_type not in WEIGHT_OPS or len(node.input) < 2:
            continue
        name = node.input[1]
        init = inits.get(name)
        if init is None or init.data_type != TensorProto.FLOAT or uses[name] != 1 or len(init.dims) < 2:
            continue
        weight = numpy_helper.to_array(init)
        if weight.size < max(MIN_VALUES, min_values):
            continue
        axis = _axis(node)
        reduce = tuple(i for i in range(weight.ndim) if i != axis)
        peak = np.abs(weight).max(axis=reduce).astype(np.float64)
        scale = np.where(peak > 0, peak / 127.0, 1.0)
        shape = [1] * weight.ndim
        shape[axis] = -1
        q = np.clip(np.rint(weight / scale.reshape(shape)), -127, 127).astype(np.int8)
        kept_inits += [numpy_helper.from_array(q, f"{name}_int8"),
                       numpy_helper.from_array(scale.astype(np.float32).reshape(shape), f"{name}_int8_scale")]
        dequantize.append((index, [  # Cast and Mul: ORT folds them when it loads (a DequantizeLinear it keeps)
            helper.make_node("Cast", [f"{name}_int8"], [f"{name}_int8_float"], name=f"{node.name}/onnxport_weight_cast",
                             to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{name}_int8_float", f"{name}_int8_scale"], [f"{name}_dequantized"],
                             name=f"{node.name}/onnxport_weight_scale")]))
        node.input[1] = f"{name}_dequantized"
        dropped.add(name)
        changes += [NodeChange(node.name, REWRITTEN, "weight stored as int8"),
                    *(NodeChange(n.name, ADDED, "weight dequantized") for n in dequantize[-1][1])]
    if not changes:
        return PassResult(model)
    keep = [t for t in graph.initializer if t.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(keep + kept_inits)
    nodes_in_order = list(graph.node)
    before = dict(dequantize)
    del graph.node[:]
    for index, node in enumerate(nodes_in_order):
        if index in before:
            graph.node.extend(before[index])
        graph.node.append(node)
    return PassResult(model, changed=True, changes=changes)
