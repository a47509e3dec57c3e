"""Outlier input channels of a MatMul computed in float beside the int8 rest: an exact float rewrite.

Why: dynamic int8 quantizes a MatMul's activation per tensor and its weight per output column. One
input channel j whose max|x_j| * max|W[j]| dwarfs the others' (all-MiniLM-L6-v2's FFN output
projections: a GELU channel and its weight row, both far above the rest) sets both scales and
rounds every other channel away; rescaling (SmoothQuant) cannot remove it: the product is invariant.

Contract: `chosen_channels(model, maxima)` -> {activation: Group}: per activation read by MatMuls
with a constant 2-D float weight (main graph), the top channels scoring over `ratio` x their
MatMul's median (x N/K for a widening [K, N] weight: the float part's Add spans N columns).
`split_outliers(model, groups)` rewrites `model` in place: rows j of each weight zeroed; x_j zeroed
(by its pre-activation bias, `shifted`, its constant vector Mul, or one shared 0/1 Mul);
y = x' @ W' (+ bias Add) + x_j @ W[j] in float, equal within float32 rounding; a checked pass:
`float_parts(result)`, the float MatMuls (names ending in `SUFFIX`: the quantizer leaves them float).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxport.core.graph.passes import ADDED, REWRITTEN, NodeChange, PassResult
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.quantize.passes import checked
from onnxport.core.quantize.weight_edits import (
    add_weight,
    graph_lookups,
    replace_weight,
    rescaled,
    unique_name,
)

FLOAT_PART = "outlier channels computed in float"
RATIO = 32.0  # a channel is an outlier when its score passes this many medians of its MatMul
MAX_CHANNELS = 4  # per MatMul: a few channels in float, never a whole MatMul
SUFFIX = "/outlier_float"


@dataclass
class Group:
    """The MatMuls reading one activation, and the channels of it computed in float."""

    activation: str
    matmuls: list[str] = field(default_factory=list)
    channels: list[int] = field(default_factory=list)


def weight_matmuls(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """activation -> the MatMuls reading it as input A with a constant 2-D float32 weight as B."""
    weights = {t.name: t for t in graph.initializer}
    found: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.op_type != "MatMul" or len(node.input) != 2 or node.input[0] in weights:
            continue
        w = weights.get(node.input[1])
        if w is not None and len(w.dims) == 2 and w.data_type == onnx.TensorProto.FLOAT:
            found.setdefault(node.input[0], []).append(node)
    return found


def chosen_channels(model: onnx.ModelProto, maxima: dict[str, np.ndarray], *, ratio: float = RATIO,
                    max_channels: int = MAX_CHANNELS) -> dict[str, Group]:
    """Per activation, the union over its MatMuls of the (<= `max_channels`) channels whose
    max|x_j| * max|W[j]| passes `ratio` x that MatMul's median score. `maxima[x]`: max|x_j| per channel."""
    weights = {t.name: t for t in model.graph.initializer}
    groups: dict[str, Group] = {}
    for activation, nodes in weight_matmuls(model.graph).items():
        peak = maxima.get(activation)
        if peak is None:
            continue
        group = Group(activation)
        for node in nodes:
            w = numpy_helper.to_array(weights[node.input[1]])
            if w.shape[0] != peak.shape[-1]:
                group.channels = []
                break  # not a channel-wise product: leave this activation alone
            score = peak * np.abs(w).max(axis=1)
            median = float(np.median(score)) * max(1.0, w.shape[1] / w.shape[0])  # its Add spans N columns
            top = np.argsort(score)[::-1][:max_channels]
            group.channels += [int(j) for j in top if score[j] > ratio * median > 0 and int(j) not in group.channels]
            group.matmuls.append(node.name)
        if group.channels:  # every reader gets the masked activation: its outlier no longer sets their scale
            group.channels.sort()
            groups[activation] = group
    return groups


