"""numpy evaluation of the ops constant folding knows: `FOLDERS[op](node, attrs, inputs) -> array`.

Only ops whose numpy result is bit-identical to ONNX Runtime's: data movement, casts between
numpy-native types (`NUMPY_EXACT`), IEEE elementwise arithmetic on floats (`FLOAT_ONLY_SAFE`).
Inputs were validated by `fold_shapes` first, which shares the Flatten/Slice rules used here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper

from onnxport.core.graph.fold_shapes import flatten_axis, slice_params

T = onnx.TensorProto
FLOAT_TYPES = (T.FLOAT, T.DOUBLE, T.FLOAT16)
# Types numpy holds natively, so astype matches ONNX Runtime's Cast (not bfloat16/float8/strings).
NUMPY_EXACT = (*FLOAT_TYPES, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.BOOL)


def attrs_of(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _ints(x: np.ndarray | None) -> list[int] | None:
    return None if x is None else [int(v) for v in np.asarray(x).reshape(-1)]


def _transpose(node, a, xs):
    return np.transpose(xs[0], a.get("perm"))


def _reshape(node, a, xs):
    data, shape = xs[0], _ints(xs[1])
    if not a.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return data.reshape(shape)


def _unsqueeze(node, a, xs):
    axes = _ints(xs[1]) if len(xs) > 1 else a["axes"]
    out = xs[0]
    rank = out.ndim + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        out = np.expand_dims(out, ax)
    return out


def _squeeze(node, a, xs):
    axes = _ints(xs[1]) if len(xs) > 1 and xs[1] is not None else a.get("axes")
    return np.squeeze(xs[0], axis=tuple(axes) if axes is not None else None)


def _flatten(node, a, xs):
    axis = flatten_axis(a.get("axis", 1), xs[0].ndim)
    return xs[0].reshape(int(np.prod(xs[0].shape[:axis], dtype=np.int64)), -1)


def _cast(node, a, xs):
    return xs[0].astype(helper.tensor_dtype_to_np_dtype(a["to"]))


def _concat(node, a, xs):
    return np.concatenate(xs, axis=a["axis"])


def _gather(node, a, xs):
    return np.take(xs[0], xs[1].astype(np.int64), axis=a.get("axis", 0))


def _slice(node, a, xs):
    shapes = [None if x is None else x.shape for x in xs]
    index = [slice(None)] * xs[0].ndim
    for axis, start, end, step in slice_params(a, shapes, lambda i: xs[i]):
        index[axis] = slice(start, end, step)
    return xs[0][tuple(index)]


def _binary(fn: Callable) -> Callable:
    def run(node, a, xs):
        return np.asarray(fn(xs[0], xs[1]))
    return run


def _identity(node, a, xs):
    return xs[0]


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
