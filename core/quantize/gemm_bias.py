"""Gemm biases in the shape ONNX Runtime's QDQ quantizer expects: one value per output column.

A Gemm's bias C only has to broadcast to the output [M, N]; ORT's pre-processing writes [1, N]
when it fuses MatMul + Add. ORT's QDQ quantizer (1.32.0 here) reads per-channel biases as
1-D: `_adjust_weight_scale_for_int32_bias` then compares a whole row with a scalar and raises
"The truth value of an array with more than one element is ambiguous" (onnxruntime PR #29747).
`flatten_gemm_biases` rewrites every row-shaped initializer bias ([], [1], [1, 1], [N], [1, N]) as
[N] before quantizing: the same values, broadcast the same way. A bias that is no row ([M, N],
M > 1) cannot be so written: `flatten_gemm_biases` says one remains, and modes.static turns ORT's
adjustment off (its `QDQDisableWeightAdjustForInt32Bias`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.quantize.passes import checked

NOT_A_ROW = "a Gemm bias that is not a row remains"


def _columns(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> int | None:
    """N, the output's column count, from the weight B's shape (None if B is no 2-D initializer)."""
    weight = inits.get(node.input[1]) if len(node.input) > 1 else None
    if weight is None or len(weight.dims) != 2:
        return None
    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
    return int(weight.dims[0] if trans_b else weight.dims[1])


def _row_bias(dims: list[int], columns: int) -> bool:
    size = int(np.prod(dims)) if dims else 1
    return size in (1, columns) and all(d == 1 for d in dims[:-1]) and (not dims or dims[-1] in (1, columns))


@checked
def flatten_gemm_biases(model: onnx.ModelProto) -> PassResult:
    """Rewrite the main graph's row-shaped Gemm biases as [N] (in place); a checked pass
    (passes.py): the Gemms rewritten, and a note (`NOT_A_ROW`) when a Gemm bias that is not a
    row remains."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    readers = Counter(name for node in graph.node for name in node.input)
    declared = {v.name for v in (*graph.input, *graph.output)}  # a declared shape stays as declared
    rewritten, other = 0, False
    changes: list[NodeChange] = []
    for node in graph.node:
        if node.op_type != "Gemm" or len(node.input) < 3 or node.input[2] not in inits:
            continue
        bias, columns = inits[node.input[2]], _columns(node, inits)
        if columns is None or list(bias.dims) == [columns]:
            continue
        if not _row_bias(list(bias.dims), columns):
            other = True
            continue
        values = np.broadcast_to(numpy_helper.to_array(bias).reshape(-1), (columns,)).copy()
        if readers[bias.name] == 1 and bias.name not in declared:
            bias.CopyFrom(numpy_helper.from_array(values, bias.name))
        else:  # shared: the Gemm gets a copy of its own
            name = f"{bias.name}_gemm_row_{rewritten}"
            graph.initializer.append(numpy_helper.from_array(values, name))
            node.input[2] = name
        rewritten += 1
        changes.append(NodeChange(node_label(node), REWRITTEN, "bias written as [N]"))
    return PassResult(model, changed=bool(changes), changes=changes, notes=[NOT_A_ROW] if other else [])