@checked
def split_outliers(model: onnx.ModelProto, groups: dict[str, Group],
                   maxima: dict[str, np.ndarray] | None = None) -> PassResult:
    """See the module docstring; a checked pass (passes.py): `float_parts(result)` names the float
    MatMuls added. `maxima` (max|x_j| per activation), if given, gets the int8 MatMuls' new inputs:
    the same with the split channels 0."""
    graph = model.graph
    weights, producer, readers, outputs = graph_lookups(graph)
    by_name = {n.name: n for n in graph.node}
    added: list[str] = []
    changes: list[NodeChange] = []
    for activation, group in reversed(groups.items()):  # later first: a shifted bias feeds an earlier split
        if not group.channels or not group.matmuls:
            continue
        nodes = [by_name[name] for name in group.matmuls]
        idx = np.array(group.channels, np.int64)
        tag = unique_name(weights, activation.strip("/").replace("/", "_"))
        size = numpy_helper.to_array(weights[nodes[0].input[1]]).shape[0]
        alone = readers.get(activation, 0) == len(nodes) and activation not in outputs
        found = shifted(graph, weights, producer, readers, activation, idx, tag) if alone else None
        if found is not None:  # zeroed by its bias, the float part computed from z (`shifted`)
            picked, masked = found
            factor = np.ones(len(idx), np.float32)
        else:
            source, factor, masked = _masked(graph, weights, producer, activation, idx, size, tag, alone)
            graph.initializer.append(numpy_helper.from_array(idx, f"{tag}{SUFFIX}_channels"))
            picked = f"{tag}{SUFFIX}_x"
            graph.node.append(helper.make_node("Gather", [source, f"{tag}{SUFFIX}_channels"], [picked], axis=-1,
                                               name=f"{tag}{SUFFIX}_gather"))
        if maxima is not None and activation in maxima:
            maxima[masked] = maxima[activation].copy()
            maxima[masked][idx] = 0.0
        for node in nodes:
            w = numpy_helper.to_array(weights[node.input[1]]).copy()
            rows = (factor[:, None] * w[idx]).astype(np.float32)
            w[idx] = 0.0
            replace_weight(graph, weights, node, w, f"{SUFFIX}_int8_part")  # shared: this node gets its own copy
            changes.append(NodeChange(node.name, REWRITTEN, "outlier weight rows zeroed"))
            rows_name = add_weight(graph, weights, unique_name(weights, f"{node.name}{SUFFIX}_weight"), rows)
            node.input[0] = masked
            tail = _bias_add(graph, weights, node, outputs) or node  # after the bias: ORT fuses that Add
            if tail is not node:  # the product without rows j: not the float model's
                rescaled(graph, node.output[0])
            out = tail.output[0]
            name = f"{node.name}{SUFFIX}"
            tail.output[0] = f"{name}_int8_part"
            graph.node.append(helper.make_node("MatMul", [picked, rows_name], [f"{name}_part"], name=name))
            graph.node.append(helper.make_node("Add", [tail.output[0], f"{name}_part"], [out], name=f"{name}_add"))
            added.append(name)
            changes.append(NodeChange(name, ADDED, FLOAT_PART))
    moved = topological_sort(graph)
    return PassResult(model, changed=bool(changes) or moved, changes=changes)


def float_parts(result: PassResult) -> list[str]:
    """The float MatMuls `split_outliers` added."""
    return [c.node for c in result.changes if c.reason == FLOAT_PART]


def _bias_add(graph, weights, node: onnx.NodeProto, outputs: set[str]) -> onnx.NodeProto | None:
    """The Add of a constant 1-D bias that alone reads `node`'s output, if any."""
    out = node.output[0]
    readers = [n for n in graph.node if out in n.input]
    if out in outputs or len(readers) != 1 or readers[0].op_type != "Add" or len(readers[0].input) != 2:
        return None
    other = [i for i in readers[0].input if i != out]
    bias = weights.get(other[0]) if len(other) == 1 else None
    return readers[0] if bias is not None and len(bias.dims) == 1 else None


