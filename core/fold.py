"""Freeze-time folding: once parameters are constants, compute the parameter-only sub-graphs.

A training-mode export (`do_constant_folding=False`) leaves e.g. a `Transpose` of every Linear
weight in the graph. Folding them makes the model faster and lets a quantizer see constant MatMul
weights. Contract: in, the kept nodes and the constants (initializers) by name; out, the nodes
that remain and the constants they need, where each folded output is a *lazy* `ConstTensor`
(computed one at a time when written, so memory stays at one tensor). Only ops whose numpy
result is bit-identical to ONNX Runtime's are folded (data movement, casts, IEEE elementwise
arithmetic); nodes producing graph outputs are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .const_tensors import ConstTensor, from_array
from .params import c_contiguous

MAX_GROWTH_BYTES = 1 << 20  # a fold may add at most this much over its inputs (no Expand blow-ups)


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _ints(x: np.ndarray | None) -> list[int] | None:
    return None if x is None else [int(v) for v in np.asarray(x).reshape(-1)]


def _transpose(node, a, xs):
    perm = a.get("perm")
    return [c_contiguous(np.transpose(xs[0], perm))]


def _reshape(node, a, xs):
    data, shape = xs[0], _ints(xs[1])
    if not a.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


def _unsqueeze(node, a, xs):
    axes = _ints(xs[1]) if len(xs) > 1 else a["axes"]
    out = xs[0]
    rank = out.ndim + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        out = np.expand_dims(out, ax)
    return [out]


def _squeeze(node, a, xs):
    axes = _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else a.get("axes")
    return [np.squeeze(xs[0], axis=tuple(axes) if axes is not None else None)]


def _flatten(node, a, xs):
    axis = a.get("axis", 1) % (xs[0].ndim + 1) if xs[0].ndim else 0
    rows = int(np.prod(xs[0].shape[:axis], dtype=np.int64))
    return [xs[0].reshape(rows, -1)]


def _cast(node, a, xs):
    to = helper.tensor_dtype_to_np_dtype(a["to"])
    return [xs[0].astype(to)]


def _concat(node, a, xs):
    return [np.concatenate(xs, axis=a["axis"])]


def _gather(node, a, xs):
    return [np.take(xs[0], xs[1].astype(np.int64), axis=a.get("axis", 0))]


def _slice(node, a, xs):
    data = xs[0]
    if len(xs) > 1:
        starts, ends = _ints(xs[1]), _ints(xs[2])
        axes = _ints(xs[3]) if len(xs) > 3 and xs[3] is not None else list(range(len(starts)))
        steps = _ints(xs[4]) if len(xs) > 4 and xs[4] is not None else [1] * len(starts)
    else:
        starts, ends = a["starts"], a["ends"]
        axes, steps = a.get("axes", list(range(len(starts)))), [1] * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        index[ax] = slice(s, e, st)
    return [c_contiguous(data[tuple(index)])]


def _binary(fn: Callable) -> Callable:
    def run(node, a, xs):
        return [np.asarray(fn(xs[0], xs[1]))]
    return run


def _identity(node, a, xs):
    return [xs[0]]


FOLDERS: dict[str, Callable] = {
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Flatten": _flatten,
    "Cast": _cast,
    "Concat": _concat,
    "Gather": _gather,
    "Slice": _slice,
    "Identity": _identity,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
}
FLOAT_ONLY_SAFE = {"Add", "Sub", "Mul"}  # integer overflow semantics differ; fold floats only


def _constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
    return None


def fold_constants(
    nodes: Sequence[onnx.NodeProto],
    consts: dict[str, ConstTensor],
    protected: set[str],
) -> tuple[list[onnx.NodeProto], dict[str, ConstTensor], list[str]]:
    """Fold nodes whose inputs are all constants. Returns (nodes left, constants needed, folded names).

    `protected`: names that must stay produced by nodes (graph outputs).
    """
    available = dict(consts)
    remaining: list[onnx.NodeProto] = []
    folded: list[str] = []
    for node in nodes:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and not (set(node.output) & protected):
            value = _constant_node_value(node)
            if value is not None and value.nbytes <= MAX_GROWTH_BYTES:
                available[node.output[0]] = from_array(node.output[0], value)
                remaining.append(node)  # keep; dropped below if nothing uses it
                continue
        if _can_fold(node, available, protected):
            inputs = [available[n] if n else None for n in node.input]
            for i, out in enumerate(node.output):
                if out:
                    available[out] = _lazy_output(node, inputs, i)
            folded.append(node.name or node.output[0])
            continue
        remaining.append(node)
    # Drop what nothing uses any more (folded-away weights, Constant nodes consumed by folds).
    used = {n for node in remaining for n in node.input if n} | protected
    live_nodes = [n for n in remaining if not (n.op_type == "Constant" and not (set(n.output) & used))]
    used = {n for node in live_nodes for n in node.input if n} | protected
    constant_node_outputs = {o for n in live_nodes if n.op_type == "Constant" for o in n.output}
    needed = {name: c for name, c in available.items() if name in used and name not in constant_node_outputs}
    return live_nodes, needed, folded


def _can_fold(node: onnx.NodeProto, available: dict[str, ConstTensor], protected: set[str]) -> bool:
    if node.domain not in ("", "ai.onnx") or node.op_type not in FOLDERS:
        return False
    if not node.input or any(n and n not in available for n in node.input):
        return False
    if any(o in protected for o in node.output):
        return False
    ins = [available[n] for n in node.input if n]
    if node.op_type in FLOAT_ONLY_SAFE:
        if any(c.elem_type not in FLOAT_TYPES or c.shape is None for c in ins):
            return False
        out_numel = int(np.prod(np.broadcast_shapes(*[c.shape for c in ins]), dtype=np.int64))
        if out_numel * 8 > sum(c.nbytes for c in ins) + MAX_GROWTH_BYTES:
            return False  # broadcasting would blow up the model
    return True


FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)


def _lazy_output(node: onnx.NodeProto, inputs: list[ConstTensor | None], index: int) -> ConstTensor:
    fn = FOLDERS[node.op_type]
    attrs = _attrs(node)
    name = node.output[index]
    estimate = sum(c.nbytes for c in inputs if c is not None)

    def compute() -> np.ndarray:
        xs = [c.values() if c is not None else None for c in inputs]
        return c_contiguous(fn(node, attrs, xs)[index])

    elem_type = inputs[0].elem_type if inputs and inputs[0] is not None else onnx.TensorProto.FLOAT
    if node.op_type == "Cast":
        elem_type = attrs["to"]
    return ConstTensor(name, elem_type, None, estimate, compute=compute)
