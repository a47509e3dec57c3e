"""Output shapes of the ops constant folding evaluates, known before anything is computed.

Why: folding must check its memory budget (see `budgets`) before it allocates, and must never
fail while the model is being written. So every op `fold.FOLDERS` evaluates has a shape rule
here that also validates the node (perm, axes, Reshape target, Slice steps, Gather indices in
range...); `None` means "do not fold this node" (ONNX Runtime then reports or handles it).

Contract: `output_shape(node, attrs, shapes, value)` -> the output's shape or None. `shapes` are
the inputs' shapes (None for an absent optional input); `value(i)` returns the values of input i
when they are small enough to read (shape, axes, indices: `budgets.FOLD_VALUE_MAX`), else None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx

from onnxport.core.util.shapes import numel

Shape = tuple[int, ...]
ValueFn = Callable[[int], "np.ndarray | None"]


def output_shape(node: onnx.NodeProto, attrs: dict, shapes: Sequence[Shape | None], value: ValueFn) -> Shape | None:
    rule = RULES.get(node.op_type)
    if rule is None or not shapes or shapes[0] is None:
        return None
    try:
        return rule(attrs, shapes, value)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None



def _int_values(value: ValueFn, i: int, shapes: Sequence[Shape | None]) -> list[int] | None:
    """An optional 1-D integer input's values (None if absent); raises ValueError if unreadable."""
    if i >= len(shapes) or shapes[i] is None:
        return None
    v = value(i)
    if v is None or v.dtype.kind not in "iu" or v.ndim > 1:
        raise ValueError("shape-like input unknown")
    return [int(x) for x in v.reshape(-1)]


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range")
    return axis % rank


def _axes(values: Sequence[int], rank: int) -> list[int]:
    axes = [_axis(a, rank) for a in values]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    return axes


def _same(attrs, shapes, value) -> Shape:
    return shapes[0]


def _transpose(attrs, shapes, value) -> Shape:
    shape = shapes[0]
    perm = list(attrs.get("perm") or range(len(shape) - 1, -1, -1))
    if sorted(perm) != list(range(len(shape))):
        raise ValueError("perm is not a permutation")
    return tuple(shape[p] for p in perm)


def _reshape(attrs, shapes, value) -> Shape:
    data = shapes[0]
    target = _int_values(value, 1, shapes)
    if target is None:
        raise ValueError("no shape")
    allowzero = attrs.get("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            d = data[i]  # IndexError if past the input's rank
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out) or (allowzero and 0 in out and -1 in out):
        raise ValueError("bad shape")
    if -1 in out:
        known = numel(d for d in out if d != -1)
        if known == 0 or numel(data) % known:
            raise ValueError("shape does not divide")
        out[out.index(-1)] = numel(data) // known
    if numel(out) != numel(data):
        raise ValueError("element count differs")
    return tuple(out)


def _unsqueeze(attrs, shapes, value) -> Shape:
    axes = _int_values(value, 1, shapes) if len(shapes) > 1 else attrs.get("axes")
    if axes is None:
        raise ValueError("no axes")
    rank = len(shapes[0]) + len(axes)
    out = list(shapes[0])
    for ax in sorted(_axes(axes, rank)):
        out.insert(ax, 1)
    return tuple(out)


def _squeeze(attrs, shapes, value) -> Shape:
    shape = shapes[0]
    axes = _int_values(value, 1, shapes) if len(shapes) > 1 else attrs.get("axes")
    if axes is None:
        return tuple(d for d in shape if d != 1)
    axes = _axes(axes, len(shape))
    if any(shape[a] != 1 for a in axes):
        raise ValueError("squeezing a dim that is not 1")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def flatten_axis(axis: int, rank: int) -> int:
    """Flatten's axis in [0, rank] (negative counts from the end, as ONNX says)."""
    if not -rank <= axis <= rank:
        raise ValueError("axis out of range")
    return axis + rank if axis < 0 else axis


def _flatten(attrs, shapes, value) -> Shape:
    shape = shapes[0]
    axis = flatten_axis(attrs.get("axis", 1), len(shape))
    return (numel(shape[:axis]), numel(shape[axis:]))


def _concat(attrs, shapes, value) -> Shape:
    if any(s is None for s in shapes):
        raise ValueError("absent input")
    first = shapes[0]
    axis = _axis(attrs["axis"], len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ValueError("shapes differ")
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


def _gather(attrs, shapes, value) -> Shape:
    data, indices = shapes[0], shapes[1]
    axis = _axis(attrs.get("axis", 0), len(data))
    v = value(1)
    if v is None or v.dtype.kind not in "iu":
        raise ValueError("indices unknown")
    if v.size and (int(v.min()) < -data[axis] or int(v.max()) >= data[axis]):
        raise ValueError("index out of range")
    return data[:axis] + tuple(indices) + data[axis + 1:]


def slice_params(attrs, shapes, value) -> list[tuple[int, int, int, int]]:
    """(axis, start, end, step) per sliced axis, validated; the same for shapes and for values."""
    rank = len(shapes[0])
    if len(shapes) > 1:
        starts, ends = _int_values(value, 1, shapes), _int_values(value, 2, shapes)
        axes, steps = _int_values(value, 3, shapes), _int_values(value, 4, shapes)
    else:
        starts, ends, axes, steps = attrs.get("starts"), attrs.get("ends"), attrs.get("axes"), None
    if starts is None or ends is None or len(starts) != len(ends):
        raise ValueError("starts/ends")
    axes = _axes(axes if axes is not None else range(len(starts)), rank)
    steps = steps if steps is not None else [1] * len(starts)
    if len(axes) != len(starts) or len(steps) != len(starts) or 0 in steps:
        raise ValueError("axes/steps")
    return list(zip(axes, starts, ends, steps))


def _slice(attrs, shapes, value) -> Shape:
    out = list(shapes[0])
    for axis, start, end, step in slice_params(attrs, shapes, value):
        out[axis] = len(range(*slice(start, end, step).indices(out[axis])))
    return tuple(out)


def _broadcast(attrs, shapes, value) -> Shape:
    if len(shapes) != 2 or shapes[1] is None:
        raise ValueError("two inputs needed")
    return tuple(int(d) for d in np.broadcast_shapes(shapes[0], shapes[1]))


RULES: dict[str, Callable[[dict, Sequence[Shape | None], ValueFn], Shape]] = {
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Flatten": _flatten,
    "Cast": _same,
    "Concat": _concat,
    "Gather": _gather,
    "Slice": _slice,
    "Identity": _same,
    "Add": _broadcast,
    "Sub": _broadcast,
    "Mul": _broadcast,
}