def _masked(graph, weights, producer, activation: str, idx: np.ndarray, size: int, tag: str,
            alone: bool) -> tuple[str, np.ndarray, str]:
    """(tensor the float part gathers from, factor of its rows, the masked activation's name)."""
    node = producer.get(activation)
    const = constant_factor(node, weights, size) if alone and node is not None else None
    if const is not None:  # x = t * c read only by these MatMuls: c_j = 0, the float part reads t
        position, values = const
        other = node.input[1 - position]
        factor = values[idx].copy()
        values = values.copy()
        values[idx] = 0.0
        node.input[position] = add_weight(graph, weights, unique_name(weights, f"{tag}{SUFFIX}_factor"),
                                          values.astype(np.float32))
        return other, factor, rescaled(graph, activation)  # its channels j are 0 now
    mask = np.ones(size, np.float32)
    mask[idx] = 0.0
    name = add_weight(graph, weights, unique_name(weights, f"{tag}{SUFFIX}_mask"), mask)
    masked = f"{tag}{SUFFIX}_masked"
    graph.node.append(helper.make_node("Mul", [activation, name], [masked], name=f"{tag}{SUFFIX}_mask"))
    return activation, np.ones(len(idx), np.float32), masked


def constant_factor(node: onnx.NodeProto, weights, size: int) -> tuple[int, np.ndarray] | None:
    """(input position, factor per channel) when `node` is a Mul by a float32 constant [1.., size]."""
    if node.op_type != "Mul" or len(node.input) != 2:
        return None
    consts = [i for i, name in enumerate(node.input) if name in weights]
    if len(consts) != 1 or node.input[1 - consts[0]] in weights:
        return None
    t = weights[node.input[consts[0]]]
    if t.data_type != onnx.TensorProto.FLOAT:
        return None
    dims = list(t.dims)
    if not dims or any(d != 1 for d in dims[:-1]) or dims[-1] != size:
        return None  # a scalar factor stays one: fusions look for it (GELU's 0.5: Gelu, BiasGelu)
    value = numpy_helper.to_array(t).astype(np.float32).reshape(-1)
    return consts[0], value


# --- outlier channels zeroed by their pre-activation bias ---------------------------------------

ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Relu", "Pow", "Sqrt", "Neg", "Abs"}
SHIFT = 100.0  # z_j - SHIFT: f(-100 + z_j) == 0 in float32 for the activations above while z_j < ~60
MAX_CHAIN = 12


def shifted(graph: onnx.GraphProto, weights: dict, producer: dict, readers: dict[str, int], x: str,
            idx: np.ndarray, tag: str) -> tuple[str, str] | None:
    """Outlier channels of an activation zeroed for free: its pre-activation bias shifted far negative.

    Why: an FFN's GELU output x = f(z), z = h @ W + b, is read by the output projection only; zeroing
    its outlier channels with a Mul costs a pass over the widest tensor of the block (and a scalar
    factor folded into GELU's 0.5 breaks ORT's Gelu fusion). GELU, ReLU and SiLU vanish far below 0:
    b_j - SHIFT makes x_j = f(z_j - SHIFT) = 0 (or nearly: the int8 part's weight rows j are zero
    anyway, so outputs stay exact; only the activation's range gains) at no run-time cost.

    Contract: when x comes from z through
    a chain of elementwise nodes (`ELEMENTWISE`, other inputs scalar constants, intermediates read
    only inside the chain) that `vanishes` far below 0, and z = Add(., constant 1-D bias) is read
    only by that chain, subtracts SHIFT from b[idx] and returns (a new tensor f(z[..., idx]) computed
    in float by a copy of the chain over Gather(z, idx) + SHIFT, x's new name: z and the chain's
    tensors, shifted, are renamed `rescaled`) (nodes appended unsorted); else None, the graph untouched."""
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
