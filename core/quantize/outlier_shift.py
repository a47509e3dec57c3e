"""Outlier channels of an activation zeroed for free: its pre-activation bias shifted far negative.

Why: an FFN's GELU output x = f(z), z = h @ W + b, is read by the output projection only; zeroing
its outlier channels with a Mul costs a pass over the widest tensor of the block (and a scalar
factor folded into GELU's 0.5 breaks ORT's Gelu fusion). GELU, ReLU and SiLU vanish far below 0:
b_j - SHIFT makes x_j = f(z_j - SHIFT) = 0 (or nearly: the int8 part's weight rows j are zero
anyway, so outputs stay exact; only the activation's range gains) at no run-time cost.

Contract: `shifted(graph, weights, producer, readers, x, idx, tag)`: when x comes from z through
a chain of elementwise nodes (`ELEMENTWISE`, other inputs scalar constants, intermediates read
only inside the chain) that `vanishes` far below 0, and z = Add(., constant 1-D bias) is read
only by that chain, subtracts SHIFT from b[idx] and returns (a new tensor f(z[..., idx]) computed
in float by a copy of the chain over Gather(z, idx) + SHIFT, x's new name: z and the chain's
tensors, shifted, are renamed `rescaled`) (nodes appended unsorted); else None, the graph untouched.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxport.core.graph.runnable import topological_sort
from onnxport.core.quantize.weight_edits import add_weight, rescaled

ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Relu", "Pow", "Sqrt", "Neg", "Abs"}
SHIFT = 100.0  # z_j - SHIFT: f(-100 + z_j) == 0 in float32 for the activations above while z_j < ~60
MAX_CHAIN = 12


def shifted(graph: onnx.GraphProto, weights: dict, producer: dict, readers: dict[str, int], x: str,
            idx: np.ndarray, tag: str) -> tuple[str, str] | None:
    """See the module docstring."""
    found = _chain(weights, producer, readers, x)
    if found is None:
        return None
    chain, z = found
    if not vanishes(chain, z, x, weights):
        return None
    bias_add = producer[z]
    position = next(i for i, name in enumerate(bias_add.input) if name in weights)
    bias = numpy_helper.to_array(weights[bias_add.input[position]]).astype(np.float32).copy()
    bias[idx] -= SHIFT
    name = f"{tag}/outlier_shifted_bias"
    bias_add.input[position] = add_weight(graph, weights, name, bias)
    graph.initializer.append(numpy_helper.from_array(idx, f"{tag}/outlier_shift_channels"))
    graph.initializer.append(numpy_helper.from_array(np.full(len(idx), SHIFT, np.float32), f"{tag}/outlier_shift"))
    graph.node.append(helper.make_node("Gather", [z, f"{tag}/outlier_shift_channels"], [f"{tag}/outlier_z_shifted"],
                                       axis=-1, name=f"{tag}/outlier_shift_gather"))
    graph.node.append(helper.make_node("Add", [f"{tag}/outlier_z_shifted", f"{tag}/outlier_shift"],
                                       [f"{tag}/outlier_z"], name=f"{tag}/outlier_unshift"))
    renamed = {z: f"{tag}/outlier_z", **{n.output[0]: f"{tag}/outlier_chain_{i}_out" for i, n in enumerate(chain)}}
    for i, node in enumerate(chain):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = f"{tag}/outlier_chain_{i}"
        del copy.input[:]
        copy.input.extend(renamed.get(name, name) for name in node.input)
        del copy.output[:]
        copy.output.append(renamed[node.output[0]])
        graph.node.append(copy)
    for tensor in [z] + [n.output[0] for n in chain if n.output[0] != x]:  # shifted: not the float model's
        rescaled(graph, tensor)
    return renamed[x], rescaled(graph, x)


PROBE = np.linspace(-60.0, 60.0, 121, dtype=np.float32)  # z_j values the shift must still silence
SILENT = 1e-3


def vanishes(chain: list[onnx.NodeProto], z: str, x: str, weights: dict) -> bool:
    """Whether the chain gives |f(z - SHIFT)| <= SILENT over `PROBE` (run in ORT on its own): true
    for GELU, ReLU, SiLU; not for tanh, or a square (it would widen the range it should narrow)."""
    import onnxruntime as ort

    used = {name for n in chain for name in n.input if name in weights}
    graph = helper.make_graph(list(chain), "chain", [helper.make_tensor_value_info(z, onnx.TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, [None])],
                              [weights[name] for name in sorted(used)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    try:
        topological_sort(model.graph)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        value = sess.run([x], {z: PROBE - np.float32(SHIFT)})[0]
    except Exception:  # noqa: BLE001 - a chain ORT will not run alone is not shifted
        return False
    return bool(np.all(np.isfinite(value)) and np.abs(value).max() <= SILENT)


def _chain(weights: dict, producer: dict, readers: dict[str, int], x: str):
    """(the chain's nodes from z to x in order, z), or None."""
    chain: list[onnx.NodeProto] = []
    inside: set[str] = set()
    roots: set[str] = set()
    todo = [x]
    while todo:
        tensor = todo.pop()
        node = producer.get(tensor)
        if tensor in inside:
            continue
        if (node is None or node.op_type not in ELEMENTWISE or len(node.output) != 1
                or any(name in weights and int(np.prod(weights[name].dims)) != 1 for name in node.input)):
            roots.add(tensor)  # not elementwise with scalar constants (a bias Add): where the chain starts
            continue
        if len(chain) >= MAX_CHAIN:
            return None
        chain.append(node)
        inside.add(node.output[0])
        todo += [name for name in node.input if name not in weights and name not in inside]
    roots -= inside
    if len(roots) != 1 or x in roots:
        return None
    z = roots.pop()
    uses = {name: 0 for name in inside | {z}}
    for node in chain:
        for name in node.input:
            if name in uses:
                uses[name] += 1
    if any(readers.get(name, 0) != uses[name] for name in uses if name != x):
        return None  # z or an intermediate is read outside the chain: shifting it would change that reader
    bias_add = producer.get(z)
    if bias_add is None or bias_add.op_type != "Add" or len(bias_add.input) != 2:
        return None
    consts = [name for name in bias_add.input if name in weights]
    if len(consts) != 1 or len(weights[consts[0]].dims) != 1:
        return None
    return chain, z  # in no particular order: the caller sorts the graph
