"""A tensor's declared shape, read from its ValueInfo (graph inputs, outputs, value_info).

Why here (util, below every layer): the graph, params and evaluate layers all read declared
shapes, and params may not import graph.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

Dim = int | str | None  # a size, a symbolic name ("batch"), or unknown


def value_info_shape(vi: onnx.ValueInfoProto) -> tuple[Dim, ...] | None:
    """The declared shape of `vi`'s tensor: one entry per axis, an int for a fixed size, the
    symbol's name for a symbolic one, None when unknown; None when no shape (not even a rank) is
    declared or `vi` is not a tensor."""
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)


def numel(shape: Iterable[int]) -> int:
    """The number of elements of a tensor of `shape` (1 for a scalar), as an exact Python int."""
    n = 1
    for d in shape:
        n *= int(d)
    return n
