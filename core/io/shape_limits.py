"""Shapes numpy can hold: readers check every declared shape here before building an array.

Why: numpy refuses more than 64 dimensions, and dims whose non-zero product times the item size
passes its index range (2^63) - even when another dim is 0. So a header declaring [0, 2^62] holds
no bytes, passes every size check, and then fails wherever it is materialized. Readers refuse
such shapes as they read the header, in one line naming the file and the tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

NUMPY_MAX_NDIM = 64
NUMPY_MAX_BYTES = (1 << 63) - 1


def shape_problem(shape: Sequence[int], itemsize: int) -> str | None:
    """Why numpy cannot hold an array of `shape` with items of `itemsize` bytes; None if it can."""
    if len(shape) > NUMPY_MAX_NDIM:
        return f"has {len(shape)} dimensions (numpy arrays have at most {NUMPY_MAX_NDIM})"
    n = max(itemsize, 1)
    for d in shape:
        if d:
            n *= d
    if n > NUMPY_MAX_BYTES:
        return f"has dimensions {list(shape)}, too big for any array"
    return None
